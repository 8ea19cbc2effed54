package stackconfig

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
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

// Resource is a resource registered at start-up other than a model
// (shield, vector store, tool group, dataset, ...): the semantic rules
// read only its provider_id; the schema judges the rest.
type Resource map[string]any

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
	*p = append(*p, &Problem{At: at, Message: fmt.Sprintf(format, args...)})
}

// Problem is one thing a semantic rule refuses, at a run-config path
// (providers.inference[0].config.persistence.backend), so that a caller
// that wrote the value can name its own field instead.
type Problem struct {
	At, Message string
}

func (e *Problem) Error() string { return e.At + ": " + e.Message }

func (p problems) err() error { return errors.Join(p...) }

// The semantic rules below are those upstream applies in code, beyond what
// its models' JSON Schemas say (schemas.json judges every key, type,
// enum, bound and required field: checkProviderConfigs). Each is named
// after the upstream function it mirrors, with its file at v0.2.23 and
// v0.3.0.

// parseAndMaybeUpgradeConfig mirrors parse_and_maybe_upgrade_config
// (core/configure.py): a config of another version than 2 goes through
// upstream's upgrade of pre-2 files, which the operator never writes, so
// it is refused.
func parseAndMaybeUpgradeConfig(p *problems, version *int64) {
	if version != nil && *version != 2 {
		p.add("version", "%d is not 2", *version)
	}
}

// tlsFilesTogether mirrors how `llama stack run` hands the TLS files to
// uvicorn (cli/stack/run.py at v0.3.0, core/server/server.py main at
// v0.2.23): keyfile and certfile are read as a pair; one alone serves
// plain HTTP without a word, so it is refused.
func (s ServerConfig) tlsFilesTogether(p *problems) {
	if (s.TLSCertFile == nil) != (s.TLSKeyFile == nil) {
		p.add("server", "tls_certfile and tls_keyfile go together")
	}
}

func (s ServerConfig) check(p *problems) {
	s.tlsFilesTogether(p)
	if s.Auth == nil {
		return
	}
	if typ, _ := s.Auth.ProviderConfig["type"].(string); typ == "kubernetes" {
		var k KubernetesAuth
		if err := strictJSON(s.Auth.ProviderConfig, &k); err == nil {
			k.validateAPIServerURL(p)
			k.validateClaimsMapping(p)
		}
	}
	for i, r := range s.Auth.AccessPolicy {
		r.validateRuleFormat(p, fmt.Sprintf("server.auth.access_policy[%d]", i))
	}
}

const kubernetesAuthAt = "server.auth.provider_config"

// validateAPIServerURL mirrors KubernetesAuthProviderConfig's
// validate_api_server_url (core/datatypes.py).
func (k KubernetesAuth) validateAPIServerURL(p *problems) {
	if k.APIServerURL == nil {
		return
	}
	u, err := url.Parse(*k.APIServerURL)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		p.add(kubernetesAuthAt+".api_server_url", "%q must be an http or https URL with a host", *k.APIServerURL)
	}
}

// validateClaimsMapping mirrors validate_claims_mapping (core/datatypes.py).
func (k KubernetesAuth) validateClaimsMapping(p *problems) {
	for _, key := range sortedKeys(k.ClaimsMapping) {
		if k.ClaimsMapping[key] == "" {
			p.add(kubernetesAuthAt+".claims_mapping."+key, "cannot be empty")
		}
	}
}

// validateRuleFormat mirrors AccessRule.validate_rule_format
// (core/access_control/datatypes.py): exactly one of permit and forbid, at
// most one of when and unless.
func (r AccessRule) validateRuleFormat(p *problems, at string) {
	if (r.Permit == nil) == (r.Forbid == nil) {
		p.add(at, "needs exactly one of permit or forbid")
	}
	if r.When != nil && r.Unless != nil {
		p.add(at, "when and unless are mutually exclusive")
	}
}

// readJSON decodes a decoded YAML value into the view the semantic rules
// read (V02, V03): keys the view lacks are the schema's to judge
// (checkProviderConfigs, strict), not the view's.
func readJSON(v any, out any) error { return decodeJSON(v, out, false) }

// strictJSON decodes a decoded YAML value into a typed model, refusing
// keys the model does not know.
func strictJSON(v any, out any) error { return decodeJSON(v, out, true) }

func decodeJSON(v any, out any, strict bool) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytesReader(data))
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(out); err != nil {
		return cleanJSONError(err)
	}
	return nil
}
