package instrument

import "hash/maphash"

// spanNameSlots is the size of a spanNames table.
const spanNameSlots = 64

// maxCachedName bounds the values a spanNames table keeps; longer ones are joined every time.
const maxCachedName = 128

// spanNames joins span name prefixes with values from the traffic ("chat " and a model,
// "execute_tool " and a tool name) and remembers the results in a fixed table, so that the few
// models and tools a session uses get their span names built once rather than once per span.
// A value that collides with another only costs a new string; the table never grows.
type spanNames struct {
	seed  maphash.Seed
	slots [spanNameSlots]string // prefix+value, by hash of value
}

func newSpanNames() spanNames { return spanNames{seed: maphash.MakeSeed()} }

// join returns prefix+value.
func (n *spanNames) join(prefix, value string) string {
	if len(value) > maxCachedName {
		return prefix + value
	}
	slot := &n.slots[maphash.String(n.seed, value)%spanNameSlots]
	if s := *slot; len(s) == len(prefix)+len(value) && s[:len(prefix)] == prefix && s[len(prefix):] == value {
		return s
	}
	*slot = prefix + value
	return *slot
}
