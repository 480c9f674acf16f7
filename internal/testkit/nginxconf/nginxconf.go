// Package nginxconf adapts deploy/nginx/cctrace.conf, the nginx site that puts several cctrace
// replicas behind one address, to the addresses of a test or a benchmark, so that both run the
// file that is shipped rather than a copy of it.
package nginxconf

import (
	"fmt"
	"regexp"
	"strings"
)

// Path is the shipped site file, relative to the repository's root.
const Path = "deploy/nginx/cctrace.conf"

// serverLine matches a server line of the upstream block: its address, then its parameters.
var serverLine = regexp.MustCompile(`^(\s*server\s+)\S+(\s.*;|;)$`)

// Site returns site (the contents of Path) with its upstream servers replaced by replicas
// (host:port each, keeping the parameters of the file's first server line), its listener by
// listen (host:port), and its access log by accessLog ("off" turns it off). It fails when site
// lacks one of those lines, so that a change to the file cannot go unnoticed.
func Site(site, listen, accessLog string, replicas []string) (string, error) {
	if len(replicas) == 0 {
		return "", fmt.Errorf("adapting %s: no replicas", Path)
	}
	var out []string
	servers, listens, logs := 0, 0, 0
	for _, line := range strings.Split(site, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case serverLine.MatchString(line):
			if servers == 0 {
				for _, r := range replicas {
					out = append(out, serverLine.ReplaceAllString(line, "${1}"+r+"${2}"))
				}
			}
			servers++
			continue
		case strings.HasPrefix(trimmed, "listen "):
			listens++
			line = "    listen " + listen + ";"
		case strings.HasPrefix(trimmed, "access_log "):
			logs++
			if accessLog == "off" {
				line = "    access_log off;"
			} else {
				fields := strings.Fields(strings.TrimSuffix(trimmed, ";"))
				line = "    access_log " + strings.Join(append([]string{accessLog}, fields[2:]...), " ") + ";"
			}
		}
		out = append(out, line)
	}
	if servers == 0 || listens != 1 || logs != 1 {
		return "", fmt.Errorf("adapting %s: %d server, %d listen and %d access_log lines; want some, one and one", Path, servers, listens, logs)
	}
	return strings.Join(out, "\n"), nil
}
