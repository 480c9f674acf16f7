package wire

// HashText hashes text for equality checks across requests (FNV-1a, 64 bits).
// It is what Body.FirstHumanTextHash and AgentCall.PromptHash use.
func HashText(s string) uint64 {
	const (
		offset = 14695981039346656037
		prime  = 1099511628211
	)
	h := uint64(offset)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= prime
	}
	return h
}
