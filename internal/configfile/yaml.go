// Package configfile reads the files an operator edits while cctrace runs (the directory of
// people, the budgets, the access list): YAML whose every error names the file and the line, and
// a watcher that reloads a file when it changes, keeping the previous contents in force when the
// new ones are refused.
package configfile

import (
	"errors"
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// ParseYAML parses data as one YAML document; a syntax error says "name:line: …".
func ParseYAML(name string, data []byte) (*yaml.Node, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		var te *yaml.TypeError
		if errors.As(err, &te) {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		// yaml.v3 says "yaml: line 3: did not find expected key"; the file name leads, as in
		// every other error of these files.
		msg := strings.TrimPrefix(err.Error(), "yaml: ")
		if rest, ok := strings.CutPrefix(msg, "line "); ok {
			return nil, fmt.Errorf("%s:%s", name, rest)
		}
		return nil, fmt.Errorf("%s: %s", name, msg)
	}
	return &doc, nil
}

// Mapping returns the document's top-level mapping (nil for an empty file) after checking that it
// has only the keys allowed.
func Mapping(name string, doc *yaml.Node, allowed ...string) (*yaml.Node, error) {
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil, nil
	}
	root := doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return nil, nil
	}
	if root.Kind != yaml.MappingNode {
		return nil, At(name, root, "want a mapping with the keys %s", strings.Join(allowed, ", "))
	}
	if err := Keys(name, root, allowed...); err != nil {
		return nil, err
	}
	return root, nil
}

// Keys checks that mapping m has only the keys allowed, each once.
func Keys(name string, m *yaml.Node, allowed ...string) error {
	seen := make(map[string]int)
	for i := 0; i+1 < len(m.Content); i += 2 {
		k := m.Content[i]
		ok := false
		for _, a := range allowed {
			ok = ok || k.Value == a
		}
		if !ok {
			return At(name, k, "unknown key %q (want %s)", k.Value, strings.Join(allowed, ", "))
		}
		if line, dup := seen[k.Value]; dup {
			return At(name, k, "key %q is already given on line %d", k.Value, line)
		}
		seen[k.Value] = k.Line
	}
	return nil
}

// Value returns the value of key in mapping m, nil when absent or null.
func Value(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			v := m.Content[i+1]
			if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
				return nil
			}
			return v
		}
	}
	return nil
}

// String returns a scalar's value, which must be left unchanged by clean (nil: any string). Its
// errors name the line and what, never the value: a value may be a secret pasted by mistake.
func String(name string, n *yaml.Node, what string, clean func(string) string) (string, error) {
	if n.Kind != yaml.ScalarNode {
		return "", At(name, n, "%s must be a string", what)
	}
	if clean != nil && clean(n.Value) != n.Value {
		return "", At(name, n, "%s has control characters or surrounding space, or is too long", what)
	}
	return n.Value, nil
}

// At is an error about node n of file name: "name:line: what".
func At(name string, n *yaml.Node, format string, args ...any) error {
	return fmt.Errorf("%s:%d: %s", name, n.Line, fmt.Sprintf(format, args...))
}
