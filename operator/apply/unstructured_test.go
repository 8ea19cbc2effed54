package apply

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestHolds: a live object holds what the operator applies when every field
// it sets has its value there: more fields live are fine, a missing or
// different one is not, lists compare item by item and whole (an extra
// item live is a difference), and numbers compare by value whichever
// decoder made them.
func TestHolds(t *testing.T) {
	want := map[string]any{"spec": map[string]any{"to": map[string]any{"name": "s", "weight": int64(100)},
		"hosts": []any{"a", "b"}}}
	tests := []struct {
		name string
		live string
		want bool
	}{
		{"the same, numbers decoded as float64", `{"spec": {"to": {"name": "s", "weight": 100}, "hosts": ["a", "b"]}}`, true},
		{"more fields live (defaults, status)", `{"spec": {"to": {"name": "s", "weight": 100, "kind": "Service"}, "hosts": ["a", "b"], "wildcardPolicy": "None"}, "status": {}}`, true},
		{"a field missing", `{"spec": {"to": {"name": "s"}, "hosts": ["a", "b"]}}`, false},
		{"a different value", `{"spec": {"to": {"name": "s", "weight": 50}, "hosts": ["a", "b"]}}`, false},
		{"a list item more", `{"spec": {"to": {"name": "s", "weight": 100}, "hosts": ["a", "b", "c"]}}`, false},
		{"a list in another order", `{"spec": {"to": {"name": "s", "weight": 100}, "hosts": ["b", "a"]}}`, false},
		{"another type", `{"spec": {"to": "s", "hosts": ["a", "b"]}}`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var live map[string]any
			require.NoError(t, json.Unmarshal([]byte(tc.live), &live))
			require.Equal(t, tc.want, holds(live, want))
		})
	}
}
