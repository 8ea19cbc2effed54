package runconfig

// runConfig is a Llama Stack run config (version 2) as the pipeline edits
// it, independent of the line: the fields of both layouts. load fills it
// from a line's file layout and marshal writes it back in that layout, so
// a field of the other line never reaches the output.
type runConfig struct {
	Version      int
	ImageName    string
	APIs         []string
	Providers    map[string][]provider
	Models       []model
	Shields      []shield
	VectorDBs    []map[string]any // 0.2 vector_dbs, 0.3 vector_stores
	Datasets     []map[string]any
	ScoringFns   []map[string]any
	Benchmarks   []map[string]any
	ToolGroups   []toolGroup
	Server       server
	ProvidersDir string

	// 0.2 only: the inline stores of the server.
	MetadataStore  map[string]any
	InferenceStore map[string]any

	// 0.3 only: named backends and stores, telemetry, vector store defaults.
	Storage      *storage
	Telemetry    *telemetry
	VectorStores map[string]any
}

// fileV02 is the layout of Llama Stack 0.2 (upstream v0.2.23's
// StackRunConfig); field order is the order of upstream's run.yaml.
type fileV02 struct {
	Version              int                   `yaml:"version"`
	ImageName            string                `yaml:"image_name"`
	APIs                 []string              `yaml:"apis"`
	Providers            map[string][]provider `yaml:"providers"`
	MetadataStore        map[string]any        `yaml:"metadata_store,omitempty"`
	InferenceStore       map[string]any        `yaml:"inference_store,omitempty"`
	Models               []model               `yaml:"models"`
	Shields              []shield              `yaml:"shields"`
	VectorDBs            []map[string]any      `yaml:"vector_dbs"`
	Datasets             []map[string]any      `yaml:"datasets"`
	ScoringFns           []map[string]any      `yaml:"scoring_fns"`
	Benchmarks           []map[string]any      `yaml:"benchmarks"`
	ToolGroups           []toolGroup           `yaml:"tool_groups"`
	Server               server                `yaml:"server"`
	ExternalProvidersDir string                `yaml:"external_providers_dir,omitempty"`
}

// fileV03 is the layout of Llama Stack 0.3 (upstream v0.3.0's
// StackRunConfig).
type fileV03 struct {
	Version              int                   `yaml:"version"`
	ImageName            string                `yaml:"image_name"`
	APIs                 []string              `yaml:"apis"`
	Providers            map[string][]provider `yaml:"providers"`
	Storage              *storage              `yaml:"storage"`
	RegisteredResources  registeredResources   `yaml:"registered_resources"`
	Server               server                `yaml:"server"`
	Telemetry            *telemetry            `yaml:"telemetry,omitempty"`
	VectorStores         map[string]any        `yaml:"vector_stores,omitempty"`
	ExternalProvidersDir string                `yaml:"external_providers_dir,omitempty"`
}

// registeredResources is the 0.3 registered_resources section. Upstream's
// v0.3.0 files still carry an empty vector_dbs list, which the server
// ignores; it is read and never written.
type registeredResources struct {
	Models       []model          `yaml:"models"`
	Shields      []shield         `yaml:"shields"`
	VectorDBs    []map[string]any `yaml:"vector_dbs,omitempty"`
	VectorStores []map[string]any `yaml:"vector_stores"`
	Datasets     []map[string]any `yaml:"datasets"`
	ScoringFns   []map[string]any `yaml:"scoring_fns"`
	Benchmarks   []map[string]any `yaml:"benchmarks"`
	ToolGroups   []toolGroup      `yaml:"tool_groups"`
}

// storage is the 0.3 storage section.
type storage struct {
	Backends map[string]map[string]any `yaml:"backends"`
	Stores   map[string]map[string]any `yaml:"stores"`
}

// telemetry is the 0.3 top-level telemetry setting.
type telemetry struct {
	Enabled bool `yaml:"enabled"`
}

// provider is one provider instance of an API.
type provider struct {
	ProviderID   string         `yaml:"provider_id"`
	ProviderType string         `yaml:"provider_type"`
	Config       map[string]any `yaml:"config,omitempty"`
	Module       string         `yaml:"module,omitempty"`
}

// model is a registered model.
type model struct {
	ModelID         string         `yaml:"model_id"`
	ProviderID      string         `yaml:"provider_id,omitempty"`
	ProviderModelID string         `yaml:"provider_model_id,omitempty"`
	ModelType       string         `yaml:"model_type,omitempty"`
	Metadata        map[string]any `yaml:"metadata"`
}

// shield is a registered shield.
type shield struct {
	ShieldID         string `yaml:"shield_id"`
	ProviderID       string `yaml:"provider_id,omitempty"`
	ProviderShieldID string `yaml:"provider_shield_id,omitempty"`
}

// toolGroup is a registered tool group.
type toolGroup struct {
	ToolGroupID string       `yaml:"toolgroup_id"`
	ProviderID  string       `yaml:"provider_id"`
	MCPEndpoint *mcpEndpoint `yaml:"mcp_endpoint,omitempty"`
}

// mcpEndpoint is the URL of a Model Context Protocol server.
type mcpEndpoint struct {
	URI string `yaml:"uri"`
}

// server is the HTTP server section.
type server struct {
	Port        int32  `yaml:"port"`
	TLSCertFile string `yaml:"tls_certfile,omitempty"`
	TLSKeyFile  string `yaml:"tls_keyfile,omitempty"`
	TLSCAFile   string `yaml:"tls_cafile,omitempty"`
	Auth        *auth  `yaml:"auth,omitempty"`
}

// auth is the server's authentication section.
type auth struct {
	ProviderConfig kubernetesAuth `yaml:"provider_config"`
	AccessPolicy   []accessRule   `yaml:"access_policy,omitempty"`
}

// kubernetesAuth validates bearer tokens against the Kubernetes API server
// with a SelfSubjectReview made with the caller's own token.
type kubernetesAuth struct {
	Type          string            `yaml:"type"`
	APIServerURL  string            `yaml:"api_server_url"`
	VerifyTLS     bool              `yaml:"verify_tls"`
	TLSCAFile     string            `yaml:"tls_cafile"`
	ClaimsMapping map[string]string `yaml:"claims_mapping"`
}

// accessRule is one rule of Llama Stack's access policy.
type accessRule struct {
	Permit      permitScope `yaml:"permit"`
	When        string      `yaml:"when"`
	Description string      `yaml:"description"`
}

// permitScope lists the actions a rule permits.
type permitScope struct {
	Actions []string `yaml:"actions"`
}

func (f fileV02) config() runConfig {
	return runConfig{
		Version: f.Version, ImageName: f.ImageName, APIs: f.APIs, Providers: f.Providers,
		MetadataStore: f.MetadataStore, InferenceStore: f.InferenceStore,
		Models: f.Models, Shields: f.Shields, VectorDBs: f.VectorDBs, Datasets: f.Datasets,
		ScoringFns: f.ScoringFns, Benchmarks: f.Benchmarks, ToolGroups: f.ToolGroups,
		Server: f.Server, ProvidersDir: f.ExternalProvidersDir,
	}
}

func (f fileV03) config() runConfig {
	r := f.RegisteredResources
	return runConfig{
		Version: f.Version, ImageName: f.ImageName, APIs: f.APIs, Providers: f.Providers,
		Storage: f.Storage, Telemetry: f.Telemetry, VectorStores: f.VectorStores,
		Models: r.Models, Shields: r.Shields, VectorDBs: r.VectorStores, Datasets: r.Datasets,
		ScoringFns: r.ScoringFns, Benchmarks: r.Benchmarks, ToolGroups: r.ToolGroups,
		Server: f.Server, ProvidersDir: f.ExternalProvidersDir,
	}
}

func (c runConfig) fileV02() fileV02 {
	return fileV02{
		Version: c.Version, ImageName: c.ImageName, APIs: c.APIs, Providers: c.Providers,
		MetadataStore: c.MetadataStore, InferenceStore: c.InferenceStore,
		Models: c.Models, Shields: c.Shields, VectorDBs: c.VectorDBs, Datasets: c.Datasets,
		ScoringFns: c.ScoringFns, Benchmarks: c.Benchmarks, ToolGroups: c.ToolGroups,
		Server: c.Server, ExternalProvidersDir: c.ProvidersDir,
	}
}

func (c runConfig) fileV03() fileV03 {
	return fileV03{
		Version: c.Version, ImageName: c.ImageName, APIs: c.APIs, Providers: c.Providers,
		Storage: c.Storage, Telemetry: c.Telemetry, VectorStores: c.VectorStores,
		RegisteredResources: registeredResources{
			Models: c.Models, Shields: c.Shields, VectorStores: c.VectorDBs, Datasets: c.Datasets,
			ScoringFns: c.ScoringFns, Benchmarks: c.Benchmarks, ToolGroups: c.ToolGroups,
		},
		Server: c.Server, ExternalProvidersDir: c.ProvidersDir,
	}
}
