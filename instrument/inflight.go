package instrument

import "context"

// InFlightStore is where a process keeps what its tracker needs to pick up turns in flight when
// it stops, so that the process after it (a restart, an upgrade, another replica of a rolled pod)
// goes on with the same turns: the state directory's history store, or the replicas' shared one
// (internal/history implements it). Names are the tracker's to choose (a session per name, say);
// states are text, such as JSON. Its methods may block on a disk or a server: call them off the
// forwarding path.
type InFlightStore interface {
	// SaveInFlight keeps state under name, replacing what was there; an empty state removes it.
	SaveInFlight(ctx context.Context, name string, state []byte) error
	// TakeInFlight returns the states whose names start with prefix ("" for all) and removes
	// them at once, so that of two processes taking one name only one gets it.
	TakeInFlight(ctx context.Context, prefix string) (map[string][]byte, error)
}
