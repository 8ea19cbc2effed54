package stackconfig

import (
	"fmt"
	"slices"
	"strings"

	"github.com/blang/semver/v4"
)

// Line is a Llama Stack release line with one run-config layout.
type Line string

// The lines the operator knows, each checked against one upstream tag.
const (
	Line02 Line = "0.2"
	Line03 Line = "0.3"
)

// lines are the lines the operator knows, oldest first.
func lines() []Line { return []Line{Line02, Line03} }

// Tag is the upstream llamastack/llama-stack tag a line's model (and the
// operator's embedded base configs of that line) were written from.
func (l Line) Tag() string {
	switch l {
	case Line02:
		return "v0.2.23"
	case Line03:
		return "v0.3.0"
	}
	return ""
}

// knownVersions maps each Llama Stack version whose layout was checked
// against upstream's source to its line. Any other version is refused:
// the operator never guesses a layout.
var knownVersions = map[string]Line{
	"0.2.23": Line02,
	"0.3.0":  Line03,
}

// KnownVersions lists the Llama Stack versions with a known layout, sorted.
func KnownVersions() []string {
	out := make([]string, 0, len(knownVersions))
	for v := range knownVersions {
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b string) int {
		return semver.MustParse(a).Compare(semver.MustParse(b))
	})
	return out
}

// UnknownVersionError says that a Llama Stack version has no known layout.
type UnknownVersionError struct {
	// Version is the version asked for ("" when the pin names none).
	Version string
}

func (e *UnknownVersionError) Error() string {
	v := e.Version
	if v == "" {
		v = "unknown (the operand pin names no llamaStackVersion)"
	}
	return fmt.Sprintf("Llama Stack version %s has no known run-config layout; this operator knows %s",
		v, strings.Join(KnownVersions(), ", "))
}

// LineOf returns the line of a Llama Stack version such as "0.3.0".
func LineOf(version string) (Line, error) {
	if l, ok := knownVersions[strings.TrimPrefix(version, "v")]; ok {
		return l, nil
	}
	return "", &UnknownVersionError{Version: version}
}
