package main

import (
	"slices"
	"testing"
)

// TestStackWrites: a stack's writes are those to it and to its objects
// (named after it) and the Events about it, not a longer-named stack's nor
// shared objects'; its floor counts each object once and the status once,
// Events not at all.
func TestStackWrites(t *testing.T) {
	w := func(verb, resource, sub, name string) write {
		var x write
		x.Verb, x.ObjectRef.Resource, x.ObjectRef.Subresource, x.ObjectRef.Name = verb, resource, sub, name
		return x
	}
	ws := []write{
		w("patch", "deployments", "", "s0001"),
		w("patch", "configmaps", "", "s0001-run-config"),
		w("create", "secrets", "", "s0001-cache"),
		w("patch", "secrets", "", "s0001-cache"),
		w("patch", "inferencestacks", "status", "s0001"),
		w("create", "events", "", "s0001.18a2"),
		w("patch", "deployments", "", "s00012"),
		w("patch", "secrets", "", "shared-key"),
	}
	list, floor := stackWrites(ws, "s0001")
	want := []string{
		"create events s0001.18a2", "create secrets s0001-cache", "patch configmaps s0001-run-config", "patch deployments s0001",
		"patch inferencestacks/status s0001", "patch secrets s0001-cache",
	}
	if !slices.Equal(list, want) || floor != 4 {
		t.Errorf("stackWrites = %q, floor %d; want %q, floor 4", list, floor, want)
	}
}
