package stackconfig

import (
	"fmt"
	"slices"
)

// ServerAPIFacts are the endpoints of a running server the operator reads
// for its live status, as upstream's source at the tag defines them
// (facts.json "server_api"): the operator's client and the test stand-in
// both follow them.
type ServerAPIFacts struct {
	// Endpoints are the routes, by name (health, version, list_providers).
	Endpoints []EndpointFact `json:"endpoints"`
	// Models are the response models' JSON fields (name: upstream's type).
	Models map[string]ModelFact `json:"models"`
	// Health is what a provider's health says.
	Health HealthFact `json:"health"`
	// ResourceLists are, for each routing table a later line drops, the
	// endpoint listing its resources and how its answer names each.
	ResourceLists []ResourceListFact `json:"resource_lists"`
}

// ResourceListFact is how a routing table's list endpoint names what the
// server's registry holds of it: the answer's ListField is a list of
// Item, each named by IdentifierField; the registry keeps them as
// RegistryType (upstream's ResourceType, the item's type default).
type ResourceListFact struct {
	RoutingTable    string `json:"routing_table"`
	Endpoint        string `json:"endpoint"`
	ListField       string `json:"list_field"`
	Item            string `json:"item"`
	IdentifierField string `json:"identifier_field"`
	RegistryType    string `json:"registry_type"`
	Source          string `json:"source"`
}

// EndpointFact is one @webmethod route of the server at API level v1.
type EndpointFact struct {
	Name   string `json:"name"`
	Method string `json:"method"`
	// Path is the URL path the server serves it on (/v1/...).
	Path string `json:"path"`
	// RequiresAuthentication is whether the auth middleware, when the run
	// config sets server.auth, demands a bearer token there (0.3's
	// require_authentication=False exempts health and version; 0.2's
	// middleware guards every path).
	RequiresAuthentication bool `json:"requires_authentication"`
	// RequiredScope is the scope the caller's attributes must hold ("": none).
	RequiredScope string `json:"required_scope"`
	// Response is the response model's name (a key of Models).
	Response   string `json:"response"`
	Source     string `json:"source"`
	AuthSource string `json:"auth_source"`
}

// ModelFact is a response model's fields.
type ModelFact struct {
	Fields map[string]string `json:"fields"`
	Source string            `json:"source"`
}

// HealthFact is upstream's HealthStatus and what list_providers reports for
// a provider without a health check.
type HealthFact struct {
	Statuses              []string `json:"statuses"`
	Error                 string   `json:"error"`
	NotImplemented        string   `json:"not_implemented"`
	NotImplementedMessage string   `json:"not_implemented_message"`
	Source                string   `json:"source"`
	DefaultSource         string   `json:"default_source"`
}

// Names of the server endpoints the facts describe.
const (
	EndpointHealth        = "health"
	EndpointVersion       = "version"
	EndpointListProviders = "list_providers"
)

// Endpoint returns the line's endpoint of that name.
func (l Line) Endpoint(name string) (EndpointFact, error) {
	f := l.Facts()
	if f == nil {
		return EndpointFact{}, fmt.Errorf("no facts of Llama Stack line %q", l)
	}
	i := slices.IndexFunc(f.ServerAPI.Endpoints, func(e EndpointFact) bool { return e.Name == name })
	if i < 0 {
		return EndpointFact{}, fmt.Errorf("the facts of Llama Stack %s name no %s endpoint", l.Tag(), name)
	}
	return f.ServerAPI.Endpoints[i], nil
}

// VersionInfo is the version endpoint's answer (upstream's VersionInfo).
type VersionInfo struct {
	Version string `json:"version"`
}

// ListProvidersResponse is the list_providers endpoint's answer.
type ListProvidersResponse struct {
	Data []ProviderInfo `json:"data"`
}

// ProviderInfo is one enabled provider as the server lists it. Config is
// upstream's run config of the provider after redact_sensitive_fields,
// which masks only keys naming api_key, api_token, password or secret.
type ProviderInfo struct {
	API          string         `json:"api"`
	ProviderID   string         `json:"provider_id"`
	ProviderType string         `json:"provider_type"`
	Config       map[string]any `json:"config"`
	Health       HealthResponse `json:"health"`
}

// HealthResponse is upstream's HealthResponse, a dict[str, Any] whose
// producers set status (a HealthStatus) and, mostly, message.
type HealthResponse struct {
	Status  string `json:"status"`
	Message string `json:"message,omitempty"`
}

// HealthInfo is the health endpoint's answer.
type HealthInfo struct {
	Status string `json:"status"`
}
