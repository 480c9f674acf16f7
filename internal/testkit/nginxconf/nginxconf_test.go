package nginxconf

import (
	"os"
	"strings"
	"testing"
)

func TestSiteOfTheShippedFile(t *testing.T) {
	raw, err := os.ReadFile("../../../" + Path)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Site(string(raw), "127.0.0.1:9000", "/tmp/x/access.log", []string{"127.0.0.1:9001", "127.0.0.1:9002"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"    server 127.0.0.1:9001 max_fails=1 fail_timeout=10s;",
		"    server 127.0.0.1:9002 max_fails=1 fail_timeout=10s;",
		"    listen 127.0.0.1:9000;",
		"    access_log /tmp/x/access.log cctrace;",
		"hash $http_x_claude_code_session_id consistent;",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("adapted site lacks %q:\n%s", want, got)
		}
	}
	if n := strings.Count(got, "\n    server "); n != 2 {
		t.Errorf("%d server lines, want 2:\n%s", n, got)
	}
}

func TestSiteRefusesWhatItCannotAdapt(t *testing.T) {
	tests := map[string]string{
		"no server": "upstream cctrace {\n}\nserver {\n    listen 1;\n    access_log x y;\n}",
		"no listen": "upstream cctrace {\n    server a:1;\n}\nserver {\n    access_log x y;\n}",
		"no log":    "upstream cctrace {\n    server a:1;\n}\nserver {\n    listen 1;\n}",
	}
	for name, site := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := Site(site, "127.0.0.1:1", "off", []string{"127.0.0.1:2"}); err == nil {
				t.Error("no error")
			}
		})
	}
}
