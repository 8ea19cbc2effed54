package runconfig

import (
	"fmt"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	"github.com/inferencestack/inferencestack/operator/runconfig/stackconfig"
)

// apiDependencies lists the APIs inline providers of the embedded bases
// need at start-up, as upstream's provider registry declares them
// (llama_stack/providers/registry/*.py, the same at v0.2.23 and v0.3.0);
// the server refuses to start when one is missing.
var apiDependencies = map[string][]string{
	"agents/inline::meta-reference":    {"inference", "safety", "tool_runtime", "vector_io"},
	"batches/inline::reference":        {"files", "inference"},
	"eval/inline::meta-reference":      {"agents", "datasetio", "inference", "scoring"},
	"safety/inline::llama-guard":       {"inference"},
	"scoring/inline::basic":            {"datasetio"},
	"scoring/inline::braintrust":       {"datasetio"},
	"scoring/inline::llm-as-judge":     {"datasetio", "inference"},
	"tool_runtime/inline::rag-runtime": {"files", "inference", "vector_io"},
	"vector_io/inline::faiss":          {"inference"},
	"vector_io/inline::milvus":         {"inference"},
	"vector_io/inline::sqlite-vec":     {"inference"},
}

// disable removes the disabled APIs and their providers, then every
// registered resource whose provider no longer exists. A remaining provider
// that needs a disabled API is an error: the server would not start.
func disable(cfg *runConfig, line stackconfig.Line, spec v1alpha1.InferenceStackSpec) error {
	if len(spec.Disabled) == 0 {
		return nil
	}
	for _, api := range spec.Disabled {
		a := string(api)
		if api == v1alpha1.APITelemetry && line != stackconfig.Line02 {
			// 0.3: telemetry is a top-level switch, not an API.
			cfg.Telemetry = &telemetry{Enabled: false}
			continue
		}
		cfg.APIs = slices.DeleteFunc(cfg.APIs, func(s string) bool { return s == a })
		delete(cfg.Providers, a)
	}
	for _, api := range slices.Sorted(maps.Keys(cfg.Providers)) {
		for _, p := range cfg.Providers[api] {
			for _, dep := range apiDependencies[api+"/"+p.ProviderType] {
				if slices.Contains(spec.Disabled, v1alpha1.APIName(dep)) {
					return field.Invalid(field.NewPath("spec", "disabled"), dep, fmt.Sprintf(
						"provider %s (%s) of the %s API needs the %s API: disable %s too, or keep %s",
						p.ProviderID, p.ProviderType, api, dep, api, dep))
				}
			}
		}
	}
	pruneResources(cfg)
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
}

// register adds the user's models, shields and tool groups. An entry whose
// id the base already registers replaces it, so nothing is registered twice.
func register(cfg *runConfig, spec v1alpha1.InferenceStackSpec) error {
	r := spec.Resources
	if r == nil {
		return nil
	}
	base := field.NewPath("spec", "resources")
	if err := requireAPI(spec, base.Child("models"), len(r.Models), v1alpha1.APIInference); err != nil {
		return err
	}
	if err := requireAPI(spec, base.Child("shields"), len(r.Shields), v1alpha1.APISafety); err != nil {
		return err
	}
	if err := requireAPI(spec, base.Child("tools"), len(r.Tools), v1alpha1.APIToolRuntime); err != nil {
		return err
	}
	for i, m := range r.Models {
		path := base.Child("models").Index(i)
		pid, err := resolveProvider(cfg, spec, "inference", m.Provider, path.Child("provider"))
		if err != nil {
			return err
		}
		e := model{ModelID: m.Name, ProviderID: pid, ProviderModelID: m.ProviderModelID, ModelType: string(m.ModelType), Metadata: map[string]any{}}
		if e.ModelType == "" {
			e.ModelType = string(v1alpha1.ModelTypeLLM)
		}
		switch {
		case e.ModelType == string(v1alpha1.ModelTypeEmbedding) && m.EmbeddingDimension == nil:
			return field.Required(path.Child("embeddingDimension"), "an embedding model needs its vector size")
		case e.ModelType != string(v1alpha1.ModelTypeEmbedding) && m.EmbeddingDimension != nil:
			return field.Forbidden(path.Child("embeddingDimension"), "only valid for modelType embedding")
		case m.EmbeddingDimension != nil:
			e.Metadata["embedding_dimension"] = int64(*m.EmbeddingDimension)
		}
		cfg.Models = upsert(cfg.Models, e, func(x model) bool { return x.ModelID == e.ModelID })
	}
	for i, s := range r.Shields {
		path := base.Child("shields").Index(i)
		pid, err := resolveProvider(cfg, spec, "safety", s.Provider, path.Child("provider"))
		if err != nil {
			return err
		}
		e := shield{ShieldID: s.Name, ProviderID: pid, ProviderShieldID: s.ProviderShieldID}
		cfg.Shields = upsert(cfg.Shields, e, func(x shield) bool { return x.ShieldID == e.ShieldID })
	}
	for i, t := range r.Tools {
		path := base.Child("tools").Index(i)
		pid, err := resolveProvider(cfg, spec, "tool_runtime", t.Provider, path.Child("provider"))
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

// requireAPI refuses resources of a disabled API.
func requireAPI(spec v1alpha1.InferenceStackSpec, path *field.Path, n int, api v1alpha1.APIName) error {
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
