package wire

import (
	"math"
	"sort"
	"strconv"
)

// Estimated tokens by part: the API reports only a request's totals (Usage), so cctrace spreads
// them over the parts of its Anatomy. docs/wire.md ("Estimated tokens by part") states the
// method and what is known of its error.

// ImageTokens is the tokens one image is estimated at: the API's count for an image at the size
// it scales large images down to. An image's bytes say little of its tokens, which the API counts
// from its pixels.
const ImageTokens = 1600

// PartTokens is a part's estimated share of a request's input tokens, split as the API read it:
// from the cache, written to the cache, or neither.
type PartTokens struct {
	PartSize
	CacheRead, CacheWrite, Uncached int
}

// Tokens returns all the part's input tokens.
func (p PartTokens) Tokens() int { return p.CacheRead + p.CacheWrite + p.Uncached }

// Position is where in the prompt a boundary falls: the tools, the system prompt, or a message.
type Position struct {
	Section Section
	Message int // index of the message; -1 outside the messages
}

// String names the position: "tools", "system", "messages[14]".
func (p Position) String() string {
	if p.Section != SectionMessages {
		return p.Section.String()
	}
	return "messages[" + strconv.Itoa(p.Message) + "]"
}

// Estimate is a request's input tokens apportioned to its parts.
type Estimate struct {
	// Parts are the Anatomy's parts, each with its tokens: they add up to the usage's
	// TotalInput exactly, their CacheRead to its cache reads, CacheWrite to its cache writes and
	// Uncached to its uncached input.
	Parts []PartTokens
	// ReadTo and WrittenTo are where the cache read and the cache write end, as far as the
	// estimate places them; zero when nothing was read, or written.
	ReadTo, WrittenTo *Position
}

// Apportion spreads the input tokens of u over the parts of a.
//
// Each stretch of the prompt is estimated at its bytes times one ratio, chosen so that the
// estimates add up to the usage's total input; images count ImageTokens each and deferred tool
// definitions nothing (the API leaves them out of the prompt until they are loaded). In the
// order the API reads the prompt (tools, system, messages), the first cache-read tokens are read,
// the next cache-write tokens written and the rest sent uncached, as prompt caching works on
// prefixes. Each of the three is rounded to whole tokens by largest remainder, so that every
// total is exact. A request without parts gets none.
func (a *Anatomy) Apportion(u Usage) Estimate {
	var out Estimate
	if len(a.Parts) == 0 {
		return out
	}
	out.Parts = make([]PartTokens, len(a.Parts))
	for i, p := range a.Parts {
		out.Parts[i].PartSize = p
	}
	total := u.TotalInput()
	if total <= 0 || len(a.Runs) == 0 {
		return out
	}
	est := a.estimator(float64(total))

	// Walk the prompt, cutting the tokens into read, written and uncached.
	read, write := float64(u.CacheReadInputTokens), float64(u.CacheCreationInputTokens)
	shares := make([][3]float64, len(a.Parts))
	pos := 0.0
	for _, r := range a.Runs {
		e := est.of(a, r)
		from, to := pos, pos+e
		pos = to
		r0 := overlap(from, to, 0, read)
		w0 := overlap(from, to, read, read+write)
		s := &shares[r.Part]
		s[0] += r0
		s[1] += w0
		s[2] += e - r0 - w0
		if r0 > 0 && to >= read && out.ReadTo == nil {
			out.ReadTo = a.position(r)
		}
		if w0 > 0 && to >= read+write && out.WrittenTo == nil {
			out.WrittenTo = a.position(r)
		}
	}
	for k, n := range [3]int{u.CacheReadInputTokens, u.CacheCreationInputTokens, u.InputTokens} {
		col := make([]float64, len(shares))
		for i := range shares {
			col[i] = shares[i][k]
		}
		whole := largestRemainder(col, n)
		for i, w := range whole {
			switch k {
			case 0:
				out.Parts[i].CacheRead = w
			case 1:
				out.Parts[i].CacheWrite = w
			default:
				out.Parts[i].Uncached = w
			}
		}
	}
	return out
}

// estimator estimates a run's tokens so that a prompt's runs add up to a total.
type estimator struct {
	perByte, perImage float64
	deferred          bool // deferred tool definitions count their bytes (nothing else has any)
	even              float64
}

// estimator returns the estimator of a's runs for total tokens.
func (a *Anatomy) estimator(total float64) estimator {
	var bytes, images float64
	for _, r := range a.Runs {
		switch a.Parts[r.Part].Kind {
		case PartImage:
			images += float64(r.Blocks) * ImageTokens
		case PartDeferredTools:
		default:
			bytes += float64(r.Bytes)
		}
	}
	switch {
	case bytes == 0 && images == 0:
		// Nothing but deferred tools (or empty blocks): their bytes are all there is, else
		// even shares.
		for _, r := range a.Runs {
			bytes += float64(r.Bytes)
		}
		if bytes == 0 {
			return estimator{even: total / float64(len(a.Runs))}
		}
		return estimator{perByte: total / bytes, deferred: true}
	case images >= total || bytes == 0:
		return estimator{perImage: ImageTokens * total / images}
	}
	return estimator{perByte: (total - images) / bytes, perImage: ImageTokens}
}

// of returns run r's estimated tokens.
func (e estimator) of(a *Anatomy, r Run) float64 {
	switch kind := a.Parts[r.Part].Kind; {
	case e.even > 0:
		return e.even
	case kind == PartImage:
		return float64(r.Blocks) * e.perImage
	case kind == PartDeferredTools && !e.deferred:
		return 0
	}
	return float64(r.Bytes) * e.perByte
}

// position returns where run r is.
func (a *Anatomy) position(r Run) *Position {
	if r.Message >= 0 {
		return &Position{Section: SectionMessages, Message: int(r.Message)}
	}
	switch a.Parts[r.Part].Kind {
	case PartBuiltinTools, PartMCPTools, PartDeferredTools:
		return &Position{Section: SectionTools, Message: -1}
	}
	return &Position{Section: SectionSystem, Message: -1}
}

// overlap returns the length of [from, to) within [lo, hi).
func overlap(from, to, lo, hi float64) float64 {
	return max(0, min(to, hi)-max(from, lo))
}

// largestRemainder rounds shares, which add up to n or about, to whole numbers that add up to n
// exactly: each gets its share's floor, scaled to n, and what is left goes one by one to the
// largest remainders (the earliest first among equals).
func largestRemainder(shares []float64, n int) []int {
	out := make([]int, len(shares))
	if n <= 0 {
		return out
	}
	sum := 0.0
	for _, s := range shares {
		sum += s
	}
	if sum <= 0 {
		// No share at all: the last part takes it (what the prompt ends with).
		out[len(out)-1] = n
		return out
	}
	scale := float64(n) / sum
	left := n
	rest := make([]int, len(shares))
	rem := make([]float64, len(shares))
	for i, s := range shares {
		v := s * scale
		f := math.Floor(v)
		out[i] = int(f)
		left -= out[i]
		rem[i] = v - f
		rest[i] = i
	}
	sort.SliceStable(rest, func(x, y int) bool { return rem[rest[x]] > rem[rest[y]] })
	for k := 0; left > 0; k = (k + 1) % len(rest) {
		out[rest[k]]++
		left--
	}
	for left < 0 {
		// Floors of scaled shares never add up to more than n; rounding error might.
		for i := len(out) - 1; i >= 0 && left < 0; i-- {
			if out[i] > 0 {
				out[i]--
				left++
			}
		}
	}
	return out
}
