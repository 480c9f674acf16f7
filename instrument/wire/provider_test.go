package wire

import "testing"

func TestClassifyRoute(t *testing.T) {
	const vertex = "/v1/projects/proj-123/locations/us-east5/publishers/anthropic/models/"
	tests := []struct {
		method, path string
		want         Route
	}{
		{"POST", "/v1/messages", Route{Endpoint: EndpointMessages}},
		{"POST", "/anthropic/v1/messages", Route{Endpoint: EndpointMessages}},
		{"POST", "/v1/messages/count_tokens", Route{Endpoint: EndpointCountTokens}},
		{"POST", vertex + "claude-opus-5-5:streamRawPredict", Route{EndpointMessages, "claude-opus-5-5", true}},
		{"POST", vertex + "claude-opus-5-5@20261101:rawPredict", Route{EndpointMessages, "claude-opus-5-5@20261101", false}},
		{"POST", vertex + "count-tokens:rawPredict", Route{Endpoint: EndpointCountTokens}},
		{"POST", "/gw" + vertex + "claude-opus-5-5:streamRawPredict/", Route{EndpointMessages, "claude-opus-5-5", true}},
		{"POST", vertex + "claude-opus-5-5:predict", Route{}},
		{"POST", vertex + "claude-opus-5-5", Route{}},
		{"GET", vertex + "claude-opus-5-5:streamRawPredict", Route{}},
		{"POST", "/model/us.anthropic.claude-opus-5-5/invoke-with-response-stream", Route{EndpointMessages, "us.anthropic.claude-opus-5-5", true}},
		{"POST", "/model/anthropic.claude-opus-5-5-v1:0/invoke", Route{EndpointMessages, "anthropic.claude-opus-5-5-v1:0", false}},
		{"POST", "/model/arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/abc123/invoke-with-response-stream",
			Route{EndpointMessages, "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/abc123", true}},
		{"POST", "/model//invoke", Route{}},
		{"POST", "/model/x/converse", Route{}},
		{"GET", "/inference-profiles", Route{}},
		{"GET", "/model/us.anthropic.claude-opus-5-5/invoke", Route{}},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			if got := ClassifyRoute(tt.method, tt.path); got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParseProvider(t *testing.T) {
	for _, p := range Providers {
		got, err := ParseProvider(p.String())
		if err != nil || got != p {
			t.Errorf("ParseProvider(%q) = %v, %v", p.String(), got, err)
		}
	}
	if got, err := ParseProvider(" Vertex "); err != nil || got != ProviderVertex {
		t.Errorf("ParseProvider is not case-insensitive: %v, %v", got, err)
	}
	if _, err := ParseProvider("azure"); err == nil {
		t.Error("ParseProvider(azure) did not fail")
	}
}

// TestDecodeRequestPathModel: a body without a model takes the path's, and a streaming path
// makes the request streamed.
func TestDecodeRequestPathModel(t *testing.T) {
	c := NewBodyCache(100)
	req := &Request{Endpoint: EndpointMessages, PathModel: "us.anthropic.claude-opus-5-5", PathStream: true}
	if err := c.DecodeRequest(req, []byte(`{"anthropic_version":"bedrock-2023-05-31","messages":[{"role":"user","content":"hi"}],"max_tokens":10}`)); err != nil {
		t.Fatal(err)
	}
	if req.Body.Model != "us.anthropic.claude-opus-5-5" || !req.Body.Stream {
		t.Errorf("body model %q stream %v", req.Body.Model, req.Body.Stream)
	}
	req = &Request{Endpoint: EndpointMessages, PathModel: "claude-x"}
	if err := c.DecodeRequest(req, []byte(`{"model":"claude-opus-5-5","messages":[]}`)); err != nil {
		t.Fatal(err)
	}
	if req.Body.Model != "claude-opus-5-5" || req.Body.Stream {
		t.Errorf("the body's own model lost: %q stream %v", req.Body.Model, req.Body.Stream)
	}
}
