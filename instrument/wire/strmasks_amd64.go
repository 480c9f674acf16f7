//go:build !purego

package wire

// strBlocks says whether rawString scans long strings 64 bytes at a time with strMasks.
const strBlocks = true

// strMasks classifies the first 64 bytes of b (len(b) >= 64) with SSE2, one bit per byte, bit
// i for b[i]: quotes, backslashes, control characters, and the bytes that may follow a
// backslash in a two-byte escape (", \, /, b, f, n, r, t). It is strMasksGo in assembly.
//
//go:noescape
func strMasks(b []byte) (quote, backslash, control, escapable uint64)
