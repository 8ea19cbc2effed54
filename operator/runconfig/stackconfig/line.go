package stackconfig

import (
	"fmt"
	"maps"
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
	// Line07 is Llama Stack 0.7 (src/llama_stack, config.yaml read into
	// StackConfig).
	Line07 Line = "0.7"
	// Line08 is OGX 0.8, Llama Stack renamed (src/ogx, `ogx stack run`,
	// OGX_* variables).
	Line08 Line = "0.8"
)

// lineEntry is the registry's entry of a line: the upstream tag its data
// (distributions/<tag>/: base configs, facts.json, schemas.json) was
// derived at, and the versions it covers. Everything else the operator
// knows of a line is read from that data; this table is the only place
// in the operator that names a line.
type lineEntry struct {
	tag      string
	versions []string
}

// registry holds every line the operator knows. A new line is a new data
// folder and a row here.
var registry = map[Line]lineEntry{
	Line02: {tag: "v0.2.23", versions: []string{"0.2.23"}},
	Line03: {tag: "v0.3.0", versions: []string{"0.3.0"}},
	Line07: {tag: "v0.7.1", versions: []string{"0.7.1"}},
	Line08: {tag: "v0.8.0", versions: []string{"0.8.0"}},
}

// Lines are the lines the operator knows, oldest first.
func Lines() []Line { return lines() }

func lines() []Line {
	return slices.SortedFunc(maps.Keys(registry), func(a, b Line) int {
		return semver.MustParse(registry[a].versions[0]).Compare(semver.MustParse(registry[b].versions[0]))
	})
}

// Known reports whether the operator knows the line.
func (l Line) Known() bool {
	_, ok := registry[l]
	return ok
}

// Tag is the upstream llamastack/llama-stack tag a line's data (and the
// operator's embedded base configs of that line) were derived from; ""
// for a line the registry lacks.
func (l Line) Tag() string { return registry[l].tag }

// KnownVersions lists the Llama Stack versions with a known layout, sorted.
func KnownVersions() []string {
	var out []string
	for _, e := range registry {
		out = append(out, e.versions...)
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
	v := strings.TrimPrefix(version, "v")
	for l, e := range registry {
		if slices.Contains(e.versions, v) {
			return l, nil
		}
	}
	return "", &UnknownVersionError{Version: version}
}

// Layout is how a line's run config places the server's stores and the
// resources it registers at start. It is read from the line's
// StackRunConfig schema (schemas.json), not declared per line.
type Layout int

// The layouts upstream's StackRunConfig has had.
const (
	// UnknownLayout is the layout of a line the registry lacks, or whose
	// schema has neither shape: every use of it is an error.
	UnknownLayout Layout = iota
	// InlineStores (0.2): metadata_store and inference_store, and a
	// provider's kvstore, are inline store configs (a type and a db_path
	// or a host); resources are top-level lists (models, shields, ...).
	InlineStores
	// StorageBackends (0.3 on): a required storage section names backends
	// (kv_sqlite, sql_postgres, ...) and the server's stores; providers
	// refer to a backend by name with a namespace or a table; resources
	// live under registered_resources.
	StorageBackends
)

func (l Layout) String() string {
	switch l {
	case InlineStores:
		return "inline stores (metadata_store, inference_store, top-level resource lists)"
	case StorageBackends:
		return "storage backends (storage.backends and storage.stores, registered_resources)"
	}
	return "unknown"
}

// Layout reads the line's layout from its StackRunConfig schema: a
// storage property makes it StorageBackends, a metadata_store property
// InlineStores.
func (l Line) Layout() Layout {
	props := l.RunConfigFields()
	switch {
	case slices.Contains(props, "storage"):
		return StorageBackends
	case slices.Contains(props, "metadata_store"):
		return InlineStores
	}
	return UnknownLayout
}

// RunConfigFields are the top-level fields of the line's StackRunConfig
// (schemas.json), sorted; nil for a line the registry lacks.
func (l Line) RunConfigFields() []string {
	s := l.Schemas()
	if s == nil {
		return nil
	}
	return slices.Clone(s.runConfigFields)
}

// RegisteredResourceFields are the fields of the line's RegisteredResources
// model (schemas.json: the keys its run config's registered_resources may
// hold), sorted; nil when the schema does not say (every field is then
// written).
func (l Line) RegisteredResourceFields() []string {
	s := l.Schemas()
	if s == nil {
		return nil
	}
	return slices.Clone(s.registeredResourceFields)
}

// HasProviderAPI reports whether the line has providers of an API (from
// facts.json: at 0.2 telemetry is an API with providers, at 0.3 a
// top-level setting the stack serves itself).
func (l Line) HasProviderAPI(api string) bool {
	f := l.Facts()
	if f == nil {
		return false
	}
	_, ok := f.Providers[api]
	return ok
}

// HealthNeedsToken reports whether the line's server, with server.auth
// set, demands a bearer token on its health endpoint (facts.json
// server_api: 0.2's middleware guards every path; 0.3 exempts health).
// An unknown line or endpoint answers true, the safe side.
func (l Line) HealthNeedsToken() bool {
	e, err := l.Endpoint(EndpointHealth)
	return err != nil || e.RequiresAuthentication
}
