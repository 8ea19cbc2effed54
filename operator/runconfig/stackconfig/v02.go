package stackconfig

import "fmt"

// V02 is StackRunConfig at llamastack/llama-stack v0.2.23
// (llama_stack/core/datatypes.py).
type V02 struct {
	Version              *int64                `json:"version,omitempty"`
	ImageName            *string               `json:"image_name"`
	ContainerImage       *string               `json:"container_image,omitempty"`
	APIs                 []string              `json:"apis,omitempty"`
	Providers            map[string][]Provider `json:"providers"`
	MetadataStore        map[string]any        `json:"metadata_store,omitempty"`
	InferenceStore       map[string]any        `json:"inference_store,omitempty"`
	Models               []ModelInput          `json:"models,omitempty"`
	Shields              []ShieldInput         `json:"shields,omitempty"`
	VectorDBs            []VectorDBInput       `json:"vector_dbs,omitempty"`
	Datasets             []DatasetInput        `json:"datasets,omitempty"`
	ScoringFns           []ScoringFnInput      `json:"scoring_fns,omitempty"`
	Benchmarks           []BenchmarkInput      `json:"benchmarks,omitempty"`
	ToolGroups           []ToolGroupInput      `json:"tool_groups,omitempty"`
	Logging              *LoggingConfig        `json:"logging,omitempty"`
	Server               *ServerConfig         `json:"server,omitempty"`
	ExternalProvidersDir *string               `json:"external_providers_dir,omitempty"`
	ExternalAPIsDir      *string               `json:"external_apis_dir,omitempty"`
}

// VectorDBInput is a vector database registered at start-up (0.2).
type VectorDBInput struct {
	VectorDBID         *string `json:"vector_db_id"`
	EmbeddingModel     *string `json:"embedding_model"`
	EmbeddingDimension *int64  `json:"embedding_dimension"`
	ProviderID         *string `json:"provider_id,omitempty"`
}

// Stores the v0.2.23 inline providers keep in their config: key, kind.
var storesV02 = map[string][]storeKey{
	"vector_io/inline::faiss":          {{"kvstore", kvConfig, true}},
	"vector_io/inline::sqlite-vec":     {{"db_path", filePath, true}, {"kvstore", kvConfig, true}},
	"vector_io/inline::milvus":         {{"db_path", filePath, true}, {"kvstore", kvConfig, true}},
	"files/inline::localfs":            {{"storage_dir", dirPath, true}, {"metadata_store", sqlConfig, true}},
	"agents/inline::meta-reference":    {{"persistence_store", kvConfig, true}, {"responses_store", sqlConfig, true}},
	"eval/inline::meta-reference":      {{"kvstore", kvConfig, true}},
	"datasetio/inline::localfs":        {{"kvstore", kvConfig, true}},
	"datasetio/remote::huggingface":    {{"kvstore", kvConfig, true}},
	"batches/inline::reference":        {{"kvstore", kvConfig, true}},
	"telemetry/inline::meta-reference": {{"sqlite_db_path", filePath, false}},
}

func (c *V02) check(p *problems, w *writes) {
	checkTop(p, c.Version, c.ImageName, c.Providers)
	if c.MetadataStore != nil {
		checkInlineStore(p, w, "metadata_store", c.MetadataStore, kvConfig)
	}
	if c.InferenceStore != nil {
		if sc, ok := c.InferenceStore["sql_store_config"].(map[string]any); ok {
			checkInlineStore(p, w, "inference_store.sql_store_config", sc, sqlConfig)
		} else {
			checkInlineStore(p, w, "inference_store", c.InferenceStore, sqlConfig)
		}
	}
	checkProviders(p, w, c.Providers, func(at, key string, v any, kind storeKind) {
		checkStoreValue02(p, w, at, v, kind)
	}, storesV02, InlineStores)
	checkModels(p, "models", c.Models)
	checkShields(p, "shields", c.Shields)
	checkToolGroups(p, "tool_groups", c.ToolGroups)
	for i, v := range c.VectorDBs {
		at := fmt.Sprintf("vector_dbs[%d]", i)
		required(p, at+".vector_db_id", v.VectorDBID)
		required(p, at+".embedding_model", v.EmbeddingModel)
		required(p, at+".embedding_dimension", v.EmbeddingDimension)
	}
	checkIDs(p, "datasets", "dataset_id", c.Datasets)
	checkIDs(p, "scoring_fns", "scoring_fn_id", c.ScoringFns)
	checkIDs(p, "benchmarks", "benchmark_id", c.Benchmarks)
	if c.Server != nil {
		c.Server.check(p)
	}
}

// start is what the start-up checks read of a 0.2 config.
func (c *V02) start() startView {
	v := startView{apis: c.APIs, providers: c.Providers, externalDir: c.ExternalProvidersDir, metadataStore: c.MetadataStore != nil}
	if c.ImageName != nil {
		v.imageName = *c.ImageName
	}
	for i, m := range c.Models {
		v.resources = append(v.resources, ref(fmt.Sprintf("models[%d]", i), "models", m.ProviderID))
	}
	for i, s := range c.Shields {
		v.resources = append(v.resources, ref(fmt.Sprintf("shields[%d]", i), "shields", s.ProviderID))
	}
	for i, d := range c.VectorDBs {
		v.resources = append(v.resources, ref(fmt.Sprintf("vector_dbs[%d]", i), "vector_dbs", d.ProviderID))
	}
	for i, g := range c.ToolGroups {
		v.resources = append(v.resources, ref(fmt.Sprintf("tool_groups[%d]", i), "tool_groups", g.ProviderID))
	}
	v.resources = append(v.resources, mapRefs("datasets", "datasets", c.Datasets)...)
	v.resources = append(v.resources, mapRefs("scoring_fns", "scoring_functions", c.ScoringFns)...)
	v.resources = append(v.resources, mapRefs("benchmarks", "benchmarks", c.Benchmarks)...)
	return v
}

func checkStoreValue02(p *problems, w *writes, at string, v any, kind storeKind) {
	switch kind {
	case filePath:
		w.file(at, v)
	case dirPath:
		w.dir(at, v)
	case kvConfig, sqlConfig:
		m, ok := v.(map[string]any)
		if !ok {
			p.add(at, "must be a store mapping with a type")
			return
		}
		checkInlineStore(p, w, at, m, kind)
	}
}

// checkInlineStore checks a 0.2 store config: KVStoreConfig (sqlite,
// redis, postgres, mongodb) or SqlStoreConfig (sqlite, postgres).
func checkInlineStore(p *problems, w *writes, at string, m map[string]any, kind storeKind) {
	if _, ok := m["backend"]; ok {
		p.add(at, "refers to a storage backend by name, the 0.3 layout: a 0.2 server needs an inline store (type and db_path, or postgres host and user)")
		return
	}
	typ, _ := m["type"].(string)
	allowed := map[string][]string{
		"sqlite":   {"type", "db_path", "namespace"},
		"redis":    {"type", "host", "port", "namespace"},
		"postgres": {"type", "host", "port", "db", "user", "password", "ssl_mode", "ca_cert_path", "table_name", "namespace"},
		"mongodb":  {"type", "host", "port", "db", "user", "password", "collection_name", "namespace"},
	}
	if kind == sqlConfig {
		allowed = map[string][]string{
			"sqlite":   {"type", "db_path"},
			"postgres": {"type", "host", "port", "db", "user", "password"},
		}
	}
	keys, ok := allowed[typ]
	if !ok {
		p.add(at+".type", "%q is not a store type of this version (%s)", typ, sortedKeys(allowed))
		return
	}
	checkKeys(p, at, m, keys)
	switch typ {
	case "sqlite":
		if _, ok := m["db_path"].(string); !ok {
			p.add(at+".db_path", "required")
		}
		w.file(at+".db_path", m["db_path"])
	case "postgres":
		if m["user"] == nil {
			p.add(at+".user", "required")
		}
	}
}
