package runconfig

import (
	"fmt"
	"maps"
	"slices"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/runconfig/stackconfig"
)

// dependencies are the APIs a provider type needs at start-up, as the
// line's facts record upstream's provider registry
// (llama_stack/providers/registry/<api>.py, api_dependencies): the server
// refuses to start when one has no provider.
func dependencies(line stackconfig.Line, api, providerType string) []string {
	return line.Facts().Providers[api][providerType].APIDependencies
}

// apiRenames are the APIs upstream renamed, by the spec's (older) name:
// 0.7.1's Api enum (llama_stack_api/datatypes.py) has responses where
// 0.3.0's had agents, whose OpenAI responses it serves.
var apiRenames = map[string]string{string(v1alpha2.APIAgents): "responses"}

// lineAPI is the line's name of an API the spec names (agents is
// responses from 0.7 on); an API the line does not have (Facts.APIs:
// telemetry and post_training from 0.7, datasetio, scoring and eval at
// 0.8) is a field error at the spec field that names it.
func lineAPI(line stackconfig.Line, api string, at *field.Path) (string, error) {
	if line.HasAPI(api) {
		return api, nil
	}
	if to, ok := apiRenames[api]; ok && line.HasAPI(to) {
		return to, nil
	}
	return "", &field.Error{Type: field.ErrorTypeNotSupported, Field: at.String(), BadValue: api, Detail: fmt.Sprintf(
		"%s has no %s API (%s): remove it, that line serves no such API", product(line), api, line.Facts().APIs.Source)}
}

// disable removes the disabled APIs and their providers, then, closing the
// set, every provider of the base that needs an API no longer served (an
// API whose last provider goes is disabled in turn), then every registered
// resource whose provider no longer exists. A provider the user declared
// that needs a disabled API is an error naming both: the server would not
// start, and dropping what the user asked for silently is worse.
func disable(cfg *runConfig, line stackconfig.Line, spec v1alpha2.InferenceStackSpec) error {
	if len(spec.Disabled) == 0 {
		return nil
	}
	off := map[string]bool{}
	for i, api := range spec.Disabled {
		a, err := lineAPI(line, string(api), field.NewPath("spec", "disabled").Index(i))
		if err != nil {
			return err
		}
		if api == v1alpha2.APITelemetry && !line.HasProviderAPI(a) {
			// 0.3: telemetry is a top-level switch, not an API.
			cfg.Telemetry = &telemetry{Enabled: false}
			continue
		}
		off[a] = true
		if t := line.Facts().RoutingTable(a); t != "" {
			off[t] = true // a router's routing table goes with it
		}
		cfg.APIs = slices.DeleteFunc(cfg.APIs, func(s string) bool { return s == a })
		delete(cfg.Providers, a)
	}
	for changed := true; changed; {
		changed = false
		for _, api := range slices.Sorted(maps.Keys(cfg.Providers)) {
			kept := cfg.Providers[api][:0:0]
			for _, p := range cfg.Providers[api] {
				dep := slices.IndexFunc(dependencies(line, api, p.ProviderType), func(d string) bool { return off[d] })
				if dep < 0 {
					kept = append(kept, p)
					continue
				}
				need := dependencies(line, api, p.ProviderType)[dep]
				if slices.ContainsFunc(userProviders(spec, api), func(u v1alpha2.ProviderSpec) bool { return providerID(u) == effectiveID(p.ProviderID) }) {
					return field.Invalid(field.NewPath("spec", "disabled"), need, fmt.Sprintf(
						"provider %s (%s) of the %s API, which spec.providers declares, needs the %s API: disable %s too, or keep %s",
						effectiveID(p.ProviderID), p.ProviderType, api, need, api, need))
				}
				changed = true
			}
			if len(kept) == 0 && len(cfg.Providers[api]) > 0 {
				delete(cfg.Providers, api)
				cfg.APIs = slices.DeleteFunc(cfg.APIs, func(s string) bool { return s == api })
				off[api] = true
				continue
			}
			cfg.Providers[api] = kept
		}
	}
	pruneResources(cfg)
	return nil
}

// completeBase gives an embedded base what upstream's own start-up needs
// and the base lacks: for each provider whose api_dependencies name an API
// the base has no provider of, the providers of that API from upstream's
// starter run.yaml at the same tag. Upstream's meta-reference-gpu and
// postgres-demo run.yaml at v0.2.23 and v0.3.0 list inline::rag-runtime but
// no files provider, and upstream's start-up refuses them ("required
// dependency 'files' is not available"); upstream fixed the same bug in
// starter, whose files provider (inline::localfs, under DataDir) is the
// one added. docs/api.md lists the fix.
func completeBase(cfg *runConfig, line stackconfig.Line) error {
	var starter *runConfig
	for _, api := range slices.Sorted(maps.Keys(cfg.Providers)) {
		for _, p := range cfg.Providers[api] {
			for _, dep := range dependencies(line, api, p.ProviderType) {
				if len(cfg.Providers[dep]) > 0 || line.Facts().Builtin(dep) {
					continue
				}
				if starter == nil {
					s, err := loadBase(line, string(v1alpha2.DistributionStarter))
					if err != nil {
						return err
					}
					starter = &s
				}
				if len(starter.Providers[dep]) == 0 {
					return fmt.Errorf("embedded base config at %s: provider %s (%s) needs the %s API, which neither it nor starter provides",
						line.Tag(), p.ProviderID, p.ProviderType, dep)
				}
				cfg.Providers[dep] = slices.Clone(starter.Providers[dep])
				if !slices.Contains(cfg.APIs, dep) && len(cfg.APIs) > 0 {
					cfg.APIs = append(cfg.APIs, dep)
				}
			}
		}
	}
	return nil
}

// pruneResources drops registered resources that point at a provider the
// config does not have. A resource that names no provider stays while its
// API is served (the server picks the API's only provider).
func pruneResources(cfg *runConfig) {
	has := func(api, id string) bool {
		if id == "" {
			return slices.Contains(cfg.APIs, api)
		}
		return slices.Contains(providerIDs(cfg, api), effectiveID(id))
	}
	cfg.Models = slices.DeleteFunc(cfg.Models, func(m model) bool { return !has("inference", m.ProviderID) })
	cfg.Shields = slices.DeleteFunc(cfg.Shields, func(s shield) bool { return !has("safety", s.ProviderID) })
	cfg.ToolGroups = slices.DeleteFunc(cfg.ToolGroups, func(t toolGroup) bool { return !has("tool_runtime", t.ProviderID) })
	generic := func(list []map[string]any, api string) []map[string]any {
		return slices.DeleteFunc(list, func(m map[string]any) bool {
			id, _ := m["provider_id"].(string)
			return !has(api, id)
		})
	}
	cfg.VectorDBs = generic(cfg.VectorDBs, "vector_io")
	cfg.Datasets = generic(cfg.Datasets, "datasetio")
	cfg.ScoringFns = generic(cfg.ScoringFns, "scoring")
	cfg.Benchmarks = generic(cfg.Benchmarks, "eval")
	// 0.7's safety section names the default shield; upstream refuses to
	// start when the safety API is not served (core/stack.py
	// validate_safety_config at v0.7.1 and v0.8.0: "Safety configuration
	// requires the shields API to be enabled"; safety is a router, served
	// while the config's apis list it): it goes with the API.
	if len(cfg.APIs) > 0 && !slices.Contains(cfg.APIs, "safety") {
		cfg.Extra = slices.DeleteFunc(cfg.Extra, func(e extraKey) bool { return e.key == "safety" })
	}
	// 0.3's default embedding model for vector stores must be served by a
	// provider that is still there (core/stack.py validate_vector_stores_config
	// refuses to start otherwise): without it, vector stores name their model.
	if m, ok := cfg.VectorStores["default_embedding_model"].(map[string]any); ok {
		if id, _ := m["provider_id"].(string); !has("inference", id) || (len(cfg.APIs) > 0 && !slices.Contains(cfg.APIs, "inference")) {
			delete(cfg.VectorStores, "default_embedding_model")
			if len(cfg.VectorStores) == 0 {
				cfg.VectorStores = nil
			}
		}
	}
}

// register adds the user's models, shields and tool groups. An entry whose
// id the base already registers replaces it, so nothing is registered twice.
func register(cfg *runConfig, spec v1alpha2.InferenceStackSpec, env *envSet) error {
	r := spec.Resources
	if r == nil {
		return nil
	}
	base := field.NewPath("spec", "resources")
	if err := requireAPI(spec, base.Child("models"), len(r.Models), v1alpha2.APIInference); err != nil {
		return err
	}
	if err := requireAPI(spec, base.Child("shields"), len(r.Shields), v1alpha2.APISafety); err != nil {
		return err
	}
	if err := requireAPI(spec, base.Child("tools"), len(r.Tools), v1alpha2.APIToolRuntime); err != nil {
		return err
	}
	on := ContainerEnv(spec, env.operator())
	for i, m := range r.Models {
		path := base.Child("models").Index(i)
		pid, err := resolveProvider(cfg, spec, on, "inference", m.Provider, path.Child("provider"))
		if err != nil {
			return err
		}
		e := model{ModelID: m.Name, ProviderID: pid, ProviderModelID: m.ProviderModelID, ModelType: string(m.ModelType), Metadata: map[string]any{}}
		if e.ModelType == "" {
			e.ModelType = string(v1alpha2.ModelTypeLLM)
		}
		switch {
		case e.ModelType == string(v1alpha2.ModelTypeEmbedding) && m.EmbeddingDimension == nil:
			return field.Required(path.Child("embeddingDimension"), "an embedding model needs its vector size")
		case e.ModelType != string(v1alpha2.ModelTypeEmbedding) && m.EmbeddingDimension != nil:
			return field.Forbidden(path.Child("embeddingDimension"), "only valid for modelType embedding")
		case m.EmbeddingDimension != nil:
			e.Metadata["embedding_dimension"] = int64(*m.EmbeddingDimension)
		}
		cfg.Models = upsert(cfg.Models, e, func(x model) bool { return x.ModelID == e.ModelID })
	}
	for i, s := range r.Shields {
		path := base.Child("shields").Index(i)
		pid, err := resolveProvider(cfg, spec, on, "safety", s.Provider, path.Child("provider"))
		if err != nil {
			return err
		}
		e := shield{ShieldID: s.Name, ProviderID: pid, ProviderShieldID: s.ProviderShieldID}
		cfg.Shields = upsert(cfg.Shields, e, func(x shield) bool { return x.ShieldID == e.ShieldID })
	}
	if len(r.Shields) > 0 {
		keepDefaultShield(cfg, on)
	}
	for i, t := range r.Tools {
		path := base.Child("tools").Index(i)
		pid, err := resolveProvider(cfg, spec, on, "tool_runtime", t.Provider, path.Child("provider"))
		if err != nil {
			return err
		}
		e := toolGroup{ToolGroupID: t.Name, ProviderID: pid}
		if t.MCPEndpoint != "" {
			e.MCPEndpoint = &mcpEndpoint{URI: t.MCPEndpoint}
		}
		cfg.ToolGroups = upsert(cfg.ToolGroups, e, func(x toolGroup) bool { return x.ToolGroupID == e.ToolGroupID })
	}
	return nil
}

// keepDefaultShield drops the safety section's default_shield_id (0.7.1
// on: the starter names llama-guard) when the shields registered at start
// in the server's environment do not include it: upstream refuses to
// start then ("Configured default_shield_id 'llama-guard' not found among
// registered shields", core/stack.py validate_safety_config at v0.7.1 and
// v0.8.0), which a stack registering its own shield met, the starter's
// llama-guard being on only with SAFETY_MODEL. Without a default, a
// request names its shield.
func keepDefaultShield(cfg *runConfig, env map[string]string) {
	i := slices.IndexFunc(cfg.Extra, func(e extraKey) bool { return e.key == "safety" })
	if i < 0 || cfg.Extra[i].value.Kind != yaml.MappingNode {
		return
	}
	safety := cfg.Extra[i].value
	var registered []string
	for _, sh := range cfg.Shields {
		if m := conditionalVarRE.FindStringSubmatch(sh.ProviderID); m != nil && env[m[1]] == "" {
			continue // register_resources skips a shield whose provider is off
		}
		registered = append(registered, sh.ShieldID)
	}
	kept := safety.Content[:0:0]
	for j := 0; j+1 < len(safety.Content); j += 2 {
		k, v := safety.Content[j], safety.Content[j+1]
		if k.Value == "default_shield_id" && len(registered) > 0 && !slices.Contains(registered, v.Value) {
			continue
		}
		kept = append(kept, k, v)
	}
	if len(kept) == 0 {
		cfg.Extra = slices.Delete(cfg.Extra, i, i+1)
		return
	}
	cfg.Extra[i].value = &yaml.Node{Kind: yaml.MappingNode, Tag: safety.Tag, Style: safety.Style, Content: kept}
}

// requireAPI refuses resources of a disabled API.
func requireAPI(spec v1alpha2.InferenceStackSpec, path *field.Path, n int, api v1alpha2.APIName) error {
	if n > 0 && slices.Contains(spec.Disabled, api) {
		return field.Forbidden(path, fmt.Sprintf("these resources need the %s API, which spec.disabled switches off", api))
	}
	return nil
}

// upsert replaces the first element matching, or appends.
func upsert[T any](list []T, e T, match func(T) bool) []T {
	if i := slices.IndexFunc(list, match); i >= 0 {
		list[i] = e
		return list
	}
	return append(list, e)
}
