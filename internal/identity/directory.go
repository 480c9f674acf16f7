package identity

import (
	"go.yaml.in/yaml/v3"

	"github.com/cctrace/cctrace/internal/configfile"
)

// Person is someone requests are attributed to. The zero value is nobody.
type Person struct {
	Name string // as it appears in labels, spans and the turns page
	Team string // "" for none
}

// Directory maps identities (identity header values, account uuids, credential fingerprints) to
// people. A nil *Directory knows nobody. It is immutable once parsed.
type Directory struct {
	byIdentity map[string]Person
}

// Lookup returns the person identity stands for.
func (d *Directory) Lookup(identity string) (Person, bool) {
	if d == nil || identity == "" {
		return Person{}, false
	}
	p, ok := d.byIdentity[identity]
	return p, ok
}

// ParseDirectory parses a directory file. name is the file's name for errors, which say
// "name:line: what". The format (YAML):
//
//	people:
//	  - name: alice             # required, unique
//	    team: platform          # optional
//	    identities:             # at least one; each names one person only
//	      - alice               # a value of the identity header (X-Cctrace-User)
//	      - key-3f9c1d7b2a0e4c55  # a credential fingerprint, as cctrace shows it
//	      - 7d7a3c1e-1111-4a2b-9c3d-0123456789ab  # an account uuid (subscription login)
func ParseDirectory(name string, data []byte) (*Directory, error) {
	doc, err := configfile.ParseYAML(name, data)
	if err != nil {
		return nil, err
	}
	d := &Directory{byIdentity: make(map[string]Person)}
	root, err := configfile.Mapping(name, doc, "people")
	if err != nil || root == nil {
		return d, err
	}
	people := configfile.Value(root, "people")
	if people == nil {
		return d, nil
	}
	if people.Kind != yaml.SequenceNode {
		return nil, configfile.At(name, people, "people must be a list of people")
	}
	seenName := make(map[string]int)
	seenID := make(map[string]int)
	for _, entry := range people.Content {
		if entry.Kind != yaml.MappingNode {
			return nil, configfile.At(name, entry, "each person must be a mapping with name, team and identities")
		}
		var p Person
		var ids []*yaml.Node
		for i := 0; i+1 < len(entry.Content); i += 2 {
			k, v := entry.Content[i], entry.Content[i+1]
			switch k.Value {
			case "name":
				if p.Name, err = configfile.String(name, v, "name", CleanValue); err != nil {
					return nil, err
				}
			case "team":
				if p.Team, err = configfile.String(name, v, "team", CleanValue); err != nil {
					return nil, err
				}
			case "identities":
				if v.Kind != yaml.SequenceNode {
					return nil, configfile.At(name, v, "identities must be a list of strings")
				}
				ids = v.Content
			default:
				return nil, configfile.At(name, k, "unknown key %q (want name, team, identities)", k.Value)
			}
		}
		if p.Name == "" {
			return nil, configfile.At(name, entry, "a person without a name")
		}
		if line, dup := seenName[p.Name]; dup {
			return nil, configfile.At(name, entry, "person %q is already listed on line %d", p.Name, line)
		}
		seenName[p.Name] = entry.Line
		if len(ids) == 0 {
			return nil, configfile.At(name, entry, "person %q has no identities", p.Name)
		}
		for _, idNode := range ids {
			id, err := configfile.String(name, idNode, "an identity", CleanValue)
			if err != nil {
				return nil, err
			}
			if id == "" {
				return nil, configfile.At(name, idNode, "an empty identity")
			}
			if line, dup := seenID[id]; dup {
				return nil, configfile.At(name, idNode, "an identity is already given on line %d", line) // not echoed: it may be a key
			}
			seenID[id] = idNode.Line
			d.byIdentity[id] = p
		}
	}
	return d, nil
}
