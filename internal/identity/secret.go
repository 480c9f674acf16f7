package identity

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// SecretFileName is the name of the fingerprint secret cctrace keeps in its state directory.
const SecretFileName = "identity-secret"

// LoadSecret reads a fingerprint secret from path: its contents, surrounding white space
// trimmed, at least MinSecretBytes long.
func LoadSecret(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading identity secret: %w", err)
	}
	secret := []byte(strings.TrimSpace(string(b)))
	if len(secret) < MinSecretBytes {
		return nil, fmt.Errorf("identity secret %s: %d bytes, want at least %d (e.g. head -c 32 /dev/urandom | xxd -p -c 64 > %s)", path, len(secret), MinSecretBytes, path)
	}
	return secret, nil
}

// StateSecret returns the secret kept in dir, creating dir and a new random secret in it (mode
// 0600) when there is none yet. created reports that it made one: fingerprints computed before
// with another secret do not match the new ones.
func StateSecret(dir string) (secret []byte, created bool, err error) {
	path := filepath.Join(dir, SecretFileName)
	secret, err = LoadSecret(path)
	if err == nil {
		return secret, false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, false, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, false, fmt.Errorf("creating state directory: %w", err)
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return nil, false, fmt.Errorf("generating identity secret: %w", err)
	}
	text := hex.EncodeToString(raw[:])
	// O_EXCL: two cctrace processes starting at once must not each write a secret of their own.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		secret, err = LoadSecret(path)
		return secret, false, err
	}
	if err != nil {
		return nil, false, fmt.Errorf("writing identity secret: %w", err)
	}
	if _, err := f.WriteString(text + "\n"); err != nil {
		f.Close()
		return nil, false, fmt.Errorf("writing identity secret: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, false, fmt.Errorf("writing identity secret: %w", err)
	}
	return []byte(text), true, nil
}

// DefaultStateDir is where cctrace keeps what must outlive a restart (the fingerprint secret):
// $XDG_STATE_HOME/cctrace, else ~/.local/state/cctrace; "" when neither is known.
func DefaultStateDir() string {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "cctrace")
	}
	if home, err := os.UserHomeDir(); err == nil && home != "" && home != "/" {
		return filepath.Join(home, ".local", "state", "cctrace")
	}
	return ""
}
