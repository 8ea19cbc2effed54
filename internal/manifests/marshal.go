package manifests

import (
	"encoding/json"

	"sigs.k8s.io/yaml"
)

// Marshal encodes obj as YAML with sorted keys, dropping the top-level
// fields named in drop and metadata.creationTimestamp.
func Marshal(obj any, drop ...string) ([]byte, error) {
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	for _, k := range drop {
		delete(m, k)
	}
	if md, ok := m["metadata"].(map[string]any); ok {
		delete(md, "creationTimestamp")
	}
	stripCreationTimestamps(m)
	return yaml.Marshal(m)
}

// stripCreationTimestamps drops the null creationTimestamp that typed pod
// templates carry.
func stripCreationTimestamps(v any) {
	switch t := v.(type) {
	case map[string]any:
		if ts, ok := t["creationTimestamp"]; ok && ts == nil {
			delete(t, "creationTimestamp")
		}
		for _, c := range t {
			stripCreationTimestamps(c)
		}
	case []any:
		for _, c := range t {
			stripCreationTimestamps(c)
		}
	}
}
