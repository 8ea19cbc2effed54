package stackconfig

import (
	"fmt"
	"regexp"
	"slices"
)

// V03 is StackRunConfig at llamastack/llama-stack v0.3.0
// (llama_stack/core/datatypes.py, llama_stack/core/storage/datatypes.py).
type V03 struct {
	Version              *int64                `json:"version,omitempty"`
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
}

// Storage is the 0.3 storage section: named backends and the server's
// stores that refer to them.
type Storage struct {
	Backends map[string]map[string]any `json:"backends"`
	Stores   *Stores                   `json:"stores,omitempty"`
}

// Stores are the server's own stores.
type Stores struct {
	Metadata      *KVRef  `json:"metadata,omitempty"`
	Inference     *SQLRef `json:"inference,omitempty"`
	Conversations *SQLRef `json:"conversations,omitempty"`
	Responses     *SQLRef `json:"responses,omitempty"`
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

// RegisteredResources are the resources registered at start-up.
// Upstream's own v0.3.0 run.yaml files still carry an empty vector_dbs
// list, which the model ignores; a non-empty one would be dropped by the
// server without a word, so it is refused.
type RegisteredResources struct {
	Models       []ModelInput       `json:"models,omitempty"`
	Shields      []ShieldInput      `json:"shields,omitempty"`
	VectorStores []VectorStoreInput `json:"vector_stores,omitempty"`
	VectorDBs    []any              `json:"vector_dbs,omitempty"`
	Datasets     []DatasetInput     `json:"datasets,omitempty"`
	ScoringFns   []ScoringFnInput   `json:"scoring_fns,omitempty"`
	Benchmarks   []BenchmarkInput   `json:"benchmarks,omitempty"`
	ToolGroups   []ToolGroupInput   `json:"tool_groups,omitempty"`
}

// VectorStoreInput is a vector store registered at start-up (0.3).
type VectorStoreInput struct {
	VectorStoreID      *string `json:"vector_store_id"`
	EmbeddingModel     *string `json:"embedding_model"`
	EmbeddingDimension *int64  `json:"embedding_dimension"`
	ProviderID         *string `json:"provider_id,omitempty"`
}

// Telemetry is the 0.3 top-level telemetry setting.
type Telemetry struct {
	Enabled *bool `json:"enabled,omitempty"`
}

// VectorStoresConfig sets the defaults of the vector stores.
type VectorStoresConfig struct {
	DefaultProviderID     *string         `json:"default_provider_id,omitempty"`
	DefaultEmbeddingModel *QualifiedModel `json:"default_embedding_model,omitempty"`
}

// QualifiedModel names a model of a provider.
type QualifiedModel struct {
	ProviderID *string `json:"provider_id"`
	ModelID    *string `json:"model_id"`
}

// Stores the v0.3.0 inline providers keep in their config: key, kind.
var storesV03 = map[string][]storeKey{
	"vector_io/inline::faiss":       {{"persistence", kvRef, true}},
	"vector_io/inline::sqlite-vec":  {{"db_path", filePath, true}, {"persistence", kvRef, true}},
	"vector_io/inline::milvus":      {{"db_path", filePath, true}, {"persistence", kvRef, true}},
	"vector_io/remote::chromadb":    {{"persistence", kvRef, true}},
	"vector_io/remote::qdrant":      {{"persistence", kvRef, true}},
	"vector_io/remote::milvus":      {{"persistence", kvRef, true}},
	"vector_io/remote::pgvector":    {{"persistence", kvRef, false}},
	"vector_io/remote::weaviate":    {{"persistence", kvRef, false}},
	"files/inline::localfs":         {{"storage_dir", dirPath, true}, {"metadata_store", sqlRef, true}},
	"agents/inline::meta-reference": {{"persistence", agentsPersistence, true}},
	"eval/inline::meta-reference":   {{"kvstore", kvRef, true}},
	"datasetio/inline::localfs":     {{"kvstore", kvRef, true}},
	"datasetio/remote::huggingface": {{"kvstore", kvRef, true}},
	"batches/inline::reference":     {{"kvstore", kvRef, true}},
}

var (
	kvBackendTypes  = []string{"kv_redis", "kv_sqlite", "kv_postgres", "kv_mongodb"}
	sqlBackendTypes = []string{"sql_sqlite", "sql_postgres"}
	backendKeys     = map[string][]string{
		"kv_redis":     {"type", "namespace", "host", "port"},
		"kv_sqlite":    {"type", "namespace", "db_path"},
		"kv_postgres":  {"type", "namespace", "host", "port", "db", "user", "password", "ssl_mode", "ca_cert_path", "table_name"},
		"kv_mongodb":   {"type", "namespace", "host", "port", "db", "user", "password", "collection_name"},
		"sql_sqlite":   {"type", "db_path"},
		"sql_postgres": {"type", "host", "port", "db", "user", "password"},
	}
	tableNameRE = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
)

func (c *V03) check(p *problems, w *writes) {
	checkTop(p, c.Version, c.ImageName, c.Providers)
	if c.Storage == nil || c.Storage.Backends == nil {
		p.add("storage", "required: 0.3 servers need storage.backends (e.g. kv_default of type kv_sqlite, sql_default of type sql_sqlite) and storage.stores")
		c.Storage = &Storage{}
	}
	for _, name := range sortedKeys(c.Storage.Backends) {
		b := c.Storage.Backends[name]
		at := "storage.backends." + name
		typ, _ := b["type"].(string)
		keys, ok := backendKeys[typ]
		if !ok {
			p.add(at+".type", "%q is not one of %s", typ, sortedKeys(backendKeys))
			continue
		}
		checkKeys(p, at, b, keys)
		switch typ {
		case "kv_sqlite", "sql_sqlite":
			if _, ok := b["db_path"].(string); !ok {
				p.add(at+".db_path", "required")
			}
			w.file(at+".db_path", b["db_path"])
		case "kv_postgres", "sql_postgres":
			if b["user"] == nil {
				p.add(at+".user", "required")
			}
			if t, ok := b["table_name"].(string); ok && (!tableNameRE.MatchString(t) || len(t) > 63) {
				p.add(at+".table_name", "%q is not a PostgreSQL identifier", t)
			}
		}
	}
	if s := c.Storage.Stores; s != nil {
		c.checkKV(p, "storage.stores.metadata", s.Metadata)
		c.checkSQL(p, "storage.stores.inference", s.Inference)
		c.checkSQL(p, "storage.stores.conversations", s.Conversations)
		c.checkSQL(p, "storage.stores.responses", s.Responses)
	}
	checkProviders(p, w, c.Providers, func(at, key string, v any, kind storeKind) {
		c.checkStoreValue(p, w, at, v, kind)
	}, storesV03, StorageBackends)
	if r := c.RegisteredResources; r != nil {
		checkModels(p, "registered_resources.models", r.Models)
		checkShields(p, "registered_resources.shields", r.Shields)
		checkToolGroups(p, "registered_resources.tool_groups", r.ToolGroups)
		for i, v := range r.VectorStores {
			at := fmt.Sprintf("registered_resources.vector_stores[%d]", i)
			required(p, at+".vector_store_id", v.VectorStoreID)
			required(p, at+".embedding_model", v.EmbeddingModel)
			required(p, at+".embedding_dimension", v.EmbeddingDimension)
		}
		if len(r.VectorDBs) > 0 {
			p.add("registered_resources.vector_dbs", "0.3 ignores vector_dbs: register vector_stores instead")
		}
		checkIDs(p, "registered_resources.datasets", "dataset_id", r.Datasets)
		checkIDs(p, "registered_resources.scoring_fns", "scoring_fn_id", r.ScoringFns)
		checkIDs(p, "registered_resources.benchmarks", "benchmark_id", r.Benchmarks)
	}
	if v := c.VectorStores; v != nil && v.DefaultEmbeddingModel != nil {
		required(p, "vector_stores.default_embedding_model.provider_id", v.DefaultEmbeddingModel.ProviderID)
		required(p, "vector_stores.default_embedding_model.model_id", v.DefaultEmbeddingModel.ModelID)
	}
	if c.Server != nil {
		c.Server.check(p)
	}
}

// start is what the start-up checks read of a 0.3 config.
func (c *V03) start() startView {
	v := startView{apis: c.APIs, providers: c.Providers, externalDir: c.ExternalProvidersDir}
	if c.ImageName != nil {
		v.imageName = *c.ImageName
	}
	if c.Storage != nil {
		v.stores = c.Storage.Stores
	}
	if c.VectorStores != nil {
		v.defaultEmbedding = c.VectorStores.DefaultEmbeddingModel
	}
	if r := c.RegisteredResources; r != nil {
		const at = "registered_resources."
		v.models = r.Models
		for i, m := range r.Models {
			v.resources = append(v.resources, ref(fmt.Sprintf(at+"models[%d]", i), "models", m.ProviderID))
		}
		for i, s := range r.Shields {
			v.resources = append(v.resources, ref(fmt.Sprintf(at+"shields[%d]", i), "shields", s.ProviderID))
		}
		for i, s := range r.VectorStores {
			v.resources = append(v.resources, ref(fmt.Sprintf(at+"vector_stores[%d]", i), "vector_stores", s.ProviderID))
		}
		for i, g := range r.ToolGroups {
			v.resources = append(v.resources, ref(fmt.Sprintf(at+"tool_groups[%d]", i), "tool_groups", g.ProviderID))
		}
		v.resources = append(v.resources, mapRefs(at+"datasets", "datasets", r.Datasets)...)
		v.resources = append(v.resources, mapRefs(at+"scoring_fns", "scoring_functions", r.ScoringFns)...)
		v.resources = append(v.resources, mapRefs(at+"benchmarks", "benchmarks", r.Benchmarks)...)
	}
	return v
}

func (c *V03) backend(p *problems, at string, name *string, kinds []string, want string) {
	if name == nil {
		p.add(at+".backend", "required")
		return
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

func (c *V03) checkKV(p *problems, at string, r *KVRef) {
	if r == nil {
		return
	}
	required(p, at+".namespace", r.Namespace)
	c.backend(p, at, r.Backend, kvBackendTypes, "kv_*")
}

func (c *V03) checkSQL(p *problems, at string, r *SQLRef) {
	if r == nil {
		return
	}
	required(p, at+".table_name", r.TableName)
	c.backend(p, at, r.Backend, sqlBackendTypes, "sql_*")
}

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
		p.add(at, "must be a mapping")
		return
	}
	if _, inline := m["type"]; inline {
		p.add(at, "is an inline store (type %v), the 0.2 layout: 0.3 refers to a backend of storage.backends by name, e.g. {namespace: ..., backend: kv_default}", m["type"])
		return
	}
	switch kind {
	case kvRef:
		var r KVRef
		if err := strictJSON(m, &r); err != nil {
			p.add(at, "%v", err)
			return
		}
		c.checkKV(p, at, &r)
	case sqlRef:
		var r SQLRef
		if err := strictJSON(m, &r); err != nil {
			p.add(at, "%v", err)
			return
		}
		c.checkSQL(p, at, &r)
	case agentsPersistence:
		var r struct {
			AgentState *KVRef  `json:"agent_state"`
			Responses  *SQLRef `json:"responses"`
		}
		if err := strictJSON(m, &r); err != nil {
			p.add(at, "%v", err)
			return
		}
		required(p, at+".agent_state", r.AgentState)
		required(p, at+".responses", r.Responses)
		c.checkKV(p, at+".agent_state", r.AgentState)
		c.checkSQL(p, at+".responses", r.Responses)
	}
}
