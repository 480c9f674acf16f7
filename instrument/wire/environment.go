package wire

import (
	"bytes"

	"github.com/go-json-experiment/json/jsontext"
)

// Claude Code describes where it runs in a system-role message of its own, `# Environment`
// (docs/wire.md, "messages"), whose list names the primary working directory.
const (
	workingDirectoryMarker  = ` - Primary working directory: `
	maxWorkingDirectoryJSON = 4096
)

// workingDirectory returns the primary working directory an environment text block names (raw,
// its JSON string), or "".
func workingDirectory(raw []byte) string {
	k := bytes.Index(raw, []byte(workingDirectoryMarker))
	if k < 0 {
		return ""
	}
	rest := raw[k+len(workingDirectoryMarker):]
	rest = rest[:min(len(rest), maxWorkingDirectoryJSON)]
	// The line ends at an escaped newline, or with the string.
	if end := bytes.Index(rest, []byte(`\n`)); end >= 0 {
		rest = rest[:end]
	} else if end := bytes.LastIndexByte(rest, '"'); end >= 0 {
		rest = rest[:end]
	}
	quoted := make([]byte, 0, len(rest)+2)
	quoted = append(append(append(quoted, '"'), rest...), '"')
	dir, err := jsontext.AppendUnquote(nil, quoted)
	if err != nil {
		return ""
	}
	return string(bytes.TrimSpace(dir))
}
