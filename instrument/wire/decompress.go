package wire

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
)

// MaxDecodedSize bounds what Decompress produces from one body, so that a small compressed body
// cannot expand into gigabytes (a zip bomb). Claude Code's largest request bodies are a few MB.
const MaxDecodedSize = 64 << 20

// ErrTooLarge is returned (wrapped) when a body decodes to more than MaxDecodedSize bytes.
var ErrTooLarge = errors.New("decoded body exceeds size limit")

// Decompress undoes the Content-Encoding of a body: gzip (or x-gzip), deflate (zlib-wrapped, or
// raw as some servers send it), br, zstd and identity. A list such as "gzip, br" is undone in
// reverse order, as the codings were applied in the order listed. An empty encoding returns b
// itself. Output is capped at MaxDecodedSize.
func Decompress(encoding string, b []byte) ([]byte, error) {
	encoding = strings.TrimSpace(encoding)
	if encoding == "" {
		return b, nil
	}
	codings := strings.Split(encoding, ",")
	for i := len(codings) - 1; i >= 0; i-- {
		coding := strings.ToLower(strings.TrimSpace(codings[i]))
		out, err := decodeOne(coding, b)
		if err != nil {
			return nil, fmt.Errorf("decompressing %s body: %w", coding, err)
		}
		b = out
	}
	return b, nil
}

// encoded reports whether a Content-Encoding changes the body: it names a coding other than
// identity.
func encoded(encoding string) bool {
	for coding := range strings.SplitSeq(encoding, ",") {
		if c := strings.TrimSpace(coding); c != "" && !strings.EqualFold(c, "identity") {
			return true
		}
	}
	return false
}

func decodeOne(coding string, b []byte) ([]byte, error) {
	switch coding {
	case "", "identity":
		return b, nil
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, err
		}
		defer zr.Close()
		return readCapped(zr, len(b))
	case "deflate":
		// RFC 9110 deflate is zlib-wrapped, but some servers send a raw deflate stream.
		if zr, err := zlib.NewReader(bytes.NewReader(b)); err == nil {
			defer zr.Close()
			return readCapped(zr, len(b))
		}
		fr := flate.NewReader(bytes.NewReader(b))
		defer fr.Close()
		return readCapped(fr, len(b))
	case "br":
		return readCapped(brotli.NewReader(bytes.NewReader(b)), len(b))
	case "zstd":
		zr, err := zstd.NewReader(bytes.NewReader(b),
			zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxMemory(MaxDecodedSize))
		if err != nil {
			return nil, err
		}
		defer zr.Close()
		return readCapped(zr, len(b))
	default:
		return nil, errors.New("unsupported content encoding")
	}
}

// readCapped reads r to its end, failing once more than MaxDecodedSize bytes come out.
func readCapped(r io.Reader, compressedSize int) ([]byte, error) {
	buf := bytes.NewBuffer(make([]byte, 0, min(MaxDecodedSize, 4*compressedSize+512)))
	n, err := buf.ReadFrom(io.LimitReader(r, MaxDecodedSize+1))
	if err != nil {
		return nil, err
	}
	if n > MaxDecodedSize {
		return nil, ErrTooLarge
	}
	return buf.Bytes(), nil
}
