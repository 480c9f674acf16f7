package summary

import "github.com/cctrace/cctrace/limits"

// WithLimits sets where Status takes the window that binds a session's account now (its
// representative window, with the session's share of it); limit reports false when there is
// none. Default: the status carries no window.
func WithLimits(limit func(session string) (limits.Window, bool)) Option {
	return func(s *Store) { s.limits = limit }
}

// sessionLimit is the representative window of a session's account, nil for none.
func (s *Store) sessionLimit(session string) *limits.Window {
	if s.limits == nil {
		return nil
	}
	if w, ok := s.limits(session); ok {
		return &w
	}
	return nil
}
