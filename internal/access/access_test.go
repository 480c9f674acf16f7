package access

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/cctrace/cctrace/summary"
)

func sha(s string) string { sum := sha256.Sum256([]byte(s)); return hex.EncodeToString(sum[:]) }

func testFile(t *testing.T) *File {
	t.Helper()
	hash, err := bcrypt.GenerateFromPassword([]byte("bobs password"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	f, err := Parse("access.yaml", []byte(`viewers:
  - name: alice
    role: person
    token_sha256: `+sha("alice-token")+`
  - name: bob
    role: lead
    team: platform
    password_bcrypt: "`+string(hash)+`"
  - name: root
    role: admin
    token_sha256: `+sha("root-token")+`
`))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestParseErrors(t *testing.T) {
	tests := []struct{ name, text, want string }{
		{"unknown key", "viewers:\n  - name: a\n    role: admin\n    token: x\n", "a.yaml:4: unknown key \"token\""},
		{"bad role", "viewers:\n  - name: a\n    role: boss\n    token_sha256: " + sha("x") + "\n", "a.yaml:2: viewer \"a\": role \"boss\""},
		{"lead without team", "viewers:\n  - name: a\n    role: lead\n    token_sha256: " + sha("x") + "\n", "a.yaml:2: viewer \"a\" is a lead without a team"},
		{"no secret", "viewers:\n  - name: a\n    role: person\n", "a.yaml:2: viewer \"a\" has neither"},
		{"short hash", "viewers:\n  - name: a\n    role: person\n    token_sha256: abc\n", "a.yaml:4: token_sha256 must be 64 hex digits"},
		{"not bcrypt", "viewers:\n  - name: a\n    role: person\n    password_bcrypt: secret\n", "a.yaml:4: password_bcrypt is not a bcrypt hash"},
		{"twice", "viewers:\n  - {name: a, role: admin, token_sha256: " + sha("x") + "}\n  - {name: a, role: admin, token_sha256: " + sha("y") + "}\n", "a.yaml:3: viewer \"a\" is already listed on line 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("a.yaml", []byte(tt.text))
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("error %v, want it to begin %q", err, tt.want)
			}
		})
	}
}

// scopeEcho answers with the scope it was given.
var scopeEcho = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	sc := summary.ScopeFrom(r.Context())
	_, _ = w.Write([]byte("user=" + sc.User + " team=" + sc.Team))
})

func TestGuard(t *testing.T) {
	f := testFile(t)
	files := NewGuard(scopeEcho, func() *File { return f }, Trusted{}, TokenSHA256("prom-token\n"))
	proxied := NewGuard(scopeEcho, func() *File { return f }, Trusted{UserHeader: "X-Forwarded-User", RoleHeader: "X-Forwarded-Role", TeamHeader: "X-Forwarded-Team"}, nil)
	type req struct {
		path   string
		header map[string]string
		basic  []string
	}
	tests := []struct {
		name  string
		g     *Guard
		req   req
		code  int
		scope string
	}{
		{"nobody", files, req{path: "/api/turns"}, 401, ""},
		{"health is open", files, req{path: "/healthz"}, 200, "user= team="},
		{"person by token", files, req{path: "/api/turns", header: map[string]string{"Authorization": "Bearer alice-token"}}, 200, "user=alice team="},
		{"wrong token", files, req{path: "/api/turns", header: map[string]string{"Authorization": "Bearer nope"}}, 401, ""},
		{"token as basic password", files, req{path: "/", basic: []string{"alice", "alice-token"}}, 200, "user=alice team="},
		{"token of another name", files, req{path: "/", basic: []string{"bob", "alice-token"}}, 401, ""},
		{"lead by password", files, req{path: "/", basic: []string{"bob", "bobs password"}}, 200, "user= team=platform"},
		{"lead by password again (cached)", files, req{path: "/", basic: []string{"bob", "bobs password"}}, 200, "user= team=platform"},
		{"wrong password", files, req{path: "/", basic: []string{"bob", "guess"}}, 401, ""},
		{"admin", files, req{path: "/api/turns", header: map[string]string{"Authorization": "Bearer root-token"}}, 200, "user= team="},
		{"metrics by its token", files, req{path: "/metrics", header: map[string]string{"Authorization": "Bearer prom-token"}}, 200, "user= team="},
		{"metrics by an admin", files, req{path: "/metrics", header: map[string]string{"Authorization": "Bearer root-token"}}, 200, "user= team="},
		{"metrics not for a person", files, req{path: "/metrics", header: map[string]string{"Authorization": "Bearer alice-token"}}, 403, ""},
		{"metrics token is not a viewer", files, req{path: "/api/turns", header: map[string]string{"Authorization": "Bearer prom-token"}}, 401, ""},
		{"trusted header", proxied, req{path: "/", header: map[string]string{"X-Forwarded-User": "carol"}}, 200, "user=carol team="},
		{"trusted header, role from the file", proxied, req{path: "/", header: map[string]string{"X-Forwarded-User": "bob"}}, 200, "user= team=platform"},
		{"trusted role and team headers", proxied, req{path: "/", header: map[string]string{"X-Forwarded-User": "dave", "X-Forwarded-Role": "Lead", "X-Forwarded-Team": "search"}}, 200, "user= team=search"},
		{"trusted lead without a team is a person", proxied, req{path: "/", header: map[string]string{"X-Forwarded-User": "erin", "X-Forwarded-Role": "lead"}}, 200, "user=erin team="},
		{"no trusted header", proxied, req{path: "/"}, 401, ""},
		{"odd bytes in the trusted header", proxied, req{path: "/", header: map[string]string{"X-Forwarded-User": "fr\x01ed"}}, 200, "user=fred team="},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, tt.req.path, nil)
			for k, v := range tt.req.header {
				r.Header.Set(k, v)
			}
			if tt.req.basic != nil {
				r.SetBasicAuth(tt.req.basic[0], tt.req.basic[1])
			}
			w := httptest.NewRecorder()
			tt.g.ServeHTTP(w, r)
			if w.Code != tt.code {
				t.Fatalf("status %d, want %d: %s", w.Code, tt.code, w.Body)
			}
			if tt.code == 200 && w.Body.String() != tt.scope {
				t.Errorf("scope %q, want %q", w.Body.String(), tt.scope)
			}
			if tt.code == 401 && !strings.HasPrefix(w.Header().Get("WWW-Authenticate"), "Basic") {
				t.Error("401 without a basic challenge: a browser would not ask")
			}
		})
	}
}
