package stackconfig

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// V03 is StackRunConfig at llamastack/llama-stack v0.3.0
// (llama_stack/core/datatypes.py, llama_stack/core/storage/datatypes.py).
type V03 struct {
	Version *int64 `json:"version,omitempty"`
	// DistroName names the distribution from 0.7 on (StackConfig), where
	// ImageName is its deprecated alias (ignored when both are set).
	DistroName           *string               `json:"distro_name,omitempty"`
	ImageName            *string               `json:"image_name"`
	ContainerImage       *string               `json:"container_image,omitempty"`
	APIs                 []string              `json:"apis,omitempty"`
	Providers            map[string][]Provider `json:"providers"`
	Storage              *Storage              `json:"storage"`
	RegisteredResources  *RegisteredResources  `json:"registered_resources,omitempty"`
	Logging              *LoggingConfig        `json:"logging,omitempty"`
	Telemetry            *Telemetry            `json:"telemetry,omitempty"`
	Server               *ServerConfig         `json:"server,omitempty"`
	ExternalProvidersDir *string               `json:"external_providers_dir,omitempty"`
	ExternalAPIsDir      *string               `json:"external_apis_dir,omitempty"`
	VectorStores         *VectorStoresConfig   `json:"vector_stores,omitempty"`
	// Safety is 0.7's safety section (SafetyConfig).
	Safety *SafetyConfig `json:"safety,omitempty"`
}

// SafetyConfig is the safety section of 0.7 on: the shield the safety
// router uses when a request names none.
type SafetyConfig struct {
	DefaultShieldID *string `json:"default_shield_id,omitempty"`
}

// Storage is the 0.3 storage section: named backends and the server's
// stores that refer to them.
type Storage struct {
	Backends map[string]map[string]any `json:"backends"`
	Stores   *Stores                   `json:"stores,omitempty"`
}

// Stores are the server's own stores (prompts and connectors from 0.7 on).
type Stores struct {
	Metadata      *KVRef  `json:"metadata,omitempty"`
	Inference     *SQLRef `json:"inference,omitempty"`
	Conversations *SQLRef `json:"conversations,omitempty"`
	Responses     *SQLRef `json:"responses,omitempty"`
	Prompts       *KVRef  `json:"prompts,omitempty"`
	Connectors    *KVRef  `json:"connectors,omitempty"`
}

// KVRef refers to a key-value backend with a namespace.
type KVRef struct {
	Namespace *string `json:"namespace"`
	Backend   *string `json:"backend"`
}

// SQLRef refers to a SQL backend with a table; the inference and
// responses stores also take queue settings.
type SQLRef struct {
	TableName         *string `json:"table_name"`
	Backend           *string `json:"backend"`
	MaxWriteQueueSize *int64  `json:"max_write_queue_size,omitempty"`
	NumWriters        *int64  `json:"num_writers,omitempty"`
}

// RegisteredResources are the resources registered at start-up; the
// semantic rules read only each one's provider_id (the schema judges the
// rest). Upstream's own v0.3.0 run.yaml files still carry an empty
// vector_dbs list, which the model ignores; a non-empty one would be
// dropped by the server without a word, so it is refused.
type RegisteredResources struct {
	Models       []ModelInput `json:"models,omitempty"`
	Shields      []Resource   `json:"shields,omitempty"`
	VectorStores []Resource   `json:"vector_stores,omitempty"`
	VectorDBs    []any        `json:"vector_dbs,omitempty"`
	Datasets     []Resource   `json:"datasets,omitempty"`
	ScoringFns   []Resource   `json:"scoring_fns,omitempty"`
	Benchmarks   []Resource   `json:"benchmarks,omitempty"`
	ToolGroups   []Resource   `json:"tool_groups,omitempty"`
}

// Telemetry is the 0.3 top-level telemetry setting.
type Telemetry struct {
	Enabled *bool `json:"enabled,omitempty"`
}

// VectorStoresConfig sets the defaults of the vector stores.
type VectorStoresConfig struct {
	DefaultProviderID     *string         `json:"default_provider_id,omitempty"`
	DefaultEmbeddingModel *QualifiedModel `json:"default_embedding_model,omitempty"`
	// DefaultRerankerModel is 0.7's default reranker.
	DefaultRerankerModel *QualifiedModel `json:"default_reranker_model,omitempty"`
}

// QualifiedModel names a model of a provider.
type QualifiedModel struct {
	ProviderID *string `json:"provider_id"`
	ModelID    *string `json:"model_id"`
}

var (
	kvBackendTypes  = []string{"kv_redis", "kv_sqlite", "kv_postgres", "kv_mongodb"}
	sqlBackendTypes = []string{"sql_sqlite", "sql_postgres"}
	tableNameRE     = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
)

// name is distro_name, or image_name (its deprecated alias from 0.7 on).
func (c *V03) name() string {
	if c.DistroName != nil {
		return *c.DistroName
	}
	return deref(c.ImageName)
}

// defaults gives a config what StackConfig's defaults give it from 0.7 on
// (the line's facts.json storage_defaults; schemas.json ServerStoresConfig):
// a storage section without backends gets kv_default and sql_default under
// $SQLITE_STORE_DIR or the config folder's distributions/, one without
// stores (or a store key) the store references' defaults. A key set to
// null stays null (the start-up checks refuse that store).
func (c *V03) defaults(line Line, doc map[string]any, env Env, home string) {
	f := line.Facts()
	d := f.StorageDefaults
	if len(d.Backends) == 0 {
		return // storage is required (0.3)
	}
	raw, present := doc["storage"]
	if present && raw == nil {
		return // the schema refuses a null storage
	}
	if c.Storage == nil {
		c.Storage = &Storage{}
	}
	st, _ := raw.(map[string]any)
	if _, ok := st["backends"]; !ok {
		base := configDir(f, env, home) + strings.TrimPrefix(d.BaseDefault, "${"+f.ConfigDir.Env+"}")
		if v, ok := env(d.BaseEnv); ok {
			base = expandHome(v, home)
		}
		c.Storage.Backends = map[string]map[string]any{}
		for name, b := range d.Backends {
			nb := map[string]any{}
			for k, v := range b {
				if s, ok := v.(string); ok {
					v = strings.ReplaceAll(s, "${base}", base)
				}
				nb[k] = v
			}
			c.Storage.Backends[name] = nb
		}
	}
	stores, hasStores := st["stores"].(map[string]any)
	if _, set := st["stores"]; set && !hasStores {
		return // null: the schema says what it takes
	}
	if c.Storage.Stores == nil {
		c.Storage.Stores = &Stores{}
	}
	defaults := line.storeDefaults()
	fill := func(key string, kv **KVRef, sql **SQLRef) {
		if _, set := stores[key]; set || defaults[key] == nil {
			return
		}
		if kv != nil {
			_ = readJSON(defaults[key], kv)
		} else {
			_ = readJSON(defaults[key], sql)
		}
	}
	s := c.Storage.Stores
	fill("metadata", &s.Metadata, nil)
	fill("prompts", &s.Prompts, nil)
	fill("connectors", &s.Connectors, nil)
	fill("inference", nil, &s.Inference)
	fill("conversations", nil, &s.Conversations)
	fill("responses", nil, &s.Responses)
}

// storeDefaults are the defaults of ServerStoresConfig's fields in the
// line's run config schema (nil where a store has none).
func (l Line) storeDefaults() map[string]any {
	s := l.Schemas()
	if s == nil {
		return nil
	}
	var doc struct {
		Defs map[string]struct {
			Properties map[string]struct {
				Default any `json:"default"`
			} `json:"properties"`
		} `json:"$defs"`
	}
	if json.Unmarshal(s.RunConfig.Schema, &doc) != nil {
		return nil
	}
	out := map[string]any{}
	for k, p := range doc.Defs["ServerStoresConfig"].Properties {
		out[k] = p.Default
	}
	return out
}

func (c *V03) check(p *problems, w *writes, schemas *Schemas, facts *Facts) {
	if _, ok := facts.rule("config.version"); ok { // later tags overwrite version with 2
		parseAndMaybeUpgradeConfig(p, c.Version)
	}
	if r, ok := facts.rule("config.distro_name"); ok && c.DistroName == nil && c.ImageName == nil {
		p.add("distro_name", "%s (%s): name the distribution with distro_name", r.Message, r.Source)
	}
	if c.Storage == nil || c.Storage.Backends == nil {
		p.add("storage", "required: 0.3 servers need storage.backends (e.g. kv_default of type kv_sqlite, sql_default of type sql_sqlite) and storage.stores")
		c.Storage = &Storage{}
	}
	for _, name := range sortedKeys(c.Storage.Backends) {
		b := c.Storage.Backends[name]
		at := "storage.backends." + name
		switch typ, _ := b["type"].(string); typ {
		case "kv_sqlite", "sql_sqlite":
			w.file(at+".db_path", b["db_path"])
		case "kv_postgres":
			validateTableName(p, at+".table_name", b["table_name"])
		}
	}
	c.validateServerStores(p)
	checkProviders(p, w, c.Providers, func(at, key string, v any, kind storeKind) {
		c.checkStoreValue(p, w, at, v, kind)
	}, schemas, StorageBackends)
	if r := c.RegisteredResources; r != nil && len(r.VectorDBs) > 0 {
		p.add("registered_resources.vector_dbs", "0.3 ignores vector_dbs: register vector_stores instead")
	}
	if c.Server != nil {
		c.Server.check(p)
	}
}

// validateTableName mirrors PostgresKVStoreConfig.validate_table_name
// (core/storage/datatypes.py at v0.3.0).
func validateTableName(p *problems, at string, v any) {
	if t, ok := v.(string); ok && (!tableNameRE.MatchString(t) || len(t) > 63) {
		p.add(at, "%q is not a PostgreSQL identifier", t)
	}
}

// validateServerStores mirrors StackRunConfig.validate_server_stores
// (core/datatypes.py at v0.3.0): each of storage.stores names a backend of
// storage.backends of the right kind.
func (c *V03) validateServerStores(p *problems) {
	s := c.Storage.Stores
	if s == nil {
		return
	}
	if s.Metadata != nil {
		c.backend(p, "storage.stores.metadata", s.Metadata.Backend, kvBackendTypes, "kv_*")
	}
	if s.Prompts != nil { // 0.7 on
		c.backend(p, "storage.stores.prompts", s.Prompts.Backend, kvBackendTypes, "kv_*")
	}
	for _, r := range []struct {
		name string
		ref  *SQLRef
	}{{"inference", s.Inference}, {"conversations", s.Conversations}, {"responses", s.Responses}} {
		if r.ref != nil {
			c.backend(p, "storage.stores."+r.name, r.ref.Backend, sqlBackendTypes, "sql_*")
		}
	}
}

// start is what the start-up checks read of a 0.3 config.
func (c *V03) start() startView {
	v := startView{apis: c.APIs, providers: c.Providers, externalDir: c.ExternalProvidersDir, imageName: c.name()}
	if c.Storage != nil {
		v.stores = c.Storage.Stores
	}
	if c.VectorStores != nil {
		v.defaultEmbedding, v.defaultReranker = c.VectorStores.DefaultEmbeddingModel, c.VectorStores.DefaultRerankerModel
	}
	if c.Safety != nil {
		v.defaultShield = c.Safety.DefaultShieldID
	}
	if r := c.RegisteredResources; r != nil {
		const at = "registered_resources."
		v.models = r.Models
		for i, m := range r.Models {
			v.resources = append(v.resources, ref(fmt.Sprintf(at+"models[%d]", i), "models", m.ProviderID))
		}
		v.resources = append(v.resources, mapRefs(at+"shields", "shields", r.Shields)...)
		v.resources = append(v.resources, mapRefs(at+"vector_stores", "vector_stores", r.VectorStores)...)
		v.resources = append(v.resources, mapRefs(at+"tool_groups", "tool_groups", r.ToolGroups)...)
		v.resources = append(v.resources, mapRefs(at+"datasets", "datasets", r.Datasets)...)
		v.resources = append(v.resources, mapRefs(at+"scoring_fns", "scoring_functions", r.ScoringFns)...)
		v.resources = append(v.resources, mapRefs(at+"benchmarks", "benchmarks", r.Benchmarks)...)
	}
	return v
}

// backend resolves a reference to a backend of storage.backends, as
// validate_server_stores does for the server's stores and kvstore_impl /
// sqlstore_impl (providers/utils/{kvstore,sqlstore}) do for a provider's,
// when it starts: the name must exist and be of the kind the store needs.
func (c *V03) backend(p *problems, at string, name *string, kinds []string, want string) {
	if name == nil {
		return // the schema requires it
	}
	b, ok := c.Storage.Backends[*name]
	if !ok {
		p.add(at+".backend", "%q is not one of storage.backends (%s)", *name, sortedKeys(c.Storage.Backends))
		return
	}
	if typ, _ := b["type"].(string); !slices.Contains(kinds, typ) {
		p.add(at+".backend", "%q is of type %s, but a backend of type %s is required", *name, typ, want)
	}
}

// checkStoreValue records a path a provider's config makes the server
// write, and resolves a store reference's backend.
func (c *V03) checkStoreValue(p *problems, w *writes, at string, v any, kind storeKind) {
	switch kind {
	case filePath:
		w.file(at, v)
		return
	case dirPath:
		w.dir(at, v)
		return
	}
	m, ok := v.(map[string]any)
	if !ok {
		return // the provider's schema says what it takes
	}
	if _, inline := m["type"]; inline {
		p.add(at, "is an inline store (type %v), the 0.2 layout: 0.3 refers to a backend of storage.backends by name, e.g. {namespace: ..., backend: kv_default}", m["type"])
		return
	}
	backendOf := func(v any) *string {
		if s, ok := v.(map[string]any)["backend"].(string); ok {
			return &s
		}
		return nil
	}
	switch kind {
	case kvRef:
		c.backend(p, at, backendOf(m), kvBackendTypes, "kv_*")
	case sqlRef:
		c.backend(p, at, backendOf(m), sqlBackendTypes, "sql_*")
	}
}
