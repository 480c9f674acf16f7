// Package inflight keeps the tracker's turns in flight (instrument.InFlightStore) as files in a
// directory of cctrace's state directory, for the process after a restart to pick up.
package inflight

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/cctrace/cctrace/instrument"
)

// Dir is an instrument.InFlightStore of one file per name in a directory. A name's file is
// written whole or not at all (a temporary file renamed over it), and taken by renaming it
// first, so that of two processes taking it only one gets it.
type Dir struct {
	dir string
}

var _ instrument.InFlightStore = (*Dir)(nil)

// suffix ends the names of the files that hold states; others in the directory are ignored.
const suffix = ".json"

// seq tells apart the temporary names one process uses.
var seq atomic.Uint64

// Open returns the store in dir, creating it (readable by its owner only) if need be.
func Open(dir string) (*Dir, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating the in-flight state directory: %w", err)
	}
	return &Dir{dir: dir}, nil
}

// SaveInFlight keeps state under name, replacing what was there; an empty state removes it.
func (d *Dir) SaveInFlight(_ context.Context, name string, state []byte) error {
	path := filepath.Join(d.dir, url.PathEscape(name)+suffix)
	if len(state) == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("removing in-flight state %s: %w", name, err)
		}
		return nil
	}
	tmp := d.temp()
	if err := os.WriteFile(tmp, state, 0o600); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("saving in-flight state %s: %w", name, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("saving in-flight state %s: %w", name, err)
	}
	return nil
}

// TakeInFlight returns the states whose names start with prefix ("" for all) and removes them.
func (d *Dir) TakeInFlight(_ context.Context, prefix string) (map[string][]byte, error) {
	entries, err := os.ReadDir(d.dir)
	if err != nil {
		return nil, fmt.Errorf("taking in-flight states: %w", err)
	}
	out := map[string][]byte{}
	var errs []error
	for _, e := range entries {
		file := e.Name()
		escaped, ok := strings.CutSuffix(file, suffix)
		if !ok || !e.Type().IsRegular() {
			continue
		}
		name, err := url.PathUnescape(escaped)
		if err != nil || !strings.HasPrefix(name, prefix) {
			continue
		}
		taken := d.temp()
		if err := os.Rename(filepath.Join(d.dir, file), taken); err != nil {
			if !errors.Is(err, fs.ErrNotExist) { // another process took it first
				errs = append(errs, fmt.Errorf("taking in-flight state %s: %w", name, err))
			}
			continue
		}
		state, err := os.ReadFile(taken)
		os.Remove(taken)
		if err != nil {
			errs = append(errs, fmt.Errorf("taking in-flight state %s: %w", name, err))
			continue
		}
		out[name] = state
	}
	return out, errors.Join(errs...)
}

// temp returns a name in the directory that no other file has, and that TakeInFlight ignores.
func (d *Dir) temp() string {
	return filepath.Join(d.dir, ".tmp-"+strconv.Itoa(os.Getpid())+"-"+strconv.FormatUint(seq.Add(1), 10))
}
