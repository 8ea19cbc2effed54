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
	Shields              []Resource            `json:"shields,omitempty"`
	VectorDBs            []Resource            `json:"vector_dbs,omitempty"`
	Datasets             []Resource            `json:"datasets,omitempty"`
	ScoringFns           []Resource            `json:"scoring_fns,omitempty"`
	Benchmarks           []Resource            `json:"benchmarks,omitempty"`
	ToolGroups           []Resource            `json:"tool_groups,omitempty"`
	Logging              *LoggingConfig        `json:"logging,omitempty"`
	Server               *ServerConfig         `json:"server,omitempty"`
	ExternalProvidersDir *string               `json:"external_providers_dir,omitempty"`
	ExternalAPIsDir      *string               `json:"external_apis_dir,omitempty"`
}

func (c *V02) check(p *problems, w *writes, schemas *Schemas) {
	parseAndMaybeUpgradeConfig(p, c.Version)
	if c.MetadataStore != nil {
		checkInlineStore(p, w, "metadata_store", c.MetadataStore)
	}
	if c.InferenceStore != nil {
		if sc, ok := c.InferenceStore["sql_store_config"].(map[string]any); ok {
			checkInlineStore(p, w, "inference_store.sql_store_config", sc)
		} else {
			checkInlineStore(p, w, "inference_store", c.InferenceStore)
		}
	}
	checkProviders(p, w, c.Providers, func(at, key string, v any, kind storeKind) {
		checkStoreValue02(p, w, at, v, kind)
	}, schemas, InlineStores)
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
	v.resources = append(v.resources, mapRefs("shields", "shields", c.Shields)...)
	v.resources = append(v.resources, mapRefs("vector_dbs", "vector_dbs", c.VectorDBs)...)
	v.resources = append(v.resources, mapRefs("tool_groups", "tool_groups", c.ToolGroups)...)
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
		if m, ok := v.(map[string]any); ok {
			checkInlineStore(p, w, at, m)
		}
	}
}

// checkInlineStore records the file of a 0.2 inline SQLite store
// (KVStoreConfig, SqlStoreConfig: the schema judges the rest). Its db_path
// is required here although upstream defaults it (to a folder under the
// image's home): the operator must know where the server writes.
func checkInlineStore(p *problems, w *writes, at string, m map[string]any) {
	if _, ok := m["backend"]; ok {
		p.add(at, "refers to a storage backend by name, the 0.3 layout: a 0.2 server needs an inline store (type and db_path, or postgres host and user)")
		return
	}
	if typ, _ := m["type"].(string); typ == "sqlite" {
		if _, ok := m["db_path"].(string); !ok {
			p.add(at+".db_path", "required: the operator keeps the server's files on its state volume, so name the file (e.g. ${env.SQLITE_STORE_DIR}/registry.db)")
		}
		w.file(at+".db_path", m["db_path"])
	}
}
