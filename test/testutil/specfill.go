package testutil

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/randfill"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	"github.com/inferencestack/inferencestack/operator/runconfig/stackconfig"
)

// SpecFiller is a randfill.Filler of InferenceStackSpecs: every field of
// the API's types is filled (a new field is filled too, with randfill's
// defaults), and the fields whose values must be realistic for a meaningful
// share of specs to be admitted by the CRD and mean something to the
// pipeline are drawn from real values: distribution names from the API's
// enum, APIs from v1alpha1.APINames, provider names from the remote
// provider types of each API in the facts of every line (so a name one line
// lacks is drawn too), models and shields naming providers by id, by name,
// not at all or wrongly, storage and cache choices, names that follow the
// CRD's patterns. overrideConfig is left unset (override configs are
// runconfig's FuzzFromOverride). The same seed gives the same specs.
func SpecFiller(seed int64) *randfill.Filler {
	pick := func(c randfill.Continue, list []string) string { return list[c.Intn(len(list))] }
	name := func(c randfill.Continue) string {
		return pick(c, []string{"a", "b", "main", "x-1", "gpu", "local", "remote"})
	}
	secret := func(c randfill.Continue) *corev1.SecretKeySelector {
		return &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s-" + name(c)}, Key: pick(c, []string{"token", "key", "uri"})}
	}
	providers := providerNames()
	ids := []string{"vllm", "ollama", "openai", "vllm-0", "vllm-x", "ollama-1", "sentence-transformers", "llama-guard", "faiss", "tavily-search", "nope"}
	provider := func(c randfill.Continue, api string) v1alpha1.ProviderSpec {
		p := v1alpha1.ProviderSpec{Provider: pick(c, providers[api])}
		if c.Intn(5) == 0 {
			p.Provider = pick(c, providers["inference"]) // maybe not one of this API
		}
		if c.Bool() {
			p.ID = pick(c, append(slices.Clone(ids), p.Provider+"-"+name(c)))
		}
		// mostly what the provider type takes (its config class's derived
		// schema), sometimes what it does not (which must be refused)
		f := providerFields(api, p.Provider)
		if (f.endpoint && c.Intn(4) != 0) || c.Intn(16) == 0 {
			p.Endpoint = "http://" + p.Provider + ".models.svc:8000/v1"
		}
		if (f.secret && c.Intn(4) == 0) || c.Intn(32) == 0 {
			p.APIKey = secret(c)
		}
		if c.Intn(6) == 0 {
			keys := f.secrets
			if len(keys) == 0 || c.Intn(8) == 0 {
				keys = []string{"password", "api_token", "token"}
			}
			p.SecretRefs = map[string]corev1.SecretKeySelector{pick(c, keys): *secret(c)}
		}
		if c.Intn(6) == 0 {
			settings := []string{`{"max_tokens":16}`, `{"tls_verify":false}`, `{"url":"http://other:8000"}`}
			var fit []string
			for _, s := range settings {
				if slices.ContainsFunc(f.fields, func(k string) bool { return strings.Contains(s, `"`+k+`"`) }) {
					fit = append(fit, s)
				}
			}
			if len(fit) > 0 && c.Intn(8) != 0 {
				settings = fit
			}
			p.Settings = &runtime.RawExtension{Raw: []byte(pick(c, settings))}
		}
		return p
	}
	list := func(c randfill.Continue, api string) v1alpha1.ProviderList {
		if c.Intn(3) != 0 {
			return nil
		}
		out := v1alpha1.ProviderList{}
		n := 1 + c.Intn(2)
		for i := range n {
			p := provider(c, api)
			if n > 1 && (p.ID == "" || i > 0) && c.Intn(8) != 0 { // the CRD wants ids, unique, with more than one
				p.ID = fmt.Sprintf("%s-%d", p.Provider, i)
			}
			out = append(out, p)
		}
		return out
	}
	providerRef := func(c randfill.Continue) string {
		if c.Intn(3) == 0 {
			return ""
		}
		return pick(c, append(slices.Clone(ids), providers["inference"]...))
	}
	return randfill.NewWithSeed(seed).NilChance(0.5).NumElements(1, 3).Funcs(
		func(s *v1alpha1.InferenceStackSpec, c randfill.Continue) {
			c.FillNoCustom(s)
			s.OverrideConfig = nil
			if c.Intn(3) != 0 {
				s.Auth = nil
			}
			if c.Intn(3) != 0 {
				s.Networking = nil
			}
			if c.Intn(4) == 0 {
				s.Disabled = nil
			}
			// What a user of each distribution mostly sets: remote-vllm's
			// vLLM provider, the model upstream's postgres-demo and
			// meta-reference-gpu register.
			switch d := s.Distribution.Name; {
			case d == v1alpha1.DistributionRemoteVLLM && c.Intn(4) != 0:
				if s.Providers == nil {
					s.Providers = &v1alpha1.ProvidersSpec{}
				}
				vllm := v1alpha1.ProviderSpec{Provider: "vllm", Endpoint: "http://vllm.models.svc:8000/v1"}
				if len(s.Providers.Inference) > 0 {
					vllm.ID = "vllm-x"
					for i := range s.Providers.Inference {
						if s.Providers.Inference[i].ID == "" {
							s.Providers.Inference[i].ID = fmt.Sprintf("%s-%d", s.Providers.Inference[i].Provider, i)
						}
					}
				}
				s.Providers.Inference = append(s.Providers.Inference, vllm)
			case (d == v1alpha1.DistributionPostgresDemo || d == v1alpha1.DistributionMetaReferenceGPU) && c.Intn(4) != 0:
				if s.Workload == nil {
					s.Workload = &v1alpha1.WorkloadSpec{}
				}
				s.Workload.Env = append([]corev1.EnvVar{{Name: "INFERENCE_MODEL", Value: "meta-llama/Llama-3.2-3B-Instruct"}}, s.Workload.Env...)
			}
			// Mostly not both PostgreSQLs (the CRD refuses it).
			if s.Cache != nil && s.Cache.Enabled && s.Storage != nil && s.Storage.SQL != nil && c.Intn(4) != 0 {
				s.Storage.SQL = nil
			}
			// Lists the CRD keys by name hold each name once, mostly.
			if c.Intn(8) != 0 {
				s.Disabled = unique(s.Disabled, func(a v1alpha1.APIName) string { return string(a) })
				if r := s.Resources; r != nil {
					r.Models = unique(r.Models, func(m v1alpha1.ModelSpec) string { return m.Name })
					r.Shields = unique(r.Shields, func(m v1alpha1.ShieldSpec) string { return m.Name })
					r.Tools = unique(r.Tools, func(m v1alpha1.ToolGroupSpec) string { return m.Name })
				}
				if w := s.Workload; w != nil {
					w.Env = unique(w.Env, func(e corev1.EnvVar) string { return e.Name })
				}
			}
		},
		func(d *v1alpha1.DistributionSpec, c randfill.Continue) {
			*d = v1alpha1.DistributionSpec{}
			if c.Intn(10) == 0 {
				d.Image = "registry.example/llama-stack:custom"
				return
			}
			d.Name = v1alpha1.DistributionName(pick(c, []string{"starter", "remote-vllm", "postgres-demo", "meta-reference-gpu"}))
		},
		func(a *v1alpha1.APIName, c randfill.Continue) { *a = v1alpha1.APINames[c.Intn(len(v1alpha1.APINames))] },
		func(p *v1alpha1.ProvidersSpec, c randfill.Continue) {
			*p = v1alpha1.ProvidersSpec{
				Inference: list(c, "inference"), Safety: list(c, "safety"), VectorIO: list(c, "vector_io"),
				ToolRuntime: list(c, "tool_runtime"),
			}
			if c.Intn(4) == 0 { // 0.3 has no telemetry API to add providers to
				p.Telemetry = list(c, "telemetry")
			}
		},
		func(m *v1alpha1.ModelSpec, c randfill.Continue) {
			*m = v1alpha1.ModelSpec{Name: pick(c, []string{"llama3.2:3b", "meta-llama/Llama-3.2-3B-Instruct", "nomic-embed", "m"}), Provider: providerRef(c)}
			if c.Bool() {
				m.ProviderModelID = "org/" + name(c)
			}
			if c.Intn(4) == 0 {
				m.ModelType, m.EmbeddingDimension = v1alpha1.ModelType("embedding"), ptr.To(int32(384))
			}
		},
		func(s *v1alpha1.ShieldSpec, c randfill.Continue) {
			*s = v1alpha1.ShieldSpec{Name: pick(c, []string{"llama-guard", "guard"}), Provider: providerRef(c)}
		},
		func(g *v1alpha1.ToolGroupSpec, c randfill.Continue) {
			*g = v1alpha1.ToolGroupSpec{Name: pick(c, []string{"builtin::websearch", "builtin::rag", "mcp::tools"}), Provider: pick(c, []string{"", "tavily-search", "brave-search", "model-context-protocol", "rag-runtime"})}
			if c.Intn(3) == 0 {
				g.MCPEndpoint = "http://mcp.tools.svc:8000/sse"
			}
		},
		func(k *v1alpha1.KVStoreSpec, c randfill.Continue) {
			*k = v1alpha1.KVStoreSpec{Type: v1alpha1.KVStoreType(pick(c, []string{"sqlite", "redis"}))}
			if k.Type == "redis" || c.Intn(16) == 0 {
				k.Endpoint = "redis.cache.svc:6379"
			}
			if c.Intn(6) == 0 {
				k.Password = secret(c)
			}
		},
		func(q *v1alpha1.SQLStoreSpec, c randfill.Continue) {
			*q = v1alpha1.SQLStoreSpec{Type: v1alpha1.SQLStoreType(pick(c, []string{"sqlite", "postgres"}))}
			if q.Type == "postgres" || c.Intn(8) == 0 {
				q.ConnectionString = secret(c)
			}
		},
		func(cs *v1alpha1.CacheSpec, c randfill.Continue) {
			c.FillNoCustom(cs)
			cs.Enabled = c.Intn(8) != 0
		},
		func(a *v1alpha1.AuthSpec, c randfill.Continue) {
			*a = v1alpha1.AuthSpec{Kubernetes: &v1alpha1.KubernetesAuthSpec{}}
			if c.Bool() {
				a.Kubernetes.AllowedGroups = []string{"team-" + name(c)}
			}
		},
		func(t *v1alpha1.TLSSpec, c randfill.Continue) {
			*t = v1alpha1.TLSSpec{Enabled: c.Intn(4) != 0}
			if t.Enabled || c.Intn(8) == 0 {
				t.SecretName = "tls-" + name(c)
			}
			if c.Intn(3) == 0 {
				t.CABundle = &v1alpha1.CABundleSource{ConfigMapName: "ca-" + name(c)}
			}
		},
		func(w *v1alpha1.WorkloadSpec, c randfill.Continue) {
			*w = v1alpha1.WorkloadSpec{}
			if c.Bool() {
				w.StateVolume = &v1alpha1.StateVolumeSpec{}
			}
			switch c.Intn(16) {
			case 0, 1, 2:
				w.Replicas = ptr.To(int32(c.Intn(2)))
			case 3:
				w.Replicas = ptr.To(int32(2 + c.Intn(2)))
			case 4:
				w.Autoscaling = &v1alpha1.AutoscalingSpec{MaxReplicas: int32(1 + c.Intn(4))}
			}
			for range c.Intn(3) {
				w.Env = append(w.Env, corev1.EnvVar{Name: pick(c, envNames), Value: name(c)})
			}
			if c.Intn(4) == 0 {
				w.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}
			}
		},
		func(q *resource.Quantity, c randfill.Continue) {
			*q = resource.MustParse(pick(c, []string{"1Gi", "5Gi", "10Gi"}))
		},
		func(i *intstr.IntOrString, c randfill.Continue) { *i = intstr.FromInt32(int32(1 + c.Intn(2))) },
		func(s *corev1.SecretKeySelector, c randfill.Continue) { *s = *secret(c) },
		func(r *runtime.RawExtension, c randfill.Continue) {
			*r = runtime.RawExtension{Raw: []byte(`{"max_tokens":16}`)}
		},
		func(i *int32, c randfill.Continue) { *i = int32(c.Intn(4)) },
		func(s *string, c randfill.Continue) { *s = name(c) },
	)
}

// unique keeps the first element of each key.
func unique[T any](list []T, key func(T) string) []T {
	seen := map[string]bool{}
	var out []T
	for _, e := range list {
		if k := key(e); !seen[k] {
			seen[k] = true
			out = append(out, e)
		}
	}
	return out
}

// envNames are variables a user sets in workload.env: harmless ones, and
// ones the pipeline itself sets (a clash it must refuse or resolve).
var envNames = []string{"LOG_LEVEL", "INFERENCE_MODEL", "HOME", "LLAMA_STACK_CONFIG_DIR", "POSTGRES_HOST", "VLLM_URL", "SAFETY_MODEL"}

// providerNames are the remote provider names of each API the CRD lists
// providers of, from the facts of every line (upstream's provider
// registry at each tag), sorted.
func providerNames() map[string][]string {
	out := map[string][]string{}
	for _, l := range stackconfig.Lines() {
		for _, api := range []string{"inference", "safety", "vector_io", "tool_runtime", "telemetry"} {
			for t := range maps.Keys(l.Facts().Providers[api]) {
				if n, ok := strings.CutPrefix(t, "remote::"); ok && !slices.Contains(out[api], n) && !strings.Contains(n, "::") {
					out[api] = append(out[api], n)
				}
			}
		}
	}
	for api := range out {
		slices.Sort(out[api])
	}
	if len(out["telemetry"]) == 0 {
		out["telemetry"] = []string{"otel"}
	}
	return out
}

// fields is what a remote provider type's config class takes at any line
// (stackconfig.ProviderSchema).
type fields struct {
	endpoint, secret bool
	secrets, fields  []string
}

func providerFields(api, name string) fields {
	var f fields
	for _, l := range stackconfig.Lines() {
		ps, ok := l.Schemas().Provider(api, "remote::"+name)
		if !ok {
			continue
		}
		f.endpoint = f.endpoint || ps.EndpointField != ""
		f.secret = f.secret || ps.SecretField != ""
		f.secrets = append(f.secrets, ps.SecretCandidates...)
		f.fields = append(f.fields, ps.Fields()...)
	}
	return f
}
