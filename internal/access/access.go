// Package access decides who may look at the metrics listener of a shared cctrace: the turns
// page and /api/turns show everyone's prompts' outcomes and spend. A viewer proves who they are
// with a token or password from an access file, or is vouched for by an authenticating proxy in
// front (oauth2-proxy and the like) through a trusted header; a person then sees their own
// sessions, a team lead their team's, an admin everything. /healthz stays open (it says nothing),
// and /metrics takes its own bearer token, or an admin, or is served on an address of its own.
package access

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"strings"
	"sync"
	"time"

	"go.yaml.in/yaml/v3"
	"golang.org/x/crypto/bcrypt"

	"github.com/cctrace/cctrace/internal/configfile"
	"github.com/cctrace/cctrace/internal/identity"
	"github.com/cctrace/cctrace/summary"
)

// Roles of a viewer.
const (
	RolePerson = "person" // their own sessions
	RoleLead   = "lead"   // their team's sessions
	RoleAdmin  = "admin"  // everything, and /metrics
)

// Viewer is someone allowed in. The zero value is nobody.
type Viewer struct {
	Name string
	Role string
	Team string // a lead's team
}

// Scope is what the viewer may see.
func (v Viewer) Scope() summary.Scope {
	switch v.Role {
	case RoleAdmin:
		return summary.Scope{}
	case RoleLead:
		return summary.Scope{Team: v.Team}
	}
	return summary.Scope{User: v.Name}
}

// File is a parsed access file. It is immutable once parsed.
type File struct {
	entries []entry
}

type entry struct {
	Viewer
	tokenSHA256 []byte // sha256 of the bearer token; nil: none
	bcrypt      []byte // bcrypt hash of the password; nil: none
}

// Parse parses an access file. name is the file's name for errors ("name:line: what"). The
// format (YAML):
//
//	viewers:
//	  - name: alice                # as the directory names the person
//	    role: person               # person, lead (needs team) or admin
//	    token_sha256: 9f86d0…      # sha256 (hex) of a bearer token: printf %s "$TOKEN" | sha256sum
//	  - name: bob
//	    role: lead
//	    team: platform
//	    password_bcrypt: $2y$10$…  # bcrypt of a password: htpasswd -nbB bob 'secret'
//
// A token is sent as "Authorization: Bearer TOKEN", or as the password of HTTP basic auth with
// the viewer's name, which is what a browser asks for.
func Parse(name string, data []byte) (*File, error) {
	doc, err := configfile.ParseYAML(name, data)
	if err != nil {
		return nil, err
	}
	f := &File{}
	root, err := configfile.Mapping(name, doc, "viewers")
	if err != nil || root == nil {
		return f, err
	}
	list := configfile.Value(root, "viewers")
	if list == nil {
		return f, nil
	}
	if list.Kind != yaml.SequenceNode {
		return nil, configfile.At(name, list, "viewers must be a list")
	}
	seen := map[string]int{}
	for _, n := range list.Content {
		if n.Kind != yaml.MappingNode {
			return nil, configfile.At(name, n, "each viewer must be a mapping with name, role and a token or password")
		}
		if err := configfile.Keys(name, n, "name", "role", "team", "token_sha256", "password_bcrypt"); err != nil {
			return nil, err
		}
		var e entry
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			clean := identity.CleanValue
			if k.Value == "password_bcrypt" {
				clean = nil // a hash, not a name: "$" and all
			}
			s, err := configfile.String(name, v, k.Value, clean)
			if err != nil {
				return nil, err
			}
			switch k.Value {
			case "name":
				e.Name = s
			case "role":
				e.Role = s
			case "team":
				e.Team = s
			case "token_sha256":
				sum, err := hex.DecodeString(s)
				if err != nil || len(sum) != sha256.Size {
					return nil, configfile.At(name, v, "token_sha256 must be 64 hex digits, the sha256 of the token")
				}
				e.tokenSHA256 = sum
			case "password_bcrypt":
				if _, err := bcrypt.Cost([]byte(s)); err != nil {
					return nil, configfile.At(name, v, "password_bcrypt is not a bcrypt hash: %v", err)
				}
				e.bcrypt = []byte(s)
			}
		}
		switch {
		case e.Name == "":
			return nil, configfile.At(name, n, "a viewer without a name")
		case e.Role != RolePerson && e.Role != RoleLead && e.Role != RoleAdmin:
			return nil, configfile.At(name, n, "viewer %q: role %q, want person, lead or admin", e.Name, e.Role)
		case e.Role == RoleLead && e.Team == "":
			return nil, configfile.At(name, n, "viewer %q is a lead without a team", e.Name)
		case e.tokenSHA256 == nil && e.bcrypt == nil:
			return nil, configfile.At(name, n, "viewer %q has neither token_sha256 nor password_bcrypt", e.Name)
		}
		if line, dup := seen[e.Name]; dup {
			return nil, configfile.At(name, n, "viewer %q is already listed on line %d", e.Name, line)
		}
		seen[e.Name] = n.Line
		f.entries = append(f.entries, e)
	}
	return f, nil
}

// lookup returns the entry of a viewer by name.
func (f *File) lookup(name string) (entry, bool) {
	if f == nil {
		return entry{}, false
	}
	for _, e := range f.entries {
		if e.Name == name {
			return e, true
		}
	}
	return entry{}, false
}

// Trusted says how an authenticating proxy in front names the viewer: the header with their
// name and, optionally, headers with their role and team. Without a role header a viewer's role
// and team come from the access file's entry of that name, else they are a person. The zero
// value trusts no header.
type Trusted struct {
	UserHeader, RoleHeader, TeamHeader string
}

// Guard is an http.Handler in front of the metrics listener's mux that lets in only those
// allowed, and puts each viewer's scope in the request's context (summary.WithScope). The zero
// value is not usable; call NewGuard.
type Guard struct {
	file         func() *File // nil result: no file
	trusted      Trusted
	metricsToken []byte // sha256 of /metrics' own bearer token; nil: only an admin
	next         http.Handler
	now          func() time.Time

	mu       sync.Mutex
	verified map[[sha256.Size]byte]time.Time // passwords checked with bcrypt lately
}

// verifiedFor is how long a password that passed bcrypt is taken without checking again: the
// turns page refreshes every few seconds, and bcrypt is made to be slow.
const verifiedFor = 5 * time.Minute

// NewGuard returns a Guard of next. file returns the access file in force (nil: none); trusted
// names the headers of an authenticating proxy; metricsTokenSHA256 is the sha256 of the bearer
// token /metrics accepts besides an admin's (nil: an admin's only).
func NewGuard(next http.Handler, file func() *File, trusted Trusted, metricsTokenSHA256 []byte) *Guard {
	if file == nil {
		file = func() *File { return nil }
	}
	return &Guard{file: file, trusted: trusted, metricsToken: metricsTokenSHA256, next: next, now: time.Now, verified: map[[sha256.Size]byte]time.Time{}}
}

var _ http.Handler = (*Guard)(nil)

// ServeHTTP implements http.Handler.
func (g *Guard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/healthz" {
		g.next.ServeHTTP(w, r)
		return
	}
	if r.URL.Path == "/metrics" && g.metricsToken != nil {
		if tok, ok := identity.BearerToken(r.Header); ok && equalSHA256(g.metricsToken, tok) {
			g.next.ServeHTTP(w, r)
			return
		}
	}
	v, ok := g.viewer(r)
	if !ok || (r.URL.Path == "/metrics" && v.Role != RoleAdmin) {
		if ok {
			http.Error(w, "cctrace: /metrics is for Prometheus (its bearer token) and admins", http.StatusForbidden)
			return
		}
		// A browser asks for a name and password; a token works as the password.
		w.Header().Set("WWW-Authenticate", `Basic realm="cctrace", charset="UTF-8"`)
		http.Error(w, "cctrace: sign in: a token (Authorization: Bearer) or the name and password of the access file", http.StatusUnauthorized)
		return
	}
	g.next.ServeHTTP(w, r.WithContext(summary.WithScope(r.Context(), v.Scope())))
}

// viewer authenticates r: a trusted header first (an authenticating proxy already decided),
// then a bearer token, then basic auth.
func (g *Guard) viewer(r *http.Request) (Viewer, bool) {
	f := g.file()
	if g.trusted.UserHeader != "" {
		name := identity.CleanValue(r.Header.Get(g.trusted.UserHeader))
		if name == "" {
			return Viewer{}, false
		}
		v := Viewer{Name: name, Role: RolePerson}
		if e, ok := f.lookup(name); ok {
			v.Role, v.Team = e.Role, e.Team
		}
		if g.trusted.RoleHeader != "" {
			if role := strings.ToLower(identity.CleanValue(r.Header.Get(g.trusted.RoleHeader))); role != "" {
				v.Role = role
			}
		}
		if g.trusted.TeamHeader != "" {
			if team := identity.CleanValue(r.Header.Get(g.trusted.TeamHeader)); team != "" {
				v.Team = team
			}
		}
		switch {
		case v.Role == RoleLead && v.Team == "":
			v.Role = RolePerson
		case v.Role != RoleAdmin && v.Role != RoleLead:
			v.Role = RolePerson
		}
		return v, true
	}
	if f == nil {
		return Viewer{}, false
	}
	if tok, ok := identity.BearerToken(r.Header); ok {
		for _, e := range f.entries {
			if e.tokenSHA256 != nil && equalSHA256(e.tokenSHA256, tok) {
				return e.Viewer, true
			}
		}
		return Viewer{}, false
	}
	name, pass, ok := r.BasicAuth()
	if !ok {
		return Viewer{}, false
	}
	e, ok := f.lookup(name)
	if !ok {
		return Viewer{}, false
	}
	if e.tokenSHA256 != nil && equalSHA256(e.tokenSHA256, pass) {
		return e.Viewer, true
	}
	if e.bcrypt != nil && g.checkPassword(e, pass) {
		return e.Viewer, true
	}
	return Viewer{}, false
}

// checkPassword checks pass against e's bcrypt hash, remembering a success for verifiedFor.
func (g *Guard) checkPassword(e entry, pass string) bool {
	key := sha256.Sum256([]byte(string(e.bcrypt) + "\x00" + pass))
	now := g.now()
	g.mu.Lock()
	t, ok := g.verified[key]
	g.mu.Unlock()
	if ok && now.Sub(t) < verifiedFor {
		return true
	}
	if bcrypt.CompareHashAndPassword(e.bcrypt, []byte(pass)) != nil {
		return false
	}
	g.mu.Lock()
	for k, at := range g.verified {
		if now.Sub(at) >= verifiedFor {
			delete(g.verified, k)
		}
	}
	g.verified[key] = now
	g.mu.Unlock()
	return true
}

// equalSHA256 reports whether token hashes to sum, in constant time.
func equalSHA256(sum []byte, token string) bool {
	got := sha256.Sum256([]byte(token))
	return subtle.ConstantTimeCompare(sum, got[:]) == 1
}

// TokenSHA256 returns the sha256 of a token (surrounding white space trimmed, as a token file's
// newline is), for NewGuard's metrics token.
func TokenSHA256(token string) []byte {
	sum := sha256.Sum256([]byte(strings.TrimSpace(token)))
	return sum[:]
}
