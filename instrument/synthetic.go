package instrument

import "github.com/cctrace/cctrace/instrument/wire"

// syntheticKind returns the kind of Claude Code's own text that m, the newest user or assistant
// message of a request, carries; "" for human text and for anything else.
func syntheticKind(m *wire.Message) Synthetic {
	if m == nil || m.Role != wire.RoleUser {
		return ""
	}
	return m.Synthetic
}
