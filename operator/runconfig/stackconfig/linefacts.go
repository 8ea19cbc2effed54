package stackconfig

import (
	"slices"
	"strings"
)

// What the operator reads of a line, each from the line's facts.json
// (derived from upstream's source at the line's tag; the fact names its
// file). A line the registry lacks answers the zero value: "" or nil.

// Command is the argv that starts the line's server before the config
// path: `llama stack run`, or `ogx stack run` from 0.8.0
// (cli/stack/run.py's prog).
func (l Line) Command() []string {
	if f := l.Facts(); f != nil {
		return slices.Clone(f.CLI.Command)
	}
	return nil
}

// Program is the console script of Command ("llama", "ogx").
func (l Line) Program() string {
	if f := l.Facts(); f != nil {
		return f.CLI.Program
	}
	return ""
}

// ConfigDirEnv is the environment variable naming the folder the server
// keeps what its config does not place in: LLAMA_STACK_CONFIG_DIR, or
// OGX_CONFIG_DIR from 0.8.0 (core/utils/config_dirs.py).
func (l Line) ConfigDirEnv() string {
	if f := l.Facts(); f != nil {
		return f.ConfigDir.Env
	}
	return ""
}

// ConfigDirDefault is that folder when ConfigDirEnv is unset, in terms of
// ~ (the server's $HOME): ~/.llama, or ~/.ogx from 0.8.0.
func (l Line) ConfigDirDefault() string {
	if f := l.Facts(); f != nil {
		return f.ConfigDir.Default
	}
	return ""
}

// LegacyConfigDir is the older line's config folder the line's server
// moves to ConfigDirDefault at start when ConfigDirEnv is unset (0.8.0:
// ~/.llama, moved to ~/.ogx); "" for a line that moves none. A pod that
// sets ConfigDirEnv is never subject to the move.
func (l Line) LegacyConfigDir() string {
	if f := l.Facts(); f != nil && f.ConfigDir.Legacy != nil {
		return f.ConfigDir.Legacy.Path
	}
	return ""
}

// PortEnv is the environment variable the run command reads its port
// from when --port is not given: LLAMA_STACK_PORT, or OGX_PORT from
// 0.8.0 (cli/stack/run.py).
func (l Line) PortEnv() string {
	if f := l.Facts(); f != nil {
		return f.Launch.Uvicorn.PortEnv
	}
	return ""
}

// DefaultPort is the run command's port when neither --port nor PortEnv
// gives one (the config's server.port is never read).
func (l Line) DefaultPort() int64 {
	if f := l.Facts(); f != nil {
		return f.Launch.Uvicorn.DefaultPort
	}
	return 0
}

// ClientVersionHeader is the request header a client states its version
// in: x-llamastack-client-version, or x-ogx-client-version from 0.8.0
// (core/server/server.py).
func (l Line) ClientVersionHeader() string {
	if f := l.Facts(); f != nil {
		return f.ClientVersionHeader.Name
	}
	return ""
}

// ImageRepository is the repository of upstream's image of a
// distribution on the line (docker.io/llamastack/distribution-starter;
// docker.io/ogx/distribution-starter from 0.8.0), without a tag or
// digest. It does not say upstream publishes that distribution: see
// PublishedDistributions.
func (l Line) ImageRepository(distribution string) string {
	f := l.Facts()
	if f == nil || f.Images.RepositoryPrefix == "" || distribution == "" {
		return ""
	}
	return f.Images.RepositoryPrefix + distribution
}

// PublishedDistributions are the distributions upstream's
// build-distributions workflow builds an image of at the line's tag
// (starter at 0.7.1 and 0.8.0); nil where the tag has no such workflow
// (0.2, 0.3).
func (l Line) PublishedDistributions() []string {
	if f := l.Facts(); f != nil {
		return slices.Clone(f.Images.Distributions)
	}
	return nil
}

// APIs are the APIs the line knows (upstream's Api enum), sorted.
func (l Line) APIs() []string {
	if f := l.Facts(); f != nil {
		return slices.Clone(f.APIs.Values)
	}
	return nil
}

// HasAPI reports whether the line knows an API: agents up to 0.3,
// responses from 0.7; telemetry and post_training up to 0.3; datasetio,
// scoring and eval up to 0.7; messages and interactions from 0.8.
func (l Line) HasAPI(api string) bool {
	f := l.Facts()
	return f != nil && slices.Contains(f.APIs.Values, api)
}

// ResourceTypes are the kinds of the line's registry entries (upstream's
// ResourceType: model, shield, ...; dataset, scoring_function and
// benchmark up to 0.7), sorted.
func (l Line) ResourceTypes() []string {
	if f := l.Facts(); f != nil {
		return slices.Clone(f.ResourceTypes.Values)
	}
	return nil
}

// ResourceList is how the line's server lists the resources of a routing
// table that a later line drops (datasets, scoring_functions, benchmarks up
// to 0.7): its endpoint (a name for Endpoint), the answer's list field and
// each entry's identifier field; false where the line has no such fact.
func (l Line) ResourceList(table string) (ResourceListFact, bool) {
	f := l.Facts()
	if f == nil {
		return ResourceListFact{}, false
	}
	i := slices.IndexFunc(f.ServerAPI.ResourceLists, func(r ResourceListFact) bool { return r.RoutingTable == table })
	if i < 0 {
		return ResourceListFact{}, false
	}
	return f.ServerAPI.ResourceLists[i], true
}

// ServerStore is the line's fact of one of the server's stores: its own
// (registry, prompts, conversations; Facts.ServerStores) or a history
// store (inference, responses; Facts.HistoryStores).
func (l Line) ServerStore(store string) (ServerStoreFact, bool) {
	f := l.Facts()
	if f == nil {
		return ServerStoreFact{}, false
	}
	for _, list := range [][]ServerStoreFact{f.ServerStores, f.HistoryStores} {
		if i := slices.IndexFunc(list, func(s ServerStoreFact) bool { return s.Store == store }); i >= 0 {
			return list[i], true
		}
	}
	return ServerStoreFact{}, false
}

// DefaultTable is the SQL table a store keeps its rows in when its config
// names none: inference is chat_completions up to 0.3 (hard-coded: a
// table_name in the config has no effect) and inference_store from 0.7
// (the default of the honoured table_name); responses is
// openai_responses. "" for a store without a table (kv stores) or one the
// line lacks. TableFromConfig on ServerStore says whether a config's
// table_name is honoured.
func (l Line) DefaultTable(store string) string {
	s, _ := l.ServerStore(store)
	return s.Table
}

// Backend kinds of DefaultPostgresDatabase.
const (
	// KVBackend is a key-value backend (kv_postgres).
	KVBackend = "kv"
	// SQLBackend is a SQL backend (sql_postgres).
	SQLBackend = "sql"
)

// DefaultPostgresDatabase is the database a PostgreSQL backend of that
// kind (KVBackend, SQLBackend) uses when its config names none:
// llamastack up to 0.7, ogx from 0.8.0. "" for another kind.
func (l Line) DefaultPostgresDatabase(kind string) string {
	f := l.Facts()
	if f == nil {
		return ""
	}
	switch kind {
	case KVBackend:
		return f.PostgresDefaults.KV.DB
	case SQLBackend:
		return f.PostgresDefaults.SQL.DB
	}
	return ""
}

// DefaultPostgresKVTable is the table a kv_postgres backend keeps its keys
// in when its config names none: llamastack_kvstore up to 0.7,
// ogx_kvstore from 0.8.0.
func (l Line) DefaultPostgresKVTable() string {
	if f := l.Facts(); f != nil {
		return f.PostgresDefaults.KV.TableName
	}
	return ""
}

// PackageName is upstream's Python package at the line's tag
// (llama_stack; ogx from 0.8.0): module paths such as the app factory's
// start with it.
func (l Line) PackageName() string {
	if f := l.Facts(); f != nil {
		return f.Package.Name
	}
	return ""
}

// Product is what upstream calls itself at the line's tag, for messages:
// "Llama Stack", or "OGX" from 0.8.0 (its package was renamed ogx).
func (l Line) Product() string {
	if strings.HasPrefix(l.PackageName(), "ogx") {
		return "OGX"
	}
	return "Llama Stack"
}
