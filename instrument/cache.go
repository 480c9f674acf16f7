package instrument

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cctrace/cctrace/instrument/wire"
)

// Context and cache: each answered request's input tokens by part, what changed since the
// previous request of its chain, and why the prompt cache missed when the request read far less
// from it than that request had left there.

// MinCacheMiss is the fewest tokens a request must read less from the cache than its chain's
// previous request left there to count as a cache miss: the API caches no prefix shorter than
// that (docs/wire.md, "Prompt caching").
const MinCacheMiss = 1024

// maxTrackedMessages bounds the message hashes a chain keeps of its last answered request: four
// bytes each, 16 KiB at most. An edit beyond them is not seen.
const maxTrackedMessages = 4096

// maxChangedTools bounds the tool names a Change lists in each of its lists.
const maxChangedTools = 16

// defaultCacheTTL is how long the API keeps a cached prefix unused unless the breakpoint asks
// for longer.
const defaultCacheTTL = 5 * time.Minute

// Change is what changed in a request's prompt since the previous request of its chain that was
// answered with usage. The zero value is no change.
type Change struct {
	// PreviousMessages is that request's message count; Since the time between the two
	// requests.
	PreviousMessages int
	Since            time.Duration
	// Model is the previous request's model when this one asks another; "" otherwise.
	Model string
	// System lists the system blocks that differ, by index: changed, added or removed. The
	// billing header, which Claude Code rewrites with every request and the API keeps out of the
	// cache key, is not compared.
	System []SystemChange
	// ToolsAdded, ToolsRemoved and ToolsChanged name tool definitions that are new, gone, or
	// the same tool defined otherwise (at most maxChangedTools each); ToolsReordered says the
	// same definitions come in another order.
	ToolsAdded, ToolsRemoved, ToolsChanged []string
	ToolsReordered                         bool
	// EditedAt is the first message of the previous request that this one does not carry
	// unchanged (cache markers and a text's string or list form aside); -1 when it carries them
	// all.
	EditedAt int
	// New is what this request carries beyond the previous one's unchanged messages, by part:
	// the blocks appended (and those from EditedAt on, when the history was edited).
	New []wire.PartSize
}

// SystemChange is one system block that differs from the previous request's.
type SystemChange struct {
	Index int
	Part  wire.PartKind // what the block is now; what it was when it is gone
	What  string        // "changed", "added" or "removed"
}

// CacheMissCause says why a request read less from the prompt cache than its chain's previous
// request had left there.
type CacheMissCause string

// Causes of a cache miss, in the order they are looked for: the first that applies is named.
const (
	CacheMissModel       CacheMissCause = "model"       // another model: caches are per model
	CacheMissTools       CacheMissCause = "tools"       // tool definitions added, removed or changed
	CacheMissSystem      CacheMissCause = "system"      // a system block changed
	CacheMissCompaction  CacheMissCause = "compaction"  // the history was summarised
	CacheMissHistory     CacheMissCause = "history"     // an earlier message was changed or dropped
	CacheMissTTL         CacheMissCause = "ttl"         // idle longer than the cache keeps a prefix
	CacheMissUnexplained CacheMissCause = "unexplained" // nothing cctrace can see changed
)

// CacheMisses lists the causes, for sinks that count each.
var CacheMisses = []CacheMissCause{CacheMissModel, CacheMissTools, CacheMissSystem, CacheMissCompaction,
	CacheMissHistory, CacheMissTTL, CacheMissUnexplained}

// CacheMiss is a request that read at least MinCacheMiss tokens less from the prompt cache
// than its chain's previous request had left there.
type CacheMiss struct {
	Cause CacheMissCause
	// Where says what changed, in a few words: the models, the system block, the tools, the
	// message, the idle time against the TTL.
	Where string
	// Expected is what the previous request left cached (its cache reads and writes); Missed
	// how much less than that this request read.
	Expected, Missed int
	// Cost is what the miss cost beyond a hit: the answer's price less what it would have cost
	// with the missed tokens read from the cache. Priced is false when the answer was not
	// priced.
	Cost   float64
	Priced bool
}

// prefixState is what a chain keeps of its last request that was answered with usage, to
// compare the next one with.
type prefixState struct {
	valid    bool
	at       time.Time
	model    string
	system   []wire.SystemHash
	tools    []wire.ToolHash
	messages []uint32 // the first maxTrackedMessages of them
	count    int      // messages
	ttl      time.Duration
	cached   int // its answer's cache reads and writes
}

// context estimates an answered request's input by part, and for a request of a chain, compares
// it with the chain's previous request answered with usage and not failed: what changed, and
// whether the cache missed. A failed answer (an error event after message_start) may not have
// left its prompt in the cache, so the chain keeps comparing with the one before. The request's
// runs and message hashes are dropped once used: a span keeps what they came to.
func (t *Tracker) context(ex *exchange, msg *wire.MessageInfo, failed bool) {
	chat := ex.span.Chat
	body := chat.Request.Body
	if body == nil || msg == nil {
		return
	}
	a := &body.Anatomy
	est := a.Apportion(msg.Usage)
	chat.Context = &est
	if ch := ex.chain; ch != nil {
		prev := &ch.prefix
		if prev.valid {
			chat.Change = changeOf(prev, chat.Request.Time, body)
			chat.CacheMiss = t.cacheMiss(chat, prev, msg.Usage)
		}
		if !failed {
			prev.set(chat.Request.Time, body, msg.Usage)
		}
	}
	a.Runs, a.Messages = nil, nil
}

// set remembers body, sent at at and answered with usage u.
func (p *prefixState) set(at time.Time, body *wire.Body, u wire.Usage) {
	a := &body.Anatomy
	p.valid, p.at, p.model = true, at, body.Model
	p.system = append(p.system[:0], a.System...)
	p.tools = append(p.tools[:0], a.Tools...)
	p.messages = p.messages[:0]
	for _, h := range a.Messages[:min(len(a.Messages), maxTrackedMessages)] {
		p.messages = append(p.messages, uint32(h))
	}
	p.count = len(a.Messages)
	p.ttl = defaultCacheTTL
	for _, bp := range a.Breakpoints {
		if d, err := time.ParseDuration(bp.TTL); err == nil && d > p.ttl {
			p.ttl = d
		}
	}
	p.cached = u.CacheReadInputTokens + u.CacheCreationInputTokens
}

// changeOf returns what changed in body, sent at at, since prev.
func changeOf(prev *prefixState, at time.Time, body *wire.Body) *Change {
	a := &body.Anatomy
	c := &Change{PreviousMessages: prev.count, Since: at.Sub(prev.at), EditedAt: -1}
	if body.Model != prev.model {
		c.Model = prev.model
	}
	for i := 0; i < max(len(a.System), len(prev.system)); i++ {
		switch {
		case i >= len(prev.system):
			c.System = append(c.System, SystemChange{Index: i, Part: a.System[i].Part, What: "added"})
		case i >= len(a.System):
			c.System = append(c.System, SystemChange{Index: i, Part: prev.system[i].Part, What: "removed"})
		case a.System[i].Part == wire.PartBillingHeader && prev.system[i].Part == wire.PartBillingHeader:
		case a.System[i] != prev.system[i]:
			c.System = append(c.System, SystemChange{Index: i, Part: a.System[i].Part, What: "changed"})
		}
	}
	toolChanges(c, prev.tools, a.Tools)
	n := min(len(a.Messages), len(prev.messages))
	for i := 0; i < n; i++ {
		if uint32(a.Messages[i]) != prev.messages[i] {
			c.EditedAt = i
			break
		}
	}
	if c.EditedAt < 0 && len(a.Messages) < prev.count {
		c.EditedAt = len(a.Messages) // messages dropped from the end
	}
	from := prev.count
	if c.EditedAt >= 0 {
		from = c.EditedAt
	}
	c.New = partsFrom(a, from)
	return c
}

// toolChanges fills c's tool lists from the definitions before and after.
func toolChanges(c *Change, before, after []wire.ToolHash) {
	if slices.Equal(before, after) {
		return // the common case, without building maps
	}
	old := make(map[string]uint64, len(before))
	for _, th := range before {
		old[th.Name] = th.Hash
	}
	now := make(map[string]bool, len(after))
	for _, th := range after {
		now[th.Name] = true
		h, ok := old[th.Name]
		switch {
		case !ok:
			c.ToolsAdded = appendBounded(c.ToolsAdded, th.Name)
		case h != th.Hash:
			c.ToolsChanged = appendBounded(c.ToolsChanged, th.Name)
		}
	}
	for _, th := range before {
		if !now[th.Name] {
			c.ToolsRemoved = appendBounded(c.ToolsRemoved, th.Name)
		}
	}
	if len(c.ToolsAdded)+len(c.ToolsRemoved)+len(c.ToolsChanged) == 0 {
		c.ToolsReordered = true
	}
}

func appendBounded(list []string, name string) []string {
	if len(list) >= maxChangedTools {
		return list
	}
	return append(list, name)
}

// partsFrom sums a's runs of messages from message from on, by part.
func partsFrom(a *wire.Anatomy, from int) []wire.PartSize {
	// The runs of those messages are the last ones.
	first := len(a.Runs)
	for first > 0 && int(a.Runs[first-1].Message) >= from {
		first--
	}
	var out []wire.PartSize
	for _, r := range a.Runs[first:] {
		k := slices.IndexFunc(out, func(p wire.PartSize) bool { return p.Part == a.Parts[r.Part].Part })
		if k < 0 {
			k = len(out)
			out = append(out, wire.PartSize{Part: a.Parts[r.Part].Part})
		}
		out[k].Bytes += int(r.Bytes)
		out[k].Blocks += int(r.Blocks)
	}
	return out
}

// cacheMiss returns the cache miss of chat, answered with u, after prev; nil when it read what
// prev left cached, or nearly.
func (t *Tracker) cacheMiss(chat *Chat, prev *prefixState, u wire.Usage) *CacheMiss {
	missed := prev.cached - u.CacheReadInputTokens
	if missed < MinCacheMiss {
		return nil
	}
	m := &CacheMiss{Expected: prev.cached, Missed: missed}
	c := chat.Change
	switch {
	case c.Model != "":
		m.Cause, m.Where = CacheMissModel, c.Model+" → "+chat.Request.Body.Model
	case len(c.ToolsAdded)+len(c.ToolsRemoved)+len(c.ToolsChanged) > 0 || c.ToolsReordered:
		m.Cause, m.Where = CacheMissTools, toolsWhere(c)
	case len(c.System) > 0:
		s := c.System[0]
		m.Cause, m.Where = CacheMissSystem, "system["+strconv.Itoa(s.Index)+"] ("+string(s.Part)+") "+s.What
	case chat.Compacted || chat.Kind == RequestCompaction && c.EditedAt >= 0:
		// The summary request of an automatic compaction drops the start of the history too.
		m.Cause = CacheMissCompaction
	case c.EditedAt >= 0:
		m.Cause, m.Where = CacheMissHistory, "messages["+strconv.Itoa(c.EditedAt)+"]"
	case c.Since > prev.ttl:
		m.Cause, m.Where = CacheMissTTL, "idle "+c.Since.Round(time.Second).String()+", TTL "+prev.ttl.String()
	default:
		m.Cause = CacheMissUnexplained
	}
	if chat.Priced {
		hit := u
		moved := min(missed, hit.CacheCreationInputTokens)
		hit.CacheCreationInputTokens -= moved
		from5m := min(moved, hit.CacheCreation5m)
		hit.CacheCreation5m -= from5m
		hit.CacheCreation1h = max(0, hit.CacheCreation1h-(moved-from5m))
		uncached := min(missed-moved, hit.InputTokens)
		hit.InputTokens -= uncached
		hit.CacheReadInputTokens += moved + uncached
		cost, ok := t.priceAnswer(chat, u)
		if hitCost, hitOK := t.priceAnswer(chat, hit); ok && hitOK {
			m.Cost, m.Priced = max(0, cost-hitCost), true
		}
	}
	return m
}

// toolsWhere says which tools a Change added, removed or changed.
func toolsWhere(c *Change) string {
	var parts []string
	if len(c.ToolsAdded) > 0 {
		parts = append(parts, "added "+strings.Join(c.ToolsAdded, ", "))
	}
	if len(c.ToolsRemoved) > 0 {
		parts = append(parts, "removed "+strings.Join(c.ToolsRemoved, ", "))
	}
	if len(c.ToolsChanged) > 0 {
		parts = append(parts, "changed "+strings.Join(c.ToolsChanged, ", "))
	}
	if c.ToolsReordered {
		parts = append(parts, "reordered")
	}
	return strings.Join(parts, "; ")
}
