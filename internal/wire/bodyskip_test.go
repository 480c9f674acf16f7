package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
)

// skipStats counts how bodies were handed over by decodeTail.
type skipStats struct {
	bodies, tails, notDecoded int
	bodyBytes, tailBytes      int // of the bodies handed over from a Resume
}

// decodeTail hands body over the way the proxy does: it takes the hint of key before decoding,
// runs a PrefixSkipper over body in random chunks, keeps the bytes from Skippable() on and
// decodes them with the Resume (the whole body when nothing matched). It fails unless the result
// is ParseBody's (the same Body, or the same error), or a "not decoded" for a documented reason.
// It reports the bytes skipped.
func decodeTail(t testing.TB, c *BodyCache, key string, body []byte, encoding string, rng *rand.Rand, st *skipStats) int {
	t.Helper()
	id, agent, _ := strings.Cut(key, "\x00") // a key made by BodyKey, or a plain session id
	req := &Request{Endpoint: EndpointMessages, Headers: Headers{SessionID: id, AgentID: agent}, ContentEncoding: encoding}
	key = BodyKey(req.Headers)
	handed := body
	if encoding == "" {
		s := NewPrefixSkipper(c.Hint(key))
		for rest := body; len(rest) > 0; {
			n := min(len(rest), chunkSize(rng))
			s.Write(rest[:n])
			rest = rest[n:]
			if got := s.Skippable(); got > int64(len(body)-len(rest)) {
				t.Fatalf("Skippable %d beyond the %d bytes written", got, len(body)-len(rest))
			}
		}
		if off := s.Skippable(); off > 0 {
			req.BodyFrom = s.Resume()
			if req.BodyFrom.Offset() != off {
				t.Fatalf("Resume at %d, Skippable %d", req.BodyFrom.Offset(), off)
			}
			handed = bytes.Clone(body[off:]) // the skipped bytes are gone
		} else if s.Resume() != nil {
			t.Fatal("Resume without anything skippable")
		}
	}
	st.bodies++
	err := c.DecodeRequest(req, handed)
	if len(body) == 0 {
		if err != nil || req.Body != nil || req.BodyFrom != nil {
			t.Fatalf("empty body: error %v, Body %v, BodyFrom %v", err, req.Body, req.BodyFrom)
		}
		return 0 // left alone
	}
	want, wantErr := ParseBody(body, encoding)
	if req.BodyFrom != nil {
		st.tails++
		st.bodyBytes += len(body)
		st.tailBytes += len(handed)
	}
	if err != nil && strings.HasPrefix(err.Error(), "not decoded: ") {
		if req.BodyFrom == nil || req.ParseError != err.Error() || req.Body != nil {
			t.Fatalf("not decoded (BodyFrom %v, ParseError %q, Body %v): %v", req.BodyFrom, req.ParseError, req.Body, err)
		}
		st.notDecoded++
		checkNotDecoded(t, body, want, req.BodyFrom.Offset(), err)
		t.Logf("%v", err)
		return 0
	}
	if fmt.Sprint(err) != fmt.Sprint(wantErr) || (err != nil) != (req.ParseError != "") {
		t.Fatalf("DecodeRequest error %v (ParseError %q), ParseBody error %v", err, req.ParseError, wantErr)
	}
	if !reflect.DeepEqual(req.Body, want) {
		g, _ := json.MarshalIndent(req.Body, "", " ")
		w, _ := json.MarshalIndent(want, "", " ")
		t.Fatalf("DecodeRequest from offset %d differs from ParseBody\ncache:     %s\nParseBody: %s", req.BodyFrom.Offset(), g, w)
	}
	return int(req.BodyFrom.Offset())
}

// chunkSize draws the size of the next chunk a proxy reads: anything from one byte to 64 KiB,
// small ones as often as large ones.
func chunkSize(rng *rand.Rand) int {
	return 1 + rng.IntN(1<<rng.IntN(17))
}

// checkNotDecoded fails unless err is a documented reason not to decode body from off: its last
// user or assistant message starts before off.
func checkNotDecoded(t testing.TB, body []byte, want *Body, off int64, err error) {
	t.Helper()
	if want == nil || !strings.Contains(err.Error(), "last user or assistant message") {
		t.Fatalf("not decoded from offset %d, for no documented reason: %v", off, err)
	}
	last := -1
	for i, m := range want.Messages {
		if m.Role == RoleUser || m.Role == RoleAssistant {
			last = i
		}
	}
	starts := messageStarts(body)
	if last < 0 || last >= len(starts) || int64(starts[last]) >= off {
		t.Fatalf("not decoded from offset %d, though the last user or assistant message (%d, of %d starting at %v) is after it: %v", off, last, len(starts), starts, err)
	}
}

// messageStarts returns where each element of a body's (last) messages array starts, as the
// decoder counts offsets: right after the '[' or ','.
func messageStarts(b []byte) []int {
	r := jsonReader{b: b}
	var starts []int
	r.object(func(key []byte) {
		if string(key) != "messages" {
			r.skip()
			return
		}
		starts = starts[:0]
		r.array(func() {
			starts = append(starts, r.i)
			r.skip()
		})
	})
	return starts
}

// recordedRequest is one request of testdata/claude-code.
type recordedRequest struct {
	key      string
	encoding string
	body     []byte
}

// recordedSessions reads the Messages API requests of every recorded Claude Code session, in
// order, keyed as the pipeline keys them.
func recordedSessions(t testing.TB) [][]recordedRequest {
	dirs, err := filepath.Glob("../../testdata/claude-code/*/001.json")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no recordings: %v", err)
	}
	var sessions [][]recordedRequest
	for _, first := range dirs {
		paths, _ := filepath.Glob(filepath.Join(filepath.Dir(first), "[0-9][0-9][0-9].json"))
		sort.Strings(paths)
		var reqs []recordedRequest
		for _, p := range paths {
			raw, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			var rec struct {
				Path            string              `json:"path"`
				Headers         map[string][]string `json:"headers"`
				ContentEncoding string              `json:"content_encoding"`
				Body            json.RawMessage     `json:"body"`
			}
			if err := json.Unmarshal(raw, &rec); err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			if len(rec.Body) == 0 || !strings.HasPrefix(rec.Path, "/v1/messages") {
				continue
			}
			reqs = append(reqs, recordedRequest{BodyKey(ParseHeaders(rec.Headers)), rec.ContentEncoding, rec.Body})
		}
		sessions = append(sessions, reqs)
	}
	return sessions
}

// TestPrefixSkipperRecorded hands every request of every recorded Claude Code session over as
// the proxy does, without the bytes a PrefixSkipper found to repeat the session's last body, and
// checks each decode against ParseBody of the whole body.
func TestPrefixSkipperRecorded(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for seed := range 4 {
		c := NewBodyCache(0)
		var st skipStats
		later := 0 // requests after the first of their key
		seen := map[string]bool{}
		for _, reqs := range recordedSessions(t) {
			for _, r := range reqs {
				if seen[r.key] {
					later++
				}
				seen[r.key] = true
				decodeTail(t, c, r.key, r.body, r.encoding, rng, &st)
			}
		}
		if seed == 0 {
			t.Logf("%d recorded requests (%d after the first of their conversation): %d handed over from a Resume, %d of %d bytes (%d not decoded)",
				st.bodies, later, st.tails, st.tailBytes, st.bodyBytes, st.notDecoded)
		}
		// The requests that repeat an earlier one of their key without resuming are a session's
		// side request and the first after a compaction.
		if st.tails < later*2/3 || st.tailBytes >= st.bodyBytes || st.notDecoded > 0 {
			t.Fatalf("%d of %d later requests handed over from a Resume (%d of %d bytes), %d not decoded", st.tails, later, st.tailBytes, st.bodyBytes, st.notDecoded)
		}
	}
}

// TestPrefixSkipperConversation runs the synthetic conversations of TestBodyCacheConversation,
// handing each body over from a Resume.
func TestPrefixSkipperConversation(t *testing.T) {
	for _, tc := range []struct {
		name        string
		systemFirst bool
		lastCC      int
	}{
		{"claude code order", false, 1},
		{"system first", true, 1},
		{"two cache markers", false, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(3, uint64(len(tc.name))))
			c := NewBodyCache(0)
			var st skipStats
			cv := &conversation{systemFirst: tc.systemFirst, lastCC: tc.lastCC}
			side := &conversation{}
			cv.add("user", text("<system-reminder>\nCLAUDE.md says hi\n</system-reminder>"), text("Fix the retry loop"))
			decodeTail(t, c, "s", cv.body(t), "", rng, &st)
			resumed := 0
			for i := range 12 {
				growConversation(cv, i)
				body := cv.body(t)
				if n := decodeTail(t, c, "s", body, "", rng, &st); n > 0 {
					resumed++
				}
				if i%4 == 1 {
					decodeTail(t, c, "s", side.body(t), "", rng, &st)
					side.add("assistant", text("Retry loop fix"))
					side.add("user", text("again"))
				}
			}
			if resumed < 10 {
				t.Errorf("%d of 12 growing bodies handed over from a Resume, want at least 10", resumed)
			}
			same := cv.body(t)
			if decodeTail(t, c, "s", same, "", rng, &st) == 0 {
				t.Error("identical body not handed over from a Resume")
			}
			cv.msgs[1] = map[string]any{"role": "assistant", "content": []map[string]any{text("[cleared]")}}
			decodeTail(t, c, "s", cv.body(t), "", rng, &st)
			cv.msgs = cv.msgs[:3]
			decodeTail(t, c, "s", cv.body(t), "", rng, &st)
			cv.add("assistant", text("ok"))
			cv.add("user", text("next"))
			decodeTail(t, c, "s", cv.body(t), "", rng, &st)
			cv.msgs[len(cv.msgs)-1] = map[string]any{"role": "user", "content": []map[string]any{text("other")}}
			decodeTail(t, c, "s", cv.body(t), "", rng, &st)
			// Cut short, or broken after the shared prefix: the same errors as ParseBody.
			good := cv.body(t)
			decodeTail(t, c, "s", good[:len(good)-40], "", rng, &st)
			broken := bytes.Clone(good)
			broken[len(broken)-30] = '#'
			decodeTail(t, c, "s", broken, "", rng, &st)
			decodeTail(t, c, "s", append(bytes.Clone(good), `,"x":1`...), "", rng, &st)
			decodeTail(t, c, "s", good, "", rng, &st)
			// Ending in system-role messages, the last user message before the resume point.
			cv.add("system", text("Plan mode is active."))
			decodeTail(t, c, "s", cv.body(t), "", rng, &st)
			cv.add("system", text("## Exited Plan Mode"))
			cv.add("system", text("Plan mode is active."))
			decodeTail(t, c, "s", cv.body(t), "", rng, &st)
			cv.add("system", text("## Exited Plan Mode"))
			decodeTail(t, c, "s", cv.body(t), "", rng, &st)
			decodeTail(t, c, "s", cv.body(t), "", rng, &st)
			if decodeTail(t, c, "other", good, "", rng, &st) > 0 {
				t.Error("resumed across keys")
			}
			t.Logf("%d bodies, %d handed over from a Resume (%d of %d bytes), %d not decoded", st.bodies, st.tails, st.tailBytes, st.bodyBytes, st.notDecoded)
		})
	}
}

// growConversation adds round i of TestBodyCacheConversation's conversation: a tool call and its
// result, and now and then system-role messages, a /compact and a task notification.
func growConversation(cv *conversation, i int) {
	id := fmt.Sprintf("toolu_%02d", i)
	cv.add("assistant", text("Reading."), toolUse(id, "Read"))
	content := "package main\n\"quoted\" \\ ünï"
	if i == 3 {
		content = "Done.\nagentId: a3f9c1d27b8e4c05 (use SendMessage)"
	}
	cv.add("user", toolResult(id, content, i == 5))
	switch i {
	case 2:
		cv.add("system", text("Plan mode is active. Do not edit."))
	case 4:
		cv.add("system", text("## Exited Plan Mode"))
		cv.add("user", text("<command-name>/compact</command-name>"))
	case 7:
		cv.add("user", text("<task-notification>agent finished</task-notification>"), text("carry on"))
	}
}

// TestPrefixSkipperLargeBody grows a conversation of about 1 MB, and rewrites messages in its
// middle: what is handed over starts at most a dense checkpoint gap (and a message) before the
// first byte that changed.
func TestPrefixSkipperLargeBody(t *testing.T) {
	for _, systemFirst := range []bool{false, true} {
		t.Run(fmt.Sprint("system first ", systemFirst), func(t *testing.T) { largeBody(t, systemFirst) })
	}
}

func largeBody(t *testing.T, systemFirst bool) {
	rng := rand.New(rand.NewPCG(5, 6))
	c := NewBodyCache(0)
	var st skipStats
	cv := &conversation{systemFirst: systemFirst}
	cv.add("user", text("Refactor the proxy."))
	chunk := strings.Repeat("func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {\n\t\"x\"\n}\n", 40)
	quoted, _ := json.Marshal(chunk)
	for i := range (1 << 20) / len(quoted) {
		id := fmt.Sprintf("toolu_%04d", i)
		cv.add("assistant", text("Reading."), toolUse(id, "Read"))
		cv.add("user", toolResult(id, chunk, false))
	}
	body := cv.body(t)
	decodeTail(t, c, "k", body, "", rng, &st)
	// The next request: one more round.
	cv.add("assistant", text("Reading."), toolUse("toolu_x", "Read"))
	cv.add("user", toolResult("toolu_x", "short", false))
	body = cv.body(t)
	if n := decodeTail(t, c, "k", body, "", rng, &st); len(body)-n > 16<<10 {
		t.Errorf("the next request of a %d-byte conversation kept %d bytes", len(body), len(body)-n)
	}
	// Context editing rewrites a message in the middle, and then near the start.
	for _, at := range []int{len(cv.msgs) * 2 / 3, 5} {
		prev := body
		cv.msgs[at] = map[string]any{"role": "user", "content": []map[string]any{toolResult("cleared", "[cleared]", false)}}
		body = cv.body(t)
		changed := 0
		for changed < len(body) && changed < len(prev) && body[changed] == prev[changed] {
			changed++
		}
		n := decodeTail(t, c, "k", body, "", rng, &st)
		if changed-n > denseCheckpointGap+len(chunk)+200 || n > changed {
			t.Errorf("a body changed from offset %d on handed over from %d", changed, n)
		}
		// The next request resumes close to its end again.
		cv.add("assistant", text("ok"))
		cv.add("user", text("go on"))
		body = cv.body(t)
		if n := decodeTail(t, c, "k", body, "", rng, &st); len(body)-n > 16<<10 {
			t.Errorf("after an edit, the next request of a %d-byte conversation kept %d bytes", len(body), len(body)-n)
		}
	}
}

// TestPrefixSkipperNotDecoded hands over a body whose last user message lies before the resume
// point, where the cache kept no texts of it: DecodeRequest says so rather than decode it.
func TestPrefixSkipperNotDecoded(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	c := NewBodyCache(0)
	var st skipStats
	long := strings.Repeat("Plan mode is active. ", 2000) // 40 KB: dense checkpoints fall on system messages
	cv := &conversation{systemFirst: true}
	cv.add("user", text("Start."))
	for range 6 {
		cv.add("system", text(long))
	}
	cv.add("user", text("Later."))
	for range 3 {
		cv.add("system", text("reminder"))
	}
	decodeTail(t, c, "k", cv.body(t), "", rng, &st)
	// The body after a dense checkpoint changes, and holds system-role messages only.
	cv.msgs = cv.msgs[:6]
	cv.add("system", text("changed"))
	decodeTail(t, c, "k", cv.body(t), "", rng, &st)
	if st.notDecoded != 1 {
		t.Fatalf("%d bodies not decoded, want 1", st.notDecoded)
	}
	// The cache still resumes the next body.
	cv.add("user", text("Again."))
	if decodeTail(t, c, "k", cv.body(t), "", rng, &st) == 0 {
		t.Error("the body after one not decoded was not handed over from a Resume")
	}
}

// TestPrefixSkipperStale decodes a body from a Resume after the entry it was taken from changed
// or was dropped: DecodeRequest must report it as not decoded, never decode it wrongly.
func TestPrefixSkipperStale(t *testing.T) {
	grown := func(t *testing.T, cv *conversation, rounds int) []byte {
		for i := range rounds {
			growConversation(cv, i)
		}
		return cv.body(t)
	}
	// handOver takes the hint of session id key, then returns the request and tail for body.
	handOver := func(t *testing.T, c *BodyCache, key string, body []byte) (*Request, []byte) {
		t.Helper()
		s := NewPrefixSkipper(c.Hint(BodyKey(Headers{SessionID: key})))
		s.Write(body)
		if s.Skippable() == 0 {
			t.Fatal("nothing skippable")
		}
		req := &Request{Endpoint: EndpointMessages, Headers: Headers{SessionID: key}, BodyFrom: s.Resume()}
		return req, body[s.Skippable():]
	}
	wantNotDecoded := func(t *testing.T, c *BodyCache, req *Request, tail []byte) {
		t.Helper()
		err := c.DecodeRequest(req, tail)
		if err == nil || !strings.HasPrefix(err.Error(), "not decoded: ") || req.ParseError != err.Error() || req.Body != nil {
			t.Fatalf("stale Resume: error %v, ParseError %q, Body %v", err, req.ParseError, req.Body)
		}
	}
	for _, tc := range []struct {
		name string
		// between decodes bodies between the hint and the decode; cv is the conversation, its
		// last body handed over.
		between func(t *testing.T, c *BodyCache, cv *conversation)
		// decodes says what must happen: "yes" (an entry still has the Resume's checkpoint with
		// the same bytes before it), "no" (none has), or "either" (a decode, if any, must be right).
		decodes string
	}{
		{"the conversation grew", func(t *testing.T, c *BodyCache, cv *conversation) {
			growConversation(cv, 20)
			parseBoth(t, c, "s\x00", cv.body(t), "")
		}, "either"},
		{"the same body again", func(t *testing.T, c *BodyCache, cv *conversation) {
			// What happens when the pipeline decodes the previous request after this one's hint
			// was taken: the entry was stored into, and still has the checkpoint.
			parseBoth(t, c, "s\x00", cv.body(t), "")
		}, "yes"},
		{"a new entry beside it", func(t *testing.T, c *BodyCache, cv *conversation) {
			edited := &conversation{msgs: slices.Clone(cv.msgs)}
			edited.msgs[1] = map[string]any{"role": "assistant", "content": []map[string]any{text("[cleared]")}}
			parseBoth(t, c, "s\x00", edited.body(t), "")
		}, "yes"},
		{"evicted by other keys", func(t *testing.T, c *BodyCache, _ *conversation) {
			for i := range 40 {
				other := &conversation{}
				parseBoth(t, c, fmt.Sprint("o", i, "\x00"), grown(t, other, 6), "")
			}
		}, "no"},
		{"evicted by other conversations of the key", func(t *testing.T, c *BodyCache, _ *conversation) {
			for i := range maxEntriesPerKey {
				other := &conversation{}
				other.add("user", text(fmt.Sprint("side ", i)))
				parseBoth(t, c, "s\x00", grown(t, other, 3), "")
			}
		}, "no"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewBodyCache(200)
			cv := &conversation{}
			cv.add("user", text("Fix the retry loop"))
			parseBoth(t, c, "s\x00", grown(t, cv, 8), "")
			growConversation(cv, 9)
			body := cv.body(t)
			req, tail := handOver(t, c, "s", body)
			tc.between(t, c, &conversation{msgs: slices.Clone(cv.msgs)})
			if tc.decodes == "no" {
				wantNotDecoded(t, c, req, tail)
				return
			}
			want, _ := ParseBody(body, "")
			err := c.DecodeRequest(req, tail)
			switch {
			case err == nil && !reflect.DeepEqual(req.Body, want):
				t.Fatalf("DecodeRequest from a Resume decoded wrongly\n got %+v\nwant %+v", req.Body, want)
			case err != nil && tc.decodes == "yes":
				t.Fatalf("DecodeRequest from a Resume whose checkpoint is still there: %v", err)
			case err != nil && (!strings.HasPrefix(err.Error(), "not decoded: ") || req.Body != nil):
				t.Fatalf("stale Resume: error %v, Body %v", err, req.Body)
			}
		})
	}

	// A Resume of another key: not decoded. One used twice (the same body, decoded again): the
	// entry still has its checkpoint, so it decodes the same.
	c := NewBodyCache(0)
	cv := &conversation{}
	cv.add("user", text("Fix the retry loop"))
	parseBoth(t, c, "s\x00", grown(t, cv, 8), "")
	growConversation(cv, 9)
	body := cv.body(t)
	req, tail := handOver(t, c, "s", body)
	other := *req
	other.Headers.SessionID = "t"
	wantNotDecoded(t, c, &other, tail)
	again := *req
	if err := c.DecodeRequest(req, tail); err != nil {
		t.Fatal(err)
	}
	if err := c.DecodeRequest(&again, tail); err != nil || !reflect.DeepEqual(again.Body, req.Body) {
		t.Fatalf("the same Resume again: %v", err)
	}
	// A zero Resume resumes nothing.
	wantNotDecoded(t, c, &Request{Endpoint: EndpointMessages, Headers: Headers{SessionID: "s"}, BodyFrom: &Resume{}}, body)
	// Nor does a compressed body.
	req, tail = handOver(t, c, "s", body)
	req.ContentEncoding = "gzip"
	wantNotDecoded(t, c, req, tail)
}

// TestPrefixSkipperNothing checks the skippers that know nothing: they skip nothing.
func TestPrefixSkipperNothing(t *testing.T) {
	c := NewBodyCache(0)
	if h := c.Hint(BodyKey(Headers{})); h != nil {
		t.Fatalf("an empty cache's hint: %+v", h)
	}
	for _, s := range []*PrefixSkipper{{}, NewPrefixSkipper(nil), NewPrefixSkipper(&Hint{})} {
		s.Write([]byte(`{"messages":[{"role":"user","content":"hi"},{"role":"user","content":"hi"}]}`))
		if s.Skippable() != 0 || s.Resume() != nil {
			t.Errorf("skipper knowing nothing: Skippable %d, Resume %v", s.Skippable(), s.Resume())
		}
	}
	var r *Resume
	if r.Offset() != 0 {
		t.Error("nil Resume at an offset")
	}
}

// TestPrefixSkipperTwoBodies checks a body against the hint of a key holding two conversations,
// the main thread's behind a side request decoded since: it resumes from the main thread's.
func TestPrefixSkipperTwoBodies(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	c := NewBodyCache(0)
	var st skipStats
	cv := &conversation{}
	cv.add("user", text("Fix the retry loop"))
	side := &conversation{}
	side.add("user", text("Write a title"))
	side.add("assistant", text("Retry"))
	side.add("user", text("shorter"))
	for i := range 4 {
		growConversation(cv, i)
		decodeTail(t, c, "s", cv.body(t), "", rng, &st)
	}
	decodeTail(t, c, "s", side.body(t), "", rng, &st)
	if h := c.Hint(BodyKey(Headers{SessionID: "s"})); h == nil || len(h.bodies) != 2 {
		t.Fatalf("hint of two conversations: %+v", h)
	}
	growConversation(cv, 4)
	body := cv.body(t)
	if n := decodeTail(t, c, "s", body, "", rng, &st); n < len(body)/2 {
		t.Errorf("%d of %d bytes skipped", n, len(body))
	}
}

// TestHintConcurrent takes hints and runs skippers on other goroutines while the cache decodes
// (run with -race).
func TestHintConcurrent(t *testing.T) {
	c := NewBodyCache(0)
	cv := &conversation{}
	cv.add("user", text("Fix the retry loop"))
	key := BodyKey(Headers{SessionID: "s"})
	var bodies [][]byte
	for i := range 30 {
		growConversation(cv, i)
		bodies = append(bodies, cv.body(t))
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := range 2 {
		wg.Go(func() {
			for i := g; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				s := NewPrefixSkipper(c.Hint(key))
				s.Write(bodies[i%len(bodies)])
				_ = s.Resume()
			}
		})
	}
	for _, body := range bodies {
		parseBoth(t, c, key, body, "")
	}
	close(stop)
	wg.Wait()
}

// FuzzPrefixSkipper decodes a body, then hands over another that shares a prefix of it in
// random chunks: whatever is skipped, the decode is ParseBody's, or not decoded for a
// documented reason.
func FuzzPrefixSkipper(f *testing.F) {
	cv := &conversation{}
	cv.add("user", text("hi"))
	cv.add("assistant", text("hello"), toolUse("t1", "Read"))
	cv.add("user", toolResult("t1", "x", false))
	cv.add("system", text("Plan mode is active."))
	seed := cv.body(f)
	f.Add(seed, uint(len(seed)-60), []byte(`{"role":"user","content":"more"}],"stream":true}`), uint64(1))
	f.Add(seed, uint(len(seed)), []byte{}, uint64(2))
	f.Add(readFixture(f, "request_tool_results.json"), uint(200), []byte(`]}`), uint64(3))
	f.Add(seed, uint(len(seed)-1), []byte(`,"messages":[{"role":"user","content":"again"}]}`), uint64(4))
	f.Fuzz(func(t *testing.T, a []byte, cut uint, tail []byte, chunks uint64) {
		rng := rand.New(rand.NewPCG(chunks, 0))
		c := NewBodyCache(0)
		var st skipStats
		decodeTail(t, c, "k", a, "", rng, &st)
		b := append(bytes.Clone(a[:int(cut%uint(len(a)+1))]), tail...)
		decodeTail(t, c, "k", b, "", rng, &st)
		decodeTail(t, c, "k", a, "", rng, &st)
	})
}

// TestPrefixSkipperShorterBodies hands over two shorter bodies that share a long body's start up
// to a dense checkpoint, both checked against the long body's hint before either is decoded (the
// pipeline behind), as when a session goes from long requests to shorter ones: the second must
// still decode once the first has been stored into the entry.
func TestPrefixSkipperShorterBodies(t *testing.T) {
	long := &conversation{}
	long.add("user", text("Fix the retry loop"))
	big := strings.Repeat("source line \"quoted\" \\ ünï\n", 400) // ~11 KB
	for i := range 40 {
		id := fmt.Sprintf("toolu_%02d", i)
		long.add("assistant", text("Reading."), toolUse(id, "Read"))
		long.add("user", toolResult(id, big, false))
	}
	c := NewBodyCache(0)
	parseBoth(t, c, "s\x00", long.body(t), "")
	hint := c.Hint("s\x00")

	short := func(nonce string) []byte {
		cv := &conversation{msgs: slices.Clone(long.msgs[:31])}
		cv.add("user", text("Now run the tests "+nonce))
		return cv.body(t)
	}
	var reqs []*Request
	var tails [][]byte
	var bodies [][]byte
	for _, nonce := range []string{"1", "2"} {
		body := short(nonce)
		s := NewPrefixSkipper(hint)
		s.Write(body)
		if s.Skippable() == 0 {
			t.Fatal("nothing skippable")
		}
		reqs = append(reqs, &Request{Endpoint: EndpointMessages, Headers: Headers{SessionID: "s"}, BodyFrom: s.Resume()})
		tails = append(tails, body[s.Skippable():])
		bodies = append(bodies, body)
	}
	for i, req := range reqs {
		want, _ := ParseBody(bodies[i], "")
		if err := c.DecodeRequest(req, tails[i]); err != nil || !reflect.DeepEqual(req.Body, want) {
			t.Fatalf("body %d from offset %d: %v", i, req.BodyFrom.Offset(), err)
		}
	}
}

// TestPrefixSkipperPipelineBehind takes every request's hint before the previous request was
// decoded, as when the pipeline is behind, over a conversation that grows by two messages per
// request and then jumps by many: every body must still decode, from an offset.
func TestPrefixSkipperPipelineBehind(t *testing.T) {
	cv := &conversation{}
	cv.add("user", text("Fix the retry loop"))
	big := strings.Repeat("source line \"quoted\" \\ ünï\n", 100)
	grow := func(n int) {
		for range n {
			id := fmt.Sprintf("toolu_%03d", len(cv.msgs))
			cv.add("assistant", text("Reading."), toolUse(id, "Read"))
			cv.add("user", toolResult(id, big, false))
		}
	}
	c := NewBodyCache(0)
	grow(3)
	parseBoth(t, c, "s\x00", cv.body(t), "")
	type pending struct {
		req  *Request
		tail []byte
		body []byte
	}
	var queue []pending
	resumed := 0
	for i, n := range []int{1, 1, 1, 40, 1, 1, 60, 1} {
		grow(n)
		body := cv.body(t)
		s := NewPrefixSkipper(c.Hint("s\x00"))
		s.Write(body)
		queue = append(queue, pending{&Request{Endpoint: EndpointMessages, Headers: Headers{SessionID: "s"}, BodyFrom: s.Resume()}, body[s.Skippable():], body})
		if i == 0 {
			continue // one request behind from here on
		}
		p := queue[0]
		queue = queue[1:]
		want, _ := ParseBody(p.body, "")
		if err := c.DecodeRequest(p.req, p.tail); err != nil || !reflect.DeepEqual(p.req.Body, want) {
			t.Fatalf("request %d, from offset %d: %v", i-1, p.req.BodyFrom.Offset(), err)
		}
		if p.req.BodyFrom != nil {
			resumed++
		}
	}
	if resumed < 6 {
		t.Errorf("%d of 7 bodies handed over from an offset", resumed)
	}
}
