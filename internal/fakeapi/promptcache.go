package fakeapi

import (
	"encoding/binary"
	"time"

	"github.com/zeebo/xxh3"

	"github.com/cctrace/cctrace/instrument/wire"
)

// The API's prompt cache, played for the scripts that ask for it (Script.PromptCache), as the
// API documents it (docs/wire.md §9): prefixes in the order tools, system, messages, cached up to
// each cache_control marker, per model; a request reads the longest cached prefix that ends at
// one of its markers or at a message boundary up to cacheLookback messages before it, writes the
// rest up to its last marker, and sends what follows uncached. A cached prefix lives its
// marker's TTL from its last use. The billing header, which Claude Code changes with every
// request, is left out of every prefix. A token is four bytes of the prompt, as the anatomy
// counts them.

// cacheLookback is how many messages before a marker a cached prefix may end and still be read
// (the API looks back 20 blocks; Claude Code's messages are one to a few blocks).
const cacheLookback = 20

// minCachedTokens is the shortest prefix the cache keeps.
const minCachedTokens = 1024

// promptCache holds the cached prefixes, by key, with when each expires.
type promptCache struct {
	expires map[uint64]time.Time
}

// prefix is a place a request's prompt can be cached up to: its key and its tokens.
type prefix struct {
	key    uint64
	tokens int
}

// usage returns the input counts of a request with body b, for model, at now, and caches its
// prefixes. ok is false when b is not a Messages body.
func (c *promptCache) usage(b []byte, model string, now time.Time) (read, write, uncached int, ok bool) {
	body, err := wire.ParseBody(b, "")
	if err != nil {
		return 0, 0, 0, false
	}
	if c.expires == nil {
		c.expires = make(map[uint64]time.Time)
	}
	a := &body.Anatomy
	total := tokensOf(a.Bytes())
	// The prefix key and bytes at the end of each tool, system block and message.
	h := xxh3.New()
	_, _ = h.WriteString(model)
	sum := func() uint64 { return h.Sum64() }
	add := func(v uint64) {
		var buf [8]byte
		binary.LittleEndian.PutUint64(buf[:], v)
		_, _ = h.Write(buf[:])
	}
	var tools, system, messages []uint64
	for _, th := range a.Tools {
		add(th.Hash)
		tools = append(tools, sum())
	}
	for _, sh := range a.System {
		if sh.Part != wire.PartBillingHeader {
			add(sh.Hash)
		}
		system = append(system, sum())
	}
	for _, mh := range a.Messages {
		add(mh)
		messages = append(messages, sum())
	}
	// Bytes up to the end of each message: the runs are in prompt order.
	ends := make([]int, len(a.Messages))
	n, head := 0, 0
	for _, r := range a.Runs {
		n += int(r.Bytes)
		if r.Message >= 0 {
			ends[r.Message] = n
		} else {
			head = n
		}
	}
	for i := range ends {
		if i > 0 && ends[i] < ends[i-1] {
			ends[i] = ends[i-1]
		} else if i == 0 && ends[0] < head {
			ends[0] = head
		}
	}
	var marks []prefix
	var last prefix
	ttl := 5 * time.Minute
	best := 0
	for _, bp := range a.Breakpoints {
		var at prefix
		switch bp.At.Section {
		case wire.SectionTools:
			at = prefix{key: tools[bp.At.Index], tokens: tokensOf(bp.Offset)}
		case wire.SectionSystem:
			at = prefix{key: system[bp.At.Index], tokens: tokensOf(bp.Offset)}
		default:
			m := bp.At.Index
			at = prefix{key: messages[m], tokens: tokensOf(ends[m])}
			for k := max(0, m-cacheLookback); k < m; k++ {
				if c.live(messages[k], now) {
					best = max(best, tokensOf(ends[k]))
				}
			}
		}
		if c.live(at.key, now) {
			best = max(best, at.tokens)
		}
		if d, err := time.ParseDuration(bp.TTL); err == nil {
			ttl = d
		}
		marks = append(marks, at)
		last = at
	}
	for _, m := range marks {
		if m.tokens >= minCachedTokens {
			c.expires[m.key] = now.Add(ttl)
		}
	}
	if last.tokens < minCachedTokens {
		return 0, 0, max(1, total), true
	}
	read = best
	write = last.tokens - read
	return read, write, max(1, total-last.tokens), true
}

// live reports whether key is cached at now.
func (c *promptCache) live(key uint64, now time.Time) bool {
	exp, ok := c.expires[key]
	return ok && now.Before(exp)
}

func tokensOf(bytes int) int { return bytes / 4 }
