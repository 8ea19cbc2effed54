package runconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/runconfig/stackconfig"
)

// apiList is the providers the user listed for one API.
type apiList struct {
	api   string // Llama Stack API name, e.g. vector_io
	field string // spec field, e.g. vectorIo
	list  v1alpha2.ProviderList
}

// apiProviders lists the user's providers per API, in a fixed order.
func apiProviders(p *v1alpha2.ProvidersSpec) []apiList {
	if p == nil {
		return nil
	}
	return []apiList{
		{string(v1alpha2.APIInference), "inference", p.Inference},
		{string(v1alpha2.APISafety), "safety", p.Safety},
		{string(v1alpha2.APIVectorIO), "vectorIo", p.VectorIO},
		{string(v1alpha2.APIToolRuntime), "toolRuntime", p.ToolRuntime},
		{string(v1alpha2.APITelemetry), "telemetry", p.Telemetry},
	}
}

// userProviders returns the user's providers of one API.
func userProviders(spec v1alpha2.InferenceStackSpec, api string) v1alpha2.ProviderList {
	for _, l := range apiProviders(spec.Providers) {
		if l.api == api {
			return l.list
		}
	}
	return nil
}

// providerID is the id a user provider gets in the run config.
func providerID(p v1alpha2.ProviderSpec) string {
	if p.ID != "" {
		return p.ID
	}
	return p.Provider
}

// overlayProviders merges the user's providers into the config by id: a
// matching id is replaced, a new id appended, the rest kept.
func overlayProviders(cfg *runConfig, line stackconfig.Line, spec v1alpha2.InferenceStackSpec, env *envSet, origins specOrigins) error {
	lay, err := layoutOf(line)
	if err != nil {
		return err
	}
	base := field.NewPath("spec", "providers")
	for _, l := range apiProviders(spec.Providers) {
		if len(l.list) == 0 {
			continue
		}
		path := base.Child(l.field)
		if _, err := lineAPI(line, l.api, path); err != nil {
			return err
		}
		if l.api == string(v1alpha2.APITelemetry) && !line.HasProviderAPI(l.api) {
			return field.Forbidden(path, fmt.Sprintf("Llama Stack %s has no telemetry API to add providers to "+
				"(telemetry is a top-level setting; the server exports through the OTEL_* variables of workload.env): "+
				"remove providers.telemetry, or pin an operator release with Llama Stack 0.2", line))
		}
		if slices.Contains(spec.Disabled, v1alpha2.APIName(l.api)) {
			return field.Forbidden(path, fmt.Sprintf("the %s API is disabled: remove it from spec.disabled or remove these providers", l.api))
		}
		seen := map[string]int{}
		list := cfg.Providers[l.api]
		for i, up := range l.list {
			id := providerID(up)
			if len(l.list) > 1 && up.ID == "" {
				return field.Required(path.Index(i).Child("id"), "an API with more than one provider needs an id on each")
			}
			if j, dup := seen[id]; dup {
				return field.Duplicate(path.Index(i).Child("id"), fmt.Sprintf("%s (also %s)", id, path.Index(j)))
			}
			seen[id] = i
			p, err := userProvider(line, l.api, path.Index(i), up, env, origins)
			if err == nil && l.api == string(v1alpha2.APIVectorIO) {
				lay.vectorStore(&p)
			}
			if err != nil {
				return err
			}
			if k := slices.IndexFunc(list, func(b provider) bool { return effectiveID(b.ProviderID) == id }); k >= 0 {
				list[k] = p
			} else {
				list = append(list, p)
			}
		}
		cfg.Providers[l.api] = list
		if !slices.Contains(cfg.APIs, l.api) {
			cfg.APIs = append(cfg.APIs, l.api)
			slices.Sort(cfg.APIs)
		}
	}
	return nil
}

// userProvider builds the run-config provider of a CRD provider: settings,
// then the endpoint and the API key in the fields the provider type's
// config class names for its URL and its secret (derived from upstream's
// schema: stackconfig.ProviderSchema), then secrets as environment
// placeholders. It records where each config key came from in origins, so
// the checks of the run config name the spec field the user wrote.
func userProvider(line stackconfig.Line, api string, path *field.Path, up v1alpha2.ProviderSpec, env *envSet, origins specOrigins) (provider, error) {
	id := providerID(up)
	typ := "remote::" + up.Provider
	ps, known := line.Schemas().Provider(api, typ)
	if !known {
		if types := remoteTypes(line, api); len(types) > 0 {
			return provider{}, field.NotSupported(path.Child("provider"), up.Provider, types)
		}
		return provider{}, field.Invalid(path.Child("provider"), up.Provider, fmt.Sprintf(
			"upstream Llama Stack %s (%s) has no remote %s provider: remove it", line, line.Tag(), api))
	}
	cfg, err := settings(path.Child("settings"), up)
	if err != nil {
		return provider{}, err
	}
	from := map[string]*field.Path{}
	for k := range cfg {
		from[k] = path.Child("settings", k)
	}
	set := func(key string, value any, origin *field.Path) error {
		if prev, clash := from[key]; clash {
			return field.Duplicate(origin, fmt.Sprintf("%s also sets %s's %s (upstream: %s.%s): set it once, in one of them",
				prev, typ, key, ps.Class, key))
		}
		cfg[key] = value
		from[key] = origin
		return nil
	}
	if up.Endpoint != "" {
		key, err := takes(ps, typ, "URL", ps.EndpointField, ps.EndpointCandidates, path.Child("endpoint"), up.Endpoint)
		if err != nil {
			return provider{}, err
		}
		if err := set(key, up.Endpoint, path.Child("endpoint")); err != nil {
			return provider{}, err
		}
	}
	// every key is checked before any environment variable is named, so a
	// key set twice is reported as such
	keys := slices.Sorted(maps.Keys(up.SecretRefs))
	secretKey := ""
	if up.APIKey != nil {
		secretKey, err = takes(ps, typ, "secret", ps.SecretField, ps.SecretCandidates, path.Child("apiKey"), "")
		if err != nil {
			return provider{}, err
		}
		if _, both := up.SecretRefs[secretKey]; both {
			return provider{}, field.Duplicate(path.Child("secretRefs").Key(secretKey), fmt.Sprintf(
				"apiKey already sets %s's %s (its secret field): remove secretRefs.%s, or remove apiKey", typ, secretKey, secretKey))
		}
	}
	if up.APIKey != nil {
		ph, err := env.secret(envName(api, id, secretKey), *up.APIKey, path.Child("apiKey"))
		if err != nil {
			return provider{}, err
		}
		if err := set(secretKey, ph, path.Child("apiKey")); err != nil {
			return provider{}, err
		}
	}
	for _, key := range keys {
		origin := path.Child("secretRefs").Key(key)
		if prev, clash := from[key]; clash {
			return provider{}, field.Duplicate(origin, fmt.Sprintf("%s also sets %s's %s: set it once, in one of them", prev, typ, key))
		}
		ph, err := env.secret(envName(api, id, key), up.SecretRefs[key], origin)
		if err != nil {
			return provider{}, err
		}
		if err := set(key, ph, origin); err != nil {
			return provider{}, err
		}
	}
	origins[api+"/"+id] = providerOrigin{path: path, keys: from, class: ps.Class}
	if len(cfg) == 0 {
		cfg = nil
	}
	return provider{ProviderID: id, ProviderType: typ, Config: cfg}, nil
}

// takes returns the config field of a provider type that takes the spec's
// endpoint (what "URL") or apiKey ("secret"), or refuses the spec field
// naming the fields the type takes: writing a key the class does not have
// would be dropped by upstream without a word.
func takes(ps stackconfig.ProviderSchema, typ, what, name string, candidates []string, path *field.Path, value string) (string, error) {
	if name != "" {
		return name, nil
	}
	var why string
	if len(candidates) > 1 {
		why = fmt.Sprintf("%s (upstream: %s) has several %s fields (%s): set the one you mean under settings",
			typ, ps.Class, what, strings.Join(candidates, ", "))
	} else if fields := ps.Fields(); len(fields) > 0 {
		why = fmt.Sprintf("%s (upstream: %s) has no %s field; it takes %s: set those under settings", typ, ps.Class, what, strings.Join(fields, ", "))
	} else {
		return "", field.Forbidden(path, fmt.Sprintf("%s (upstream: %s) takes no configuration at all: remove %s", typ, ps.Class, path))
	}
	if what == "secret" {
		why += ", and a secret one under secretRefs"
		return "", field.Invalid(path, "(Secret reference)", why)
	}
	return "", field.Invalid(path, value, why)
}

// remoteTypes lists the remote provider names of an API at a line.
func remoteTypes(line stackconfig.Line, api string) []string {
	var out []string
	for typ := range line.Schemas().Providers[api] {
		if name, ok := strings.CutPrefix(typ, "remote::"); ok {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// providerOrigin is where a user provider's config came from in the spec.
type providerOrigin struct {
	path  *field.Path            // spec.providers.<api>[i]
	keys  map[string]*field.Path // config key -> the spec field that set it
	class string
}

// specOrigins maps "<api>/<provider id>" to the spec's provider.
type specOrigins map[string]providerOrigin

// specError restates the problems a check found in the user's providers
// at the spec fields the user wrote: a provider config's schema errors
// (stackconfig.ProviderConfigError) and the semantic rules' problems under
// providers.<api>[i] (stackconfig.Problem), the index read in cfg. The
// other problems are kept as they are; when none is the user's, err is
// returned unchanged.
func (o specOrigins) specError(err error, cfg *runConfig) error {
	leaves := stackconfig.Leaves(err)
	var list []error
	mapped := false
	for _, leaf := range leaves {
		var pe *stackconfig.ProviderConfigError
		var pr *stackconfig.Problem
		switch {
		case errors.As(leaf, &pe):
			if po, ok := o[pe.API+"/"+pe.ID]; ok && len(pe.Path) > 0 {
				msg := pe.Message
				if pe.Upstream != "" {
					msg += " (upstream: " + pe.Upstream + ")"
				}
				list, mapped = append(list, fmt.Errorf("%s: %s", po.at(pe.Path), msg)), true
				continue
			}
		case errors.As(leaf, &pr):
			if m := providerAt.FindStringSubmatch(pr.At); m != nil {
				i, _ := strconv.Atoi(m[2])
				if ps := cfg.Providers[m[1]]; i < len(ps) {
					if po, ok := o[m[1]+"/"+ps[i].ProviderID]; ok {
						list, mapped = append(list, fmt.Errorf("%s: %s", po.at(configPath(m[3])), pr.Message)), true
						continue
					}
				}
			}
		}
		list = append(list, leaf)
	}
	if !mapped {
		return err
	}
	return errors.Join(list...)
}

// providerAt splits a run-config path under a provider: API, index, rest.
var providerAt = regexp.MustCompile(`^providers\.([a-z_]+)\[(\d+)\](.*)$`)

// configPath is the path inside a provider's config of the rest of a
// run-config path (".config.persistence.backend"; nil when it is not under
// config).
func configPath(rest string) []string {
	rest, ok := strings.CutPrefix(rest, ".config.")
	if !ok {
		return nil
	}
	var out []string
	for _, part := range strings.Split(rest, ".") {
		name, idx, _ := strings.Cut(part, "[")
		out = append(out, name)
		if idx != "" {
			out = append(out, strings.TrimSuffix(idx, "]"))
		}
	}
	return out
}

// at is the spec field of a path inside the provider's config: the field
// that set its first key (endpoint, apiKey, secretRefs[k]) or
// settings.<key>, then the rest; the provider itself for an empty path.
func (po providerOrigin) at(path []string) *field.Path {
	if len(path) == 0 {
		return po.path
	}
	at, ok := po.keys[path[0]]
	if !ok {
		at = po.path.Child("settings", path[0])
	}
	for _, s := range path[1:] {
		if i, err := strconv.Atoi(s); err == nil {
			at = at.Index(i)
		} else {
			at = at.Child(s)
		}
	}
	return at
}

// settings decodes the free-form settings into a fresh map.
func settings(path *field.Path, up v1alpha2.ProviderSpec) (map[string]any, error) {
	out := map[string]any{}
	if up.Settings == nil || len(bytes.TrimSpace(up.Settings.Raw)) == 0 {
		return out, nil
	}
	dec := json.NewDecoder(bytes.NewReader(up.Settings.Raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, field.Invalid(path, string(up.Settings.Raw), fmt.Sprintf("not valid JSON: %v", err))
	}
	m, ok := normalize(v).(map[string]any)
	if !ok {
		return nil, field.TypeInvalid(path, string(up.Settings.Raw), "settings must be an object of provider config keys")
	}
	if m != nil {
		out = m
	}
	return out, nil
}

// normalize turns JSON numbers into int64 or float64 so they marshal as
// YAML numbers.
func normalize(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			t[k] = normalize(e)
		}
		return t
	case []any:
		for i, e := range t {
			t[i] = normalize(e)
		}
		return t
	case json.Number:
		if i, err := t.Int64(); err == nil {
			return i
		}
		if f, err := t.Float64(); err == nil && !math.IsInf(f, 0) {
			return f
		}
		return t.String()
	default:
		return v
	}
}

// conditionalIDRE matches upstream's conditional provider ids,
// ${env.NAME:+id}: the provider is on only when NAME is set.
var conditionalIDRE = regexp.MustCompile(`^\$\{env\.[A-Z0-9_]+:\+([^}]+)}$`)

// effectiveID is the id a provider has when it is on: a conditional id
// ${env.VLLM_URL:+vllm} gives vllm. A user provider of that id replaces the
// conditional one, and so is always on.
func effectiveID(id string) string {
	if m := conditionalIDRE.FindStringSubmatch(id); m != nil {
		return m[1]
	}
	return id
}

// providerIDs lists the ids of an API's providers in config order, as
// resources refer to them (conditional ids by the id they give).
func providerIDs(cfg *runConfig, api string) []string {
	var ids []string
	for _, p := range cfg.Providers[api] {
		ids = append(ids, effectiveID(p.ProviderID))
	}
	return ids
}

// onIDs lists the ids of an API's providers that are on in the server's
// environment, in config order: a conditional id ${env.VLLM_URL:+vllm} is
// on only when the container sets VLLM_URL (upstream's replace_env_vars
// otherwise leaves the id empty and the provider off).
func onIDs(cfg *runConfig, api string, env map[string]string) []string {
	var ids []string
	for _, p := range cfg.Providers[api] {
		if m := conditionalVarRE.FindStringSubmatch(p.ProviderID); m != nil && env[m[1]] == "" {
			continue
		}
		ids = append(ids, effectiveID(p.ProviderID))
	}
	return ids
}

// conditionalVarRE captures the variable of a conditional id.
var conditionalVarRE = regexp.MustCompile(`^\$\{env\.([A-Z0-9_]+):\+[^}]+}$`)

// resolveProvider finds the provider id a resource refers to, among the
// providers that are on in the server's environment (a resource naming a
// provider that is off is refused at start: "Provider `vllm` not found"):
// an id, or the name of a provider type when exactly one provider of the
// API that is on has it ("vllm" finds the provider of type remote::vllm).
// An empty reference picks the only provider the user declared for the API,
// or the only one on.
func resolveProvider(cfg *runConfig, spec v1alpha2.InferenceStackSpec, env map[string]string, api, ref string, path *field.Path) (string, error) {
	ids := onIDs(cfg, api, env)
	if ref == "" {
		if user := userProviders(spec, api); len(user) == 1 {
			return providerID(user[0]), nil
		}
		if len(ids) == 1 {
			return ids[0], nil
		}
		return "", field.Required(path, fmt.Sprintf("the stack has %d %s providers that are on (%s): name one", len(ids), api, strings.Join(ids, ", ")))
	}
	if slices.Contains(ids, ref) {
		return ref, nil
	}
	var byType []string
	for _, p := range cfg.Providers[api] {
		if _, name, _ := strings.Cut(p.ProviderType, "::"); name == ref && slices.Contains(ids, effectiveID(p.ProviderID)) {
			byType = append(byType, effectiveID(p.ProviderID))
		}
	}
	if len(byType) == 1 {
		return byType[0], nil
	}
	if len(byType) > 1 {
		return "", field.Invalid(path, ref, fmt.Sprintf("%d %s providers have type %s (%s): name one by id", len(byType), api, ref, strings.Join(byType, ", ")))
	}
	for _, p := range cfg.Providers[api] {
		if m := conditionalVarRE.FindStringSubmatch(p.ProviderID); m != nil && effectiveID(p.ProviderID) == ref {
			return "", field.Invalid(path, ref, fmt.Sprintf("the %s provider %s is off: it is on only when the server's environment sets %s (add a provider of that id with its endpoint, or set %s in workload.env); the %s providers that are on are: %s",
				api, ref, m[1], m[1], api, strings.Join(ids, ", ")))
		}
	}
	return "", field.Invalid(path, ref, fmt.Sprintf("no %s provider that is on has this id or type; the %s providers that are on are: %s", api, api, strings.Join(ids, ", ")))
}

// checkAlias makes sure a remote-vllm stack has its vLLM server: the
// alias runs the starter distribution, whose vllm provider is on only with
// VLLM_URL, so the stack must declare its vLLM provider with an endpoint.
func checkAlias(cfg *runConfig, spec v1alpha2.InferenceStackSpec) error {
	if spec.Distribution.Name != v1alpha2.DistributionRemoteVLLM {
		return nil
	}
	for _, p := range userProviders(spec, string(v1alpha2.APIInference)) {
		if p.Provider == "vllm" && p.Endpoint != "" {
			return nil
		}
	}
	return field.Required(field.NewPath("spec", "providers", "inference"),
		"distribution remote-vllm runs the starter image with its vLLM provider (upstream publishes no remote-vllm "+
			"distribution after 0.2.14): add an inference provider with provider: vllm and the endpoint of your vLLM server")
}
