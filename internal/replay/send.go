package replay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"
)

// SendOption configures Send.
type SendOption func(*sendConfig)

type sendConfig struct {
	client  *http.Client
	maxGap  time.Duration
	session string
}

// WithClient sends with c. The default is a client of its own, without timeouts: a stream may
// rightly last minutes.
func WithClient(c *http.Client) SendOption { return func(s *sendConfig) { s.client = c } }

// WithMaxGap shortens every pause between two requests to at most d, such as the minutes between
// two prompts of a recording. The default, 0, keeps the recorded pauses.
func WithMaxGap(d time.Duration) SendOption { return func(s *sendConfig) { s.maxGap = d } }

// WithSessionID sends the session as id: the recorded X-Claude-Code-Session-Id is replaced in
// headers and bodies (metadata.user_id carries it too), so that sending one recording twice
// makes two sessions, with traces of their own. The default keeps the recorded id.
func WithSessionID(id string) SendOption { return func(s *sendConfig) { s.session = id } }

// skippedHeaders are the recorded headers the transport sets itself.
var skippedHeaders = map[string]bool{"Content-Length": true, "Connection": true, "Host": true, "Accept-Encoding": true}

// Send sends the recorded requests of exchanges (one session, as Load returns them) to base,
// the URL of a proxy or an API, as the client sent them: method, path, query, headers and body.
// Each goes at its recorded moment relative to the first (see WithMaxGap), and not before every
// request recorded as answered before it was sent has been answered again, so that a tool result
// follows the answer that asked for it. Every response is read to its end. Send returns when all
// are answered, with an error naming each request that failed or got another status than the
// recording's.
func Send(ctx context.Context, base string, exchanges []*Exchange, opts ...SendOption) error {
	cfg := sendConfig{client: &http.Client{}}
	for _, o := range opts {
		o(&cfg)
	}
	exs := append([]*Exchange(nil), exchanges...)
	sort.SliceStable(exs, func(i, j int) bool { return exs[i].Request.Time.Before(exs[j].Request.Time) })

	done := make([]chan struct{}, len(exs))
	errs := make([]error, len(exs))
	var wg sync.WaitGroup
	start, at := time.Now(), time.Duration(0)
	for i, ex := range exs {
		done[i] = make(chan struct{})
		if i > 0 {
			gap := ex.Request.Time.Sub(exs[i-1].Request.Time)
			if cfg.maxGap > 0 && gap > cfg.maxGap {
				gap = cfg.maxGap
			}
			at += max(gap, 0)
		}
		if err := sleepUntil(ctx, start.Add(at)); err != nil {
			break
		}
		for j := range i {
			if !exs[j].Response.End.After(ex.Request.Time) {
				select {
				case <-done[j]:
				case <-ctx.Done():
				}
			}
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(done[i])
			errs[i] = cfg.send(ctx, base, ex)
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	return errors.Join(errs...)
}

// send sends one recorded request and reads its response to the end.
func (c *sendConfig) send(ctx context.Context, base string, ex *Exchange) error {
	old := ex.Request.Headers.SessionID
	body := ex.Body
	if c.session != "" && old != "" {
		body = bytes.ReplaceAll(body, []byte(old), []byte(c.session))
	}
	target := strings.TrimSuffix(base, "/") + ex.Request.Path
	if ex.Query != "" {
		target += "?" + ex.Query
	}
	req, err := http.NewRequestWithContext(ctx, ex.Request.Method, target, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("exchange %d: %w", ex.Seq, err)
	}
	for k, vs := range ex.Header {
		if skippedHeaders[k] {
			continue
		}
		for _, v := range vs {
			if c.session != "" && old != "" {
				v = strings.ReplaceAll(v, old, c.session)
			}
			req.Header.Add(k, v)
		}
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return fmt.Errorf("exchange %d: %w", ex.Seq, err)
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return fmt.Errorf("exchange %d: reading the response: %w", ex.Seq, err)
	}
	if resp.StatusCode != ex.Response.Status {
		return fmt.Errorf("exchange %d: %s %s answered %s, recorded %d", ex.Seq, ex.Request.Method, ex.Request.Path, resp.Status, ex.Response.Status)
	}
	return nil
}

func sleepUntil(ctx context.Context, t time.Time) error {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
