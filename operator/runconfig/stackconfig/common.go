package stackconfig

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
)

// Provider is one provider instance of an API (identical at both tags).
// A nil or empty ProviderID means the provider is switched off, as a
// conditional id such as ${env.VLLM_URL:+vllm} gives when the variable is
// unset.
type Provider struct {
	ProviderID   *string        `json:"provider_id"`
	ProviderType *string        `json:"provider_type"`
	Config       map[string]any `json:"config,omitempty"`
	Module       *string        `json:"module,omitempty"`
}

// ID is the provider's id, "" when switched off.
func (p Provider) ID() string {
	if p.ProviderID == nil {
		return ""
	}
	return *p.ProviderID
}

// Type is the provider type, e.g. remote::vllm.
func (p Provider) Type() string {
	if p.ProviderType == nil {
		return ""
	}
	return *p.ProviderType
}

// ModelInput is a model registered at start-up.
type ModelInput struct {
	ModelID         *string        `json:"model_id"`
	ProviderID      *string        `json:"provider_id,omitempty"`
	ProviderModelID *string        `json:"provider_model_id,omitempty"`
	ModelType       *string        `json:"model_type,omitempty"`
	Metadata        map[string]any `json:"metadata,omitempty"`
}

// ShieldInput is a shield registered at start-up.
type ShieldInput struct {
	ShieldID         *string        `json:"shield_id"`
	ProviderID       *string        `json:"provider_id,omitempty"`
	ProviderShieldID *string        `json:"provider_shield_id,omitempty"`
	Params           map[string]any `json:"params,omitempty"`
}

// ToolGroupInput is a tool group registered at start-up.
type ToolGroupInput struct {
	ToolGroupID *string        `json:"toolgroup_id"`
	ProviderID  *string        `json:"provider_id"`
	Args        map[string]any `json:"args,omitempty"`
	MCPEndpoint *URL           `json:"mcp_endpoint,omitempty"`
}

// URL is upstream's URL model.
type URL struct {
	URI *string `json:"uri"`
}

// DatasetInput, ScoringFnInput and BenchmarkInput are kept as mappings:
// the operator only ever copies them from upstream's run.yaml, and their
// required id is checked.
type (
	DatasetInput   map[string]any
	ScoringFnInput map[string]any
	BenchmarkInput map[string]any
)

// LoggingConfig sets log levels per category.
type LoggingConfig struct {
	CategoryLevels map[string]string `json:"category_levels,omitempty"`
}

// ServerConfig is the HTTP(S) server section (identical at both tags).
type ServerConfig struct {
	Port        *int64      `json:"port,omitempty"`
	TLSCertFile *string     `json:"tls_certfile,omitempty"`
	TLSKeyFile  *string     `json:"tls_keyfile,omitempty"`
	TLSCAFile   *string     `json:"tls_cafile,omitempty"`
	Auth        *AuthConfig `json:"auth,omitempty"`
	Host        *string     `json:"host,omitempty"`
	Quota       any         `json:"quota,omitempty"`
	CORS        any         `json:"cors,omitempty"`
}

// AuthConfig is server.auth.
type AuthConfig struct {
	ProviderConfig map[string]any `json:"provider_config"`
	AccessPolicy   []AccessRule   `json:"access_policy,omitempty"`
}

// KubernetesAuth is the kubernetes provider_config of server.auth. The
// server checks a caller's token by sending a SelfSubjectReview to
// APIServerURL with that token (auth_providers.py at both tags), so the
// server's own ServiceAccount needs no permission for it.
type KubernetesAuth struct {
	Type          string            `json:"type"`
	APIServerURL  *string           `json:"api_server_url,omitempty"`
	VerifyTLS     *bool             `json:"verify_tls,omitempty"`
	TLSCAFile     *string           `json:"tls_cafile,omitempty"`
	ClaimsMapping map[string]string `json:"claims_mapping,omitempty"`
}

// AccessRule is one rule of server.auth.access_policy.
type AccessRule struct {
	Permit      *Scope  `json:"permit,omitempty"`
	Forbid      *Scope  `json:"forbid,omitempty"`
	When        any     `json:"when,omitempty"`
	Unless      any     `json:"unless,omitempty"`
	Description *string `json:"description,omitempty"`
}

// Scope is what an access rule permits or forbids.
type Scope struct {
	Principal *string `json:"principal,omitempty"`
	Actions   any     `json:"actions"`
	Resource  *string `json:"resource,omitempty"`
}

// problems collects every violation with its path.
type problems []error

func (p *problems) add(at, format string, args ...any) {
	*p = append(*p, fmt.Errorf("%s: %s", at, fmt.Sprintf(format, args...)))
}

func (p problems) err() error { return errors.Join(p...) }

func required[T any](p *problems, at string, v *T) {
	if v == nil {
		p.add(at, "required")
	}
}

// checkTop checks what both lines' StackRunConfig require at the top:
// version 2 (the run-config version of both tags), an image_name and the
// providers mapping.
func checkTop(p *problems, version *int64, imageName *string, providers map[string][]Provider) {
	if version != nil && *version != 2 {
		p.add("version", "%d is not 2", *version)
	}
	required(p, "image_name", imageName)
	if providers == nil {
		p.add("providers", "required")
	}
}

func (s ServerConfig) check(p *problems) {
	if s.Port != nil && (*s.Port < 1024 || *s.Port > 65535) {
		p.add("server.port", "%d is outside 1024-65535", *s.Port)
	}
	if (s.TLSCertFile == nil) != (s.TLSKeyFile == nil) {
		p.add("server", "tls_certfile and tls_keyfile go together")
	}
	if s.Auth != nil {
		s.Auth.check(p)
	}
	if s.CORS != nil {
		switch s.CORS.(type) {
		case bool, map[string]any:
		default:
			p.add("server.cors", "must be a boolean or a mapping")
		}
	}
}

var authTypes = []string{"oauth2_token", "github_token", "custom", "kubernetes"}

func (a AuthConfig) check(p *problems) {
	at := "server.auth.provider_config"
	typ, _ := a.ProviderConfig["type"].(string)
	if !slices.Contains(authTypes, typ) {
		p.add(at+".type", "%q is not one of %v", typ, authTypes)
		return
	}
	if typ == "kubernetes" {
		var k KubernetesAuth
		if err := strictJSON(a.ProviderConfig, &k); err != nil {
			p.add(at, "%v", err)
			return
		}
		if k.APIServerURL != nil {
			u, err := url.Parse(*k.APIServerURL)
			if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
				p.add(at+".api_server_url", "%q must be an http or https URL with a host", *k.APIServerURL)
			}
		}
		for key, v := range k.ClaimsMapping {
			if v == "" {
				p.add(at+".claims_mapping."+key, "cannot be empty")
			}
		}
	}
	for i, r := range a.AccessPolicy {
		r.check(p, fmt.Sprintf("server.auth.access_policy[%d]", i))
	}
}

var actions = []string{"create", "read", "update", "delete"}

func (r AccessRule) check(p *problems, at string) {
	if (r.Permit == nil) == (r.Forbid == nil) {
		p.add(at, "needs exactly one of permit or forbid")
	}
	if r.When != nil && r.Unless != nil {
		p.add(at, "when and unless are mutually exclusive")
	}
	for _, s := range []*Scope{r.Permit, r.Forbid} {
		if s == nil {
			continue
		}
		var list []any
		switch a := s.Actions.(type) {
		case string:
			list = []any{a}
		case []any:
			list = a
		default:
			p.add(at, "actions must be an action or a list of actions")
		}
		for _, a := range list {
			if s, ok := a.(string); !ok || !slices.Contains(actions, s) {
				p.add(at+".actions", "%v is not one of %v", a, actions)
			}
		}
	}
}

func checkModels(p *problems, at string, models []ModelInput) {
	for i, m := range models {
		here := fmt.Sprintf("%s[%d]", at, i)
		required(p, here+".model_id", m.ModelID)
		if m.ModelType != nil && *m.ModelType != "llm" && *m.ModelType != "embedding" {
			p.add(here+".model_type", "%q is not llm or embedding", *m.ModelType)
		}
	}
}

func checkShields(p *problems, at string, shields []ShieldInput) {
	for i, s := range shields {
		required(p, fmt.Sprintf("%s[%d].shield_id", at, i), s.ShieldID)
	}
}

func checkToolGroups(p *problems, at string, groups []ToolGroupInput) {
	for i, g := range groups {
		here := fmt.Sprintf("%s[%d]", at, i)
		required(p, here+".toolgroup_id", g.ToolGroupID)
		required(p, here+".provider_id", g.ProviderID)
		if g.MCPEndpoint != nil {
			required(p, here+".mcp_endpoint.uri", g.MCPEndpoint.URI)
		}
	}
}

func checkIDs[T ~map[string]any](p *problems, at, key string, list []T) {
	for i, m := range list {
		if s, ok := m[key].(string); !ok || s == "" {
			p.add(fmt.Sprintf("%s[%d].%s", at, i, key), "required")
		}
	}
}

// strictJSON decodes a decoded YAML value into a typed model, refusing
// keys the model does not know.
func strictJSON(v any, out any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytesReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		return cleanJSONError(err)
	}
	return nil
}
