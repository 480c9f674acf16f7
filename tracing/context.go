package tracing

import (
	"strconv"

	"go.opentelemetry.io/otel/attribute"

	"github.com/cctrace/cctrace/instrument"
)

// A chat span's context anatomy: its input by part (instrument.Chat.Context), its cache
// breakpoints, what changed since its chain's previous request, and why the cache missed.
const (
	keyContextParts       = attribute.Key("cctrace.context.parts")
	keyContextPartBytes   = attribute.Key("cctrace.context.part_bytes")
	keyContextPartTokens  = attribute.Key("cctrace.context.part_tokens")
	keyCacheBreakpoints   = attribute.Key("cctrace.cache.breakpoints")
	keyCacheReadTo        = attribute.Key("cctrace.cache.read_to")
	keyCacheWrittenTo     = attribute.Key("cctrace.cache.written_to")
	keyCacheMissCause     = attribute.Key("cctrace.cache.miss.cause")
	keyCacheMissWhere     = attribute.Key("cctrace.cache.miss.where")
	keyCacheMissTokens    = attribute.Key("cctrace.cache.miss.tokens")
	keyCacheMissCost      = attribute.Key("cctrace.cache.miss.cost_usd")
	keyChangePrevModel    = attribute.Key("cctrace.request.previous_model")
	keyChangeEditedAt     = attribute.Key("cctrace.request.history_edited_at")
	keyChangeSystem       = attribute.Key("cctrace.request.system_changed")
	keyChangeToolsAdded   = attribute.Key("cctrace.request.tools_added")
	keyChangeToolsRemoved = attribute.Key("cctrace.request.tools_removed")
	keyChangeToolsChanged = attribute.Key("cctrace.request.tools_changed")
)

// chatContext adds what c's request was made of and what its cache did. Parts are three
// parallel lists: "kind" or "kind:name", bytes, estimated tokens (which add up to
// gen_ai.usage.input_tokens).
func chatContext(a *attrs, c *instrument.Chat) {
	if b := c.Request.Body; b != nil && len(b.Anatomy.Breakpoints) > 0 {
		at := make([]string, len(b.Anatomy.Breakpoints))
		for i, bp := range b.Anatomy.Breakpoints {
			at[i] = bp.At.String()
		}
		a.add(keyCacheBreakpoints.StringSlice(at))
	}
	if e := c.Context; e != nil && len(e.Parts) > 0 {
		names := make([]string, len(e.Parts))
		bytes := make([]int64, len(e.Parts))
		tokens := make([]int64, len(e.Parts))
		for i, p := range e.Parts {
			names[i] = string(p.Kind)
			if p.Name != "" {
				names[i] += ":" + p.Name
			}
			bytes[i], tokens[i] = int64(p.Bytes), int64(p.Tokens())
		}
		a.add(keyContextParts.StringSlice(names), keyContextPartBytes.Int64Slice(bytes), keyContextPartTokens.Int64Slice(tokens))
		if e.ReadTo != nil {
			a.add(keyCacheReadTo.String(e.ReadTo.String()))
		}
		if e.WrittenTo != nil {
			a.add(keyCacheWrittenTo.String(e.WrittenTo.String()))
		}
	}
	if ch := c.Change; ch != nil {
		a.str(keyChangePrevModel, ch.Model)
		if ch.EditedAt >= 0 {
			a.add(keyChangeEditedAt.Int(ch.EditedAt))
		}
		if len(ch.System) > 0 {
			s := make([]string, len(ch.System))
			for i, sc := range ch.System {
				s[i] = "system[" + strconv.Itoa(sc.Index) + "] " + string(sc.Part) + " " + sc.What
			}
			a.add(keyChangeSystem.StringSlice(s))
		}
		for _, l := range []struct {
			k     attribute.Key
			names []string
		}{{keyChangeToolsAdded, ch.ToolsAdded}, {keyChangeToolsRemoved, ch.ToolsRemoved}, {keyChangeToolsChanged, ch.ToolsChanged}} {
			if len(l.names) > 0 {
				a.add(l.k.StringSlice(l.names))
			}
		}
	}
	if m := c.CacheMiss; m != nil {
		a.add(keyCacheMissCause.String(string(m.Cause)), keyCacheMissTokens.Int(m.Missed))
		a.str(keyCacheMissWhere, m.Where)
		if m.Priced {
			a.add(keyCacheMissCost.Float64(m.Cost))
		}
	}
}
