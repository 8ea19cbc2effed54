package stackconfig

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A line's data is read the first time that line is asked for, once: an
// operator reads only its pinned line's.
func TestPerLineLoadsOnlyTheLineAskedFor(t *testing.T) {
	loads := map[Line]int{}
	of := perLine(func(l Line) string { loads[l]++; return l.Tag() })
	require.Empty(t, loads, "nothing is read before a line is asked for")
	require.Equal(t, "v0.3.0", of[Line03]())
	require.Equal(t, "v0.3.0", of[Line03]())
	require.Equal(t, map[Line]int{Line03: 1}, loads)
	require.Len(t, of, len(Lines()), "every line has a loader")
}

// RunConfigFields is read once per line; what a caller does with the
// slice it gets does not change what the next caller gets.
func TestRunConfigFieldsAreTheLinesOwn(t *testing.T) {
	first := Line03.RunConfigFields()
	require.Contains(t, first, "storage")
	want := append([]string(nil), first...)
	first[0] = "changed by a caller"
	require.Equal(t, want, Line03.RunConfigFields())
}

// The RegisteredResources fields are read once per line too, and each
// caller gets its own slice; 0.8 has no datasets (docs/lines/0.8.0.md).
func TestRegisteredResourceFieldsAreTheLinesOwn(t *testing.T) {
	first := Line08.RegisteredResourceFields()
	require.Contains(t, first, "models")
	require.NotContains(t, first, "datasets")
	require.Contains(t, Line07.RegisteredResourceFields(), "datasets")
	want := append([]string(nil), first...)
	first[0] = "changed by a caller"
	require.Equal(t, want, Line08.RegisteredResourceFields())
}
