package proxy

import (
	"bytes"
	"context"
	"io"
	"net/http"

	"github.com/cctrace/cctrace/instrument/wire"
)

// Gate may answer a request itself instead of forwarding it (a person over budget). Hold runs on
// every Messages API request and must answer at once, from what the headers tell; only for
// requests it holds does the proxy read the whole body before forwarding, and ask Refuse, which
// may wait for the body to be decoded off the forwarding path. Its methods are called
// concurrently.
type Gate interface {
	// Hold reports whether req (headers and identity known, no body yet) needs its body looked
	// at before it is forwarded. It may settle the person req.Identity stands for (User, Team),
	// which the Observer then receives.
	Hold(req *wire.Request) bool
	// Refuse decides on a held request from its body (as sent, still content-encoded as
	// req.ContentEncoding says; to be read, not kept): nil to forward it unchanged, or the error
	// to answer with. ctx ends when the client goes away.
	Refuse(ctx context.Context, req *wire.Request, body []byte) *Refusal
}

// Refusal is the Anthropic-shaped error a Gate answers a request with. The zero value is not a
// valid answer.
type Refusal struct {
	Status  int    // HTTP status
	Type    string // error.type
	Message string // error.message, shown to the person
}

// gateRequest reads a held request's body and either answers it with the Gate's refusal (and
// reports the exchange to the Observer) and returns true, or puts the body back for forwarding
// and returns false. A body over the parse limit, or one that cannot be read, is forwarded: the
// Gate never decides from part of a body.
func (p *Proxy) gateRequest(w http.ResponseWriter, r *http.Request, x *exchange) bool {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return false
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, p.cfg.parseLimit+1))
	rest := r.Body
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(body), rest), rest}
	if err != nil || int64(len(body)) > p.cfg.parseLimit {
		return false
	}
	refusal := p.cfg.gate.Refuse(r.Context(), x.req, body)
	if refusal == nil {
		return false
	}
	x.req.BodySize = int64(len(body))
	p.obs.RequestRead(x.req, body)
	// A refusal stands until the budget changes, so a retry only repeats it. The Anthropic SDKs
	// obey x-should-retry before their own status rules, and Claude Code in Bedrock mode retries
	// the refusal without it (docs/wire.md).
	w.Header().Set("X-Should-Retry", "false")
	n := writeAPIError(w, refusal.Status, refusal.Type, refusal.Message)
	x.resp.Status = refusal.Status
	x.resp.HeaderTime = p.cfg.now()
	x.resp.End = x.resp.HeaderTime
	x.resp.ContentType = "application/json"
	x.resp.BodySize = int64(n)
	x.resp.ErrorType = refusal.Type
	x.resp.ErrorMessage = refusal.Message
	p.obs.ResponseDone(&x.resp, nil)
	return true
}
