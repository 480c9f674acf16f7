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
	// Written whole to a file of its own, then linked into place: link fails when the name
	// exists, so of two cctrace processes starting at once one writes the secret and the other
	// reads it, never a file still empty.
	tmp, err := os.CreateTemp(dir, SecretFileName+".*")
	if err != nil {
		return nil, false, fmt.Errorf("writing identity secret: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(text + "\n"); err != nil {
		tmp.Close()
		return nil, false, fmt.Errorf("writing identity secret: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return nil, false, fmt.Errorf("writing identity secret: %w", err)
	}
	if err := os.Link(tmp.Name(), path); errors.Is(err, fs.ErrExist) {
		secret, err = LoadSecret(path)
		return secret, false, err
	} else if err != nil {
		return nil, false, fmt.Errorf("writing identity secret: %w", err)
	}
	return []byte(text), true, nil
}
