package runconfig

// runConfig is the part of Llama Stack's run-config (version 2) the operator
// writes. Field order is the order of the YAML output.
type runConfig struct {
	Version        int                   `yaml:"version"`
	ImageName      string                `yaml:"image_name"`
	APIs           []string              `yaml:"apis"`
	Providers      map[string][]provider `yaml:"providers"`
	MetadataStore  map[string]any        `yaml:"metadata_store,omitempty"`
	InferenceStore map[string]any        `yaml:"inference_store,omitempty"`
	Models         []model               `yaml:"models"`
	Shields        []shield              `yaml:"shields"`
	VectorDBs      []map[string]any      `yaml:"vector_dbs"`
	Datasets       []map[string]any      `yaml:"datasets"`
	ScoringFns     []map[string]any      `yaml:"scoring_fns"`
	Benchmarks     []map[string]any      `yaml:"benchmarks"`
	ToolGroups     []toolGroup           `yaml:"tool_groups"`
	Server         server                `yaml:"server"`
}

// provider is one provider instance of an API.
type provider struct {
	ProviderID   string         `yaml:"provider_id"`
	ProviderType string         `yaml:"provider_type"`
	Config       map[string]any `yaml:"config,omitempty"`
}

// model is a registered model.
type model struct {
	ModelID         string         `yaml:"model_id"`
	ProviderID      string         `yaml:"provider_id"`
	ProviderModelID string         `yaml:"provider_model_id,omitempty"`
	ModelType       string         `yaml:"model_type"`
	Metadata        map[string]any `yaml:"metadata"`
}

// shield is a registered shield.
type shield struct {
	ShieldID         string `yaml:"shield_id"`
	ProviderID       string `yaml:"provider_id"`
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

// kubernetesAuth validates bearer tokens against the Kubernetes API server.
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
