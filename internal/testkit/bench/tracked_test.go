package bench

import "testing"

func TestParseTracked(t *testing.T) {
	text := `# HELP cctrace_requests_total API request attempts
# TYPE cctrace_requests_total counter
cctrace_requests_total{code="200",kind="turn",model="claude-sonnet-4-5",stop_reason="end_turn"} 1234
cctrace_requests_total{code="error",kind="turn",model="unknown",stop_reason="none"} 6
cctrace_requests_total_created 1.7e+09
# TYPE cctrace_bodies_not_decoded_total counter
cctrace_bodies_not_decoded_total{body="request",reason="copy_budget"} 12
cctrace_bodies_not_decoded_total{body="request",reason="decode_queue"} 5
cctrace_bodies_not_decoded_total{body="response",reason="copy_budget"} 3
cctrace_bodies_not_decoded_total{body="response",reason="decode_queue"} 0
cctrace_request_messages_count{kind="turn"} 999
`
	got, err := parseTracked(text)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Tracked{Requests: 1240, NotDecoded: 17, QueueFull: 5}); got != want {
		t.Errorf("parseTracked = %+v, want %+v", got, want)
	}

	// Before any request there are no cctrace_requests_total series, only the not-decoded ones.
	got, err = parseTracked(`cctrace_bodies_not_decoded_total{body="request",reason="copy_budget"} 0` + "\n")
	if err != nil || got != (Tracked{}) {
		t.Errorf("parseTracked of an idle cctrace = %+v, %v; want zero, nil", got, err)
	}

	for _, bad := range []string{
		"",                                     // not cctrace's metrics
		`cctrace_requests_total{code="200"} 5`, // no not-decoded series: an older cctrace
		`cctrace_bodies_not_decoded_total{body="request",reason="decode_queue"} many`,
	} {
		if got, err := parseTracked(bad); err == nil {
			t.Errorf("parseTracked(%q) = %+v, want an error", bad, got)
		}
	}
}
