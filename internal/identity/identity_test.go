package identity

import (
	"net/http"
	"strings"
	"testing"

	"github.com/cctrace/cctrace/instrument/wire"
)

var testSecret = []byte("0123456789abcdef0123456789abcdef")

const testKey = "sk-ant-api03-TESTMARKER-0000"

func TestFingerprint(t *testing.T) {
	f, err := NewFingerprinter(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewFingerprinter([]byte("another secret, also 32 bytes or more"))
	if err != nil {
		t.Fatal(err)
	}
	fp := f.Of(testKey)
	if !strings.HasPrefix(fp, CredentialPrefix) || len(fp) != len(CredentialPrefix)+16 {
		t.Fatalf("fingerprint %q: want %s and 16 hex digits", fp, CredentialPrefix)
	}
	if f.Of(testKey) != fp {
		t.Error("the same key and secret give different fingerprints")
	}
	if f.Of(testKey+"x") == fp {
		t.Error("two keys give the same fingerprint")
	}
	if other.Of(testKey) == fp {
		t.Error("the fingerprint does not depend on the secret")
	}
	// Nothing of the key shows through: no run of 4 of its characters after the prefix.
	for i := 0; i+4 <= len(testKey); i++ {
		if strings.Contains(fp[len(CredentialPrefix):], testKey[i:i+4]) {
			t.Errorf("fingerprint %q contains %q of the key", fp, testKey[i:i+4])
		}
	}
	if _, err := NewFingerprinter([]byte("short")); err == nil {
		t.Error("a short secret was accepted")
	}

	tests := []struct {
		name   string
		header http.Header
		want   string
	}{
		{"x-api-key", http.Header{"X-Api-Key": {testKey}}, fp},
		{"bearer", http.Header{"Authorization": {"Bearer " + testKey}}, fp},
		{"bearer any case", http.Header{"Authorization": {"bearer " + testKey}}, fp},
		{"x-api-key first", http.Header{"X-Api-Key": {testKey}, "Authorization": {"Bearer other"}}, fp},
		{"basic is no credential", http.Header{"Authorization": {"Basic dXNlcjpwYXNz"}}, ""},
		{"none", http.Header{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := f.Credential(tt.header); got != tt.want {
				t.Errorf("Credential = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestCleanValue(t *testing.T) {
	tests := []struct{ in, want string }{
		{"alice", "alice"},
		{"  alice  ", "alice"},
		{"ali\x00ce\r\n", "alice"},
		{"al\xffice", "alice"},
		{"zoë", "zoë"},
		{"a\u200bb", "ab"}, // a zero-width space prints nothing
		{strings.Repeat("x", 500), strings.Repeat("x", MaxValueBytes)},
		{strings.Repeat("é", 100), strings.Repeat("é", MaxValueBytes/2)},
	}
	for _, tt := range tests {
		if got := CleanValue(tt.in); got != tt.want {
			t.Errorf("CleanValue(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestParseOrder(t *testing.T) {
	if got, err := ParseOrder("key, header"); err != nil || len(got) != 2 || got[0] != SourceCredential || got[1] != SourceHeader {
		t.Errorf("ParseOrder = %v, %v", got, err)
	}
	for _, bad := range []string{"", "header,header", "email"} {
		if _, err := ParseOrder(bad); err == nil {
			t.Errorf("ParseOrder(%q) accepted", bad)
		}
	}
}

func TestResolve(t *testing.T) {
	dir, err := ParseDirectory("dir.yaml", []byte(`
people:
  - name: alice
    team: platform
    identities: [alice, key-aaaaaaaaaaaaaaaa]
  - name: bob
    team: search
    identities: [key-bbbbbbbbbbbbbbbb, 7d7a3c1e-1111-4a2b-9c3d-0123456789ab]
`))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name               string
		order              []Source
		id                 wire.Identity
		account            string
		wantUser, wantTeam string
		wantSource         Source
	}{
		{"header known", DefaultOrder, wire.Identity{Header: "alice", Credential: "key-bbbbbbbbbbbbbbbb"}, "", "alice", "platform", SourceHeader},
		{"key first", []Source{SourceCredential, SourceHeader}, wire.Identity{Header: "alice", Credential: "key-bbbbbbbbbbbbbbbb"}, "", "bob", "search", SourceCredential},
		{"unknown header, known key", DefaultOrder, wire.Identity{Header: "mallory", Credential: "key-aaaaaaaaaaaaaaaa"}, "", "alice", "platform", SourceCredential},
		{"account", DefaultOrder, wire.Identity{}, "7d7a3c1e-1111-4a2b-9c3d-0123456789ab", "bob", "search", SourceAccount},
		{"account over a placeholder key", DefaultOrder, wire.Identity{Credential: "key-cccccccccccccccc"}, "7d7a3c1e-1111-4a2b-9c3d-0123456789ab", "bob", "search", SourceAccount},
		{"nobody known: the first identity", DefaultOrder, wire.Identity{Header: "carol", Credential: "key-cccccccccccccccc"}, "", "carol", "", SourceHeader},
		{"unknown key stands for itself", DefaultOrder, wire.Identity{Credential: "key-cccccccccccccccc"}, "", "key-cccccccccccccccc", "", SourceCredential},
		{"source left out", []Source{SourceCredential}, wire.Identity{Header: "alice"}, "", "", "", ""},
		{"nothing", DefaultOrder, wire.Identity{}, "", "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewResolver(tt.order, func() *Directory { return dir })
			id := tt.id
			src := r.Resolve(&id, tt.account)
			if id.User != tt.wantUser || id.Team != tt.wantTeam || src != tt.wantSource {
				t.Errorf("Resolve = %q/%q by %q, want %q/%q by %q", id.User, id.Team, src, tt.wantUser, tt.wantTeam, tt.wantSource)
			}
		})
	}

	t.Run("fast", func(t *testing.T) {
		r := NewResolver(DefaultOrder, func() *Directory { return dir })
		id := wire.Identity{Header: "alice"}
		if !r.ResolveFast(&id) || id.User != "alice" {
			t.Errorf("ResolveFast = %q, want alice by the header, which comes first", id.User)
		}
		id = wire.Identity{Credential: "key-aaaaaaaaaaaaaaaa"}
		if r.ResolveFast(&id) {
			t.Error("settled without the account, which comes before the key")
		}
		r = NewResolver([]Source{SourceHeader, SourceCredential, SourceAccount}, func() *Directory { return dir })
		id = wire.Identity{Header: "nobody", Credential: "key-bbbbbbbbbbbbbbbb"}
		if !r.ResolveFast(&id) || id.User != "bob" {
			t.Errorf("ResolveFast = %q", id.User)
		}
	})
}

func TestAccountFingerprint(t *testing.T) {
	f, err := NewFingerprinter([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	const uuid = "7d7a3c1e-1111-4a2b-9c3d-0123456789ab"
	a := f.Account(uuid)
	if !strings.HasPrefix(a, AccountPrefix) || len(a) != len(AccountPrefix)+16 || strings.Contains(a, uuid) {
		t.Errorf("Account = %q, want acct- and 16 hex digits", a)
	}
	if a != f.Account(uuid) || a == f.Account(uuid+"x") {
		t.Error("Account is not a stable function of the id")
	}
	if strings.TrimPrefix(a, AccountPrefix) == strings.TrimPrefix(f.Of(uuid), CredentialPrefix) {
		t.Error("an account and a credential of the same text share a fingerprint")
	}
	for _, tc := range []struct{ account, cred, want string }{
		{uuid, "key-0000000000000000", a},
		{"", "key-0000000000000000", "key-0000000000000000"},
		{"  ", "", ""},
	} {
		if got := f.LimitAccount(tc.account, tc.cred); got != tc.want {
			t.Errorf("LimitAccount(%q, %q) = %q, want %q", tc.account, tc.cred, got, tc.want)
		}
	}
}
