package pipeline_test

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"math/bits"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/cctrace/cctrace/instrument"
	"github.com/cctrace/cctrace/instrument/wire"
	"github.com/cctrace/cctrace/internal/bodybuf"
	"github.com/cctrace/cctrace/internal/pipeline"
	"github.com/cctrace/cctrace/internal/replay"
)

// recordedBody is one recorded exchange's request and response, with the raw bodies.
type recordedBody struct {
	name     string
	req      wire.Request
	reqBody  []byte
	resp     wire.Response
	respBody []byte
}

// loadRecordedBodies reads every exchange of testdata/claude-code, and adds a gzip-encoded
// variant of the first request and response of each session.
func loadRecordedBodies(t *testing.T) []recordedBody {
	t.Helper()
	dirs, _ := replay.Sessions("../../testdata/claude-code")
	var out []recordedBody
	for _, dir := range dirs {
		exchanges, err := replay.Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		for i, ex := range exchanges {
			rb := recordedBody{
				name:     fmt.Sprintf("%s/%03d", filepath.Base(dir), ex.Seq),
				req:      *ex.Request,
				reqBody:  ex.Body,
				resp:     *ex.Response,
				respBody: []byte(ex.RawResponse()),
			}
			out = append(out, rb)
			if i == 0 && rb.req.ContentEncoding == "" && rb.resp.ContentEncoding == "" {
				rb.name += "/gzip"
				rb.req.ContentEncoding, rb.reqBody = "gzip", gzipped(t, rb.reqBody)
				rb.resp.ContentEncoding, rb.respBody = "gzip", gzipped(t, rb.respBody)
				out = append(out, rb)
			}
		}
	}
	if len(out) < 50 {
		t.Fatalf("loaded %d recorded exchanges, want the sessions of testdata/claude-code", len(out))
	}
	return out
}

func gzipped(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// poolSized copies b into a buffer shaped like the proxy's pooled copies: its capacity is a
// power of two of 64 KiB or more, one of the classes a bodybuf.Pool takes back.
func poolSized(b []byte) []byte {
	c := max(64<<10, 1<<bits.Len(uint(max(len(b), 1)-1)))
	return append(make([]byte, 0, c), b...)
}

// scribble overwrites the whole of b's capacity with junk.
func scribble(b []byte) {
	junk := []byte("\x00\"\\junk{[")
	b = b[:cap(b)]
	for i := range b {
		b[i] = junk[i%len(junk)]
	}
}

// TestRecycledBodiesStayDecoded checks what pipeline.drain relies on when it hands each body
// back to the pool (WithBodyBuffers) once decoded: nothing the decoders produce or keep
// refers to the raw bytes. Recorded requests and responses go through the pipeline (and the
// requests through a wire.BodyCache); after each exchange its body buffers are overwritten with
// junk, as the next exchange's copy would overwrite them, and in the end each decoded Body and
// Response must still equal a decode of a pristine copy.
func TestRecycledBodiesStayDecoded(t *testing.T) {
	recorded := loadRecordedBodies(t)
	p := pipeline.New(instrument.New(instrument.Sinks{}), pipeline.WithQueueBudget(1<<30),
		pipeline.WithBodyBuffers(&bodybuf.Pool{}))
	type decoded struct {
		req  *wire.Request
		resp *wire.Response
	}
	got := make([]decoded, len(recorded))
	// The same requests through a BodyCache, which decodes each body from what it kept of the
	// conversation's previous one: that must not be the previous one's bytes either.
	cache := wire.NewBodyCache(0)
	cached := make([]*wire.Request, len(recorded))
	var scribbled [][]byte
	for i, rb := range recorded {
		req, resp := rb.req, rb.resp
		got[i] = decoded{&req, &resp}
		reqBuf, respBuf := poolSized(rb.reqBody), poolSized(rb.respBody)
		p.RequestRead(&req, reqBuf)
		p.ResponseDone(&resp, respBuf)
		p.Flush()
		if req.Body != nil {
			// The pipeline's BodyCache decodes the next body's messages into the same array
			// (wire.ReuseMessages): keep these, still pointing wherever they point.
			req.Body.Messages = slices.Clone(req.Body.Messages)
		}

		creq := rb.req
		cached[i] = &creq
		cacheBuf := poolSized(rb.reqBody)
		_ = cache.DecodeRequest(&creq, cacheBuf)

		// Each body is gone before the next exchange is decoded, as when the next copy reuses
		// its buffer.
		for _, b := range [][]byte{reqBuf, respBuf, cacheBuf} {
			scribble(b)
		}
		scribbled = append(scribbled, reqBuf)
	}
	if resumed, _ := cache.Stats(); resumed == 0 {
		t.Error("the BodyCache resumed no body: the recordings no longer exercise it")
	}
	// Not vacuous: the bodies the pipeline was handed are gone.
	if _, err := wire.ParseBody(scribbled[0][:len(recorded[0].reqBody)], recorded[0].req.ContentEncoding); err == nil {
		t.Fatal("a scribbled-over body still decodes")
	}

	decodedBodies := 0
	for i, rb := range recorded {
		t.Run(rb.name, func(t *testing.T) {
			if rb.req.Endpoint != wire.EndpointOther && len(rb.reqBody) > 0 {
				// A fresh BodyCache decodes the body whole, and fills in what the path says
				// (a cloud provider's model) as the pipeline's does.
				pristine := rb.req
				if err := wire.NewBodyCache(0).DecodeRequest(&pristine, bytes.Clone(rb.reqBody)); err != nil {
					t.Fatalf("pristine request body: %v", err)
				}
				want := pristine.Body
				decodedBodies++
				if !reflect.DeepEqual(got[i].req.Body, want) {
					t.Errorf("request body decoded before recycling differs from a pristine decode:\n got %+v\nwant %+v", got[i].req.Body, want)
				}
				if !reflect.DeepEqual(cached[i].Body, want) {
					t.Errorf("request body decoded by a BodyCache before recycling differs from a pristine decode:\n got %+v\nwant %+v", cached[i].Body, want)
				}
			}
			want := rb.resp
			wire.DecodeResponse(&want, rb.req.Endpoint, bytes.Clone(rb.respBody))
			wire.DecodeRateLimit(&want)
			if !reflect.DeepEqual(*got[i].resp, want) {
				t.Errorf("response decoded before recycling differs from a pristine decode:\n got %+v\nwant %+v", *got[i].resp, want)
			}
			if got[i].resp.Message == nil && got[i].resp.ErrorType == "" && got[i].resp.Status == 200 && rb.req.Endpoint == wire.EndpointMessages {
				t.Errorf("a 200 Messages response decoded to nothing: %+v", *got[i].resp)
			}
		})
	}
	if decodedBodies < 50 {
		t.Errorf("%d request bodies decoded, want most of the recordings", decodedBodies)
	}
}
