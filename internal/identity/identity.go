// Package identity says who sent a request: a fingerprint of its credential (computed where the
// proxy reads the header, so that the credential itself goes no further), the identity header a
// person sets, and the account of a subscription login; and, from a directory file, which
// person and team those stand for.
package identity

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"net/http"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/cctrace/cctrace/instrument/wire"
)

// DefaultHeader is the identity header Claude Code sends when a person puts
// "X-Cctrace-User: name" in ANTHROPIC_CUSTOM_HEADERS.
const DefaultHeader = "X-Cctrace-User"

// MaxValueBytes bounds an identity (a header value, an account, a name from the directory):
// longer values are cut, so that a client cannot make a label or a log line of any size.
const MaxValueBytes = 64

// CredentialPrefix starts every credential fingerprint.
const CredentialPrefix = "key-"

// MinSecretBytes is the shortest fingerprint secret accepted: the fingerprint is an HMAC, and a
// short key would let someone holding a list of leaked keys test them against fingerprints.
const MinSecretBytes = 32

// Fingerprinter turns a request's credential into a short keyed fingerprint. Without the secret,
// a fingerprint cannot be computed from a key, nor a key found from a fingerprint; with it, the
// same key always gives the same fingerprint, so that a directory can name it. It is safe for
// concurrent use. The zero value is not usable; call NewFingerprinter.
type Fingerprinter struct {
	macs sync.Pool // of hash.Hash: HMAC-SHA256 keyed with the secret
}

// NewFingerprinter returns a Fingerprinter keyed with secret, which must be at least
// MinSecretBytes long.
func NewFingerprinter(secret []byte) (*Fingerprinter, error) {
	if len(secret) < MinSecretBytes {
		return nil, fmt.Errorf("identity secret of %d bytes: want at least %d", len(secret), MinSecretBytes)
	}
	key := append([]byte(nil), secret...)
	f := &Fingerprinter{}
	f.macs.New = func() any { return hmac.New(sha256.New, key) }
	return f, nil
}

// Credential returns the fingerprint of the credential in h: x-api-key, else the token of an
// Authorization: Bearer header; "" when h has neither. Only those two headers are read.
func (f *Fingerprinter) Credential(h http.Header) string {
	cred := h.Get("X-Api-Key")
	if cred == "" {
		cred, _ = BearerToken(h)
	}
	if cred == "" {
		return ""
	}
	return f.Of(cred)
}

// BearerToken returns the token of h's Authorization: Bearer header, and whether it has one.
func BearerToken(h http.Header) (string, bool) {
	auth := h.Get("Authorization")
	if len(auth) > len("bearer ") && strings.EqualFold(auth[:len("bearer ")], "bearer ") {
		return strings.TrimSpace(auth[len("bearer "):]), true
	}
	return "", false
}

// Of returns the fingerprint of one credential: CredentialPrefix and the first 16 hex digits of
// its HMAC-SHA256. 64 bits tell apart the keys of any one deployment and say nothing more.
func (f *Fingerprinter) Of(credential string) string {
	mac := f.macs.Get().(hash.Hash)
	mac.Reset()
	mac.Write([]byte(credential))
	var sum [sha256.Size]byte
	mac.Sum(sum[:0])
	f.macs.Put(mac)
	var out [len(CredentialPrefix) + 16]byte
	copy(out[:], CredentialPrefix)
	hex.Encode(out[len(CredentialPrefix):], sum[:8])
	return string(out[:])
}

// CleanValue makes an untrusted identity (a header value, an account id) safe for labels and
// logs: invalid UTF-8, control and other non-printing characters are dropped, surrounding space
// is trimmed, and the result is cut to MaxValueBytes at a character boundary.
func CleanValue(v string) string {
	clean := true
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 || c >= 0x7f {
			clean = false
			break
		}
	}
	if clean {
		v = strings.TrimSpace(v)
		if len(v) <= MaxValueBytes {
			return v
		}
		// The cut may end at a space, which is trimmed too: cleaning the result changes nothing.
		return strings.TrimSpace(v[:MaxValueBytes])
	}
	var b strings.Builder
	for _, r := range v {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			continue
		}
		if b.Len()+utf8.RuneLen(r) > MaxValueBytes {
			break
		}
		b.WriteRune(r)
	}
	return strings.TrimSpace(b.String())
}

// Source is one way of telling who sent a request.
type Source string

// Sources, in the default order of DefaultOrder.
const (
	SourceHeader     Source = "header"  // the identity header a person sets
	SourceAccount    Source = "account" // metadata.user_id's account_uuid (subscription logins)
	SourceCredential Source = "key"     // the credential's fingerprint
)

// DefaultOrder is the order identities are tried in unless configured otherwise.
var DefaultOrder = []Source{SourceHeader, SourceAccount, SourceCredential}

// ParseOrder parses a comma-separated list of sources ("header,account,key"); each may appear
// once, and any may be left out.
func ParseOrder(s string) ([]Source, error) {
	var out []Source
	for part := range strings.SplitSeq(s, ",") {
		src := Source(strings.TrimSpace(part))
		switch src {
		case SourceHeader, SourceAccount, SourceCredential:
		case "":
			continue
		default:
			return nil, fmt.Errorf("unknown identity source %q: want header, account or key", src)
		}
		for _, o := range out {
			if o == src {
				return nil, fmt.Errorf("identity source %q given twice", src)
			}
		}
		out = append(out, src)
	}
	if len(out) == 0 {
		return nil, errors.New("no identity source: give at least one of header, account, key")
	}
	return out, nil
}

// Resolver attributes requests to people and teams. The directory it reads may be swapped at
// any time (a reload); its methods are safe for concurrent use. The zero value is not usable;
// call NewResolver.
type Resolver struct {
	order     []Source
	directory func() *Directory // nil result: no directory
}

// NewResolver returns a resolver that tries order and looks identities up in what directory
// returns at the moment of each call (nil for no directory: every identity stands for itself).
func NewResolver(order []Source, directory func() *Directory) *Resolver {
	if directory == nil {
		directory = func() *Directory { return nil }
	}
	return &Resolver{order: append([]Source(nil), order...), directory: directory}
}

// Resolve sets id.User and id.Team from id.Header, account and id.Credential: the first
// identity, in the resolver's order, that the directory names; when it names none, the first
// identity present stands for itself, with no team. A request with no identity at all stays
// unattributed (empty User). It returns the source that decided ("" when none did).
func (r *Resolver) Resolve(id *wire.Identity, account string) Source {
	dir := r.directory()
	first, firstSrc := "", Source("")
	for _, src := range r.order {
		v := r.value(src, id, account)
		if v == "" {
			continue
		}
		if p, ok := dir.Lookup(v); ok {
			id.User, id.Team = p.Name, p.Team
			return src
		}
		if first == "" {
			first, firstSrc = v, src
		}
	}
	id.User, id.Team = first, ""
	return firstSrc
}

func (r *Resolver) value(src Source, id *wire.Identity, account string) string {
	switch src {
	case SourceHeader:
		return id.Header
	case SourceAccount:
		return CleanValue(account)
	case SourceCredential:
		return id.Credential
	}
	return ""
}

// ResolveFast is Resolve for the forwarding path, where the body (and so the account) is not
// read: it reports whether the header or the credential alone settle who the request is from.
// When they do not, the caller learns the answer later from the pipeline.
func (r *Resolver) ResolveFast(id *wire.Identity) bool {
	dir := r.directory()
	for _, src := range r.order {
		if src == SourceAccount {
			// An account ahead in the order would win over what follows, and is not known here.
			return false
		}
		v := r.value(src, id, "")
		if v == "" {
			continue
		}
		if p, ok := dir.Lookup(v); ok {
			id.User, id.Team = p.Name, p.Team
			return true
		}
	}
	return false
}
