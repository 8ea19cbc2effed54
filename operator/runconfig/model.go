package runconfig

import (
	"maps"
	"slices"
)

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
	// Extra are the base's top-level keys the pipeline does not edit
	// (0.7's safety, connectors), in the base's order.
	Extra []extraKey
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

// clone is a deep copy of c: no map, slice or pointer of it is shared with
// c, but the yaml.Nodes of Extra, which the pipeline never edits.
func (c runConfig) clone() runConfig {
	out := c
	out.APIs = slices.Clone(c.APIs)
	if c.Providers != nil {
		out.Providers = make(map[string][]provider, len(c.Providers))
		for api, ps := range c.Providers {
			out.Providers[api] = cloneEach(ps, func(p provider) provider {
				p.Config = cloneMap(p.Config)
				return p
			})
		}
	}
	out.Models = cloneEach(c.Models, func(m model) model {
		m.Metadata = cloneMap(m.Metadata)
		return m
	})
	out.Shields = slices.Clone(c.Shields)
	out.VectorDBs = cloneEach(c.VectorDBs, cloneMap)
	out.Datasets = cloneEach(c.Datasets, cloneMap)
	out.ScoringFns = cloneEach(c.ScoringFns, cloneMap)
	out.Benchmarks = cloneEach(c.Benchmarks, cloneMap)
	out.ToolGroups = cloneEach(c.ToolGroups, func(g toolGroup) toolGroup {
		if g.MCPEndpoint != nil {
			e := *g.MCPEndpoint
			g.MCPEndpoint = &e
		}
		return g
	})
	if a := c.Server.Auth; a != nil {
		cp := *a
		cp.ProviderConfig.ClaimsMapping = maps.Clone(a.ProviderConfig.ClaimsMapping)
		cp.AccessPolicy = cloneEach(a.AccessPolicy, func(r accessRule) accessRule {
			r.Permit.Actions = slices.Clone(r.Permit.Actions)
			return r
		})
		out.Server.Auth = &cp
	}
	out.MetadataStore = cloneMap(c.MetadataStore)
	out.InferenceStore = cloneMap(c.InferenceStore)
	if c.Storage != nil {
		out.Storage = &storage{Backends: cloneMaps(c.Storage.Backends), Stores: cloneMaps(c.Storage.Stores)}
	}
	if c.Telemetry != nil {
		t := *c.Telemetry
		out.Telemetry = &t
	}
	out.VectorStores = cloneMap(c.VectorStores)
	out.Extra = slices.Clone(c.Extra)
	return out
}

// cloneEach copies s, each element through cp.
func cloneEach[T any](s []T, cp func(T) T) []T {
	if s == nil {
		return nil
	}
	out := make([]T, len(s))
	for i, v := range s {
		out[i] = cp(v)
	}
	return out
}

// cloneMaps deep-copies a map of decoded YAML mappings.
func cloneMaps(m map[string]map[string]any) map[string]map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]map[string]any, len(m))
	for k, v := range m {
		out[k] = cloneMap(v)
	}
	return out
}

// cloneMap deep-copies a decoded YAML mapping.
func cloneMap(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = cloneValue(v)
	}
	return out
}

// cloneValue deep-copies a decoded YAML value: mappings and sequences are
// copied, scalars are values.
func cloneValue(v any) any {
	switch v := v.(type) {
	case map[string]any:
		return cloneMap(v)
	case []any:
		return cloneEach(v, cloneValue)
	}
	return v
}
