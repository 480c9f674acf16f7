//go:build !amd64 || purego

package wire

// strBlocks is off where strMasks has no assembly: strMasksGo is slower than the word-at-a-time
// scan rawString falls back to.
const strBlocks = false

func strMasks(b []byte) (quote, backslash, control, escapable uint64) { return strMasksGo(b) }
