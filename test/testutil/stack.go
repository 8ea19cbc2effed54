// Package testutil builds InferenceStack fixtures for tests with functional
// options: testutil.Stack("a", testutil.WithModel("llama", "vllm")).
package testutil

import (
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
)

// Option changes a fixture.
type Option func(*v1alpha1.InferenceStack)

// Stack returns an InferenceStack named name in namespace "default" with
// the starter distribution, changed by opts in order.
func Stack(name string, opts ...Option) *v1alpha1.InferenceStack {
	s := &v1alpha1.InferenceStack{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "InferenceStack"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: v1alpha1.InferenceStackSpec{
			Distribution: v1alpha1.DistributionSpec{Name: v1alpha1.DistributionStarter},
		},
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

// WithNamespace puts the stack in namespace ns.
func WithNamespace(ns string) Option {
	return func(s *v1alpha1.InferenceStack) { s.Namespace = ns }
}

// WithSpec changes the spec freely, for cases no other option covers.
func WithSpec(f func(*v1alpha1.InferenceStackSpec)) Option {
	return func(s *v1alpha1.InferenceStack) { f(&s.Spec) }
}

// WithDistribution selects an embedded distribution (and no image).
func WithDistribution(name v1alpha1.DistributionName) Option {
	return func(s *v1alpha1.InferenceStack) {
		s.Spec.Distribution = v1alpha1.DistributionSpec{Name: name}
	}
}

// WithImage selects a custom server image (and no distribution name).
func WithImage(image string) Option {
	return func(s *v1alpha1.InferenceStack) {
		s.Spec.Distribution = v1alpha1.DistributionSpec{Image: image}
	}
}

// Provider builds a provider spec: Provider("vllm", WithID("a"), WithEndpoint(...)).
func Provider(provider string, opts ...func(*v1alpha1.ProviderSpec)) v1alpha1.ProviderSpec {
	p := v1alpha1.ProviderSpec{Provider: provider}
	for _, o := range opts {
		o(&p)
	}
	return p
}

// WithID sets a provider's id.
func WithID(id string) func(*v1alpha1.ProviderSpec) {
	return func(p *v1alpha1.ProviderSpec) { p.ID = id }
}

// WithEndpoint sets a provider's endpoint.
func WithEndpoint(url string) func(*v1alpha1.ProviderSpec) {
	return func(p *v1alpha1.ProviderSpec) { p.Endpoint = url }
}

// WithAPIKey reads a provider's API key from Secret name, key key.
func WithAPIKey(name, key string) func(*v1alpha1.ProviderSpec) {
	return func(p *v1alpha1.ProviderSpec) { p.APIKey = SecretKey(name, key) }
}

// WithSecretRef reads the provider config key configKey from Secret name, key key.
func WithSecretRef(configKey, name, key string) func(*v1alpha1.ProviderSpec) {
	return func(p *v1alpha1.ProviderSpec) {
		if p.SecretRefs == nil {
			p.SecretRefs = map[string]corev1.SecretKeySelector{}
		}
		p.SecretRefs[configKey] = *SecretKey(name, key)
	}
}

// WithSettings sets a provider's free-form settings from JSON.
func WithSettings(json string) func(*v1alpha1.ProviderSpec) {
	return func(p *v1alpha1.ProviderSpec) { p.Settings = &runtime.RawExtension{Raw: []byte(json)} }
}

// SecretKey is a Secret key reference.
func SecretKey(name, key string) *corev1.SecretKeySelector {
	return &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key}
}

// WithProviders appends providers to an API: inference, safety, vectorIo,
// toolRuntime or telemetry (the spec field names).
func WithProviders(api string, providers ...v1alpha1.ProviderSpec) Option {
	return func(s *v1alpha1.InferenceStack) {
		if s.Spec.Providers == nil {
			s.Spec.Providers = &v1alpha1.ProvidersSpec{}
		}
		p := s.Spec.Providers
		lists := map[string]*v1alpha1.ProviderList{
			"inference": &p.Inference, "safety": &p.Safety, "vectorIo": &p.VectorIO,
			"toolRuntime": &p.ToolRuntime, "telemetry": &p.Telemetry,
		}
		l, ok := lists[api]
		if !ok {
			panic("testutil.WithProviders: unknown API " + api)
		}
		*l = append(*l, providers...)
	}
}

func resources(s *v1alpha1.InferenceStack) *v1alpha1.ResourcesSpec {
	if s.Spec.Resources == nil {
		s.Spec.Resources = &v1alpha1.ResourcesSpec{}
	}
	return s.Spec.Resources
}

// WithModel registers an llm served by the provider with id provider ("" for
// the only one).
func WithModel(name, provider string) Option {
	return WithModelSpec(v1alpha1.ModelSpec{Name: name, Provider: provider})
}

// WithEmbeddingModel registers an embedding model of the given vector size.
func WithEmbeddingModel(name, provider string, dimension int32) Option {
	return WithModelSpec(v1alpha1.ModelSpec{
		Name: name, Provider: provider, ModelType: v1alpha1.ModelTypeEmbedding, EmbeddingDimension: ptr.To(dimension),
	})
}

// WithModelSpec registers a model.
func WithModelSpec(m v1alpha1.ModelSpec) Option {
	return func(s *v1alpha1.InferenceStack) { resources(s).Models = append(resources(s).Models, m) }
}

// WithShield registers a shield.
func WithShield(name, provider string) Option {
	return func(s *v1alpha1.InferenceStack) {
		resources(s).Shields = append(resources(s).Shields, v1alpha1.ShieldSpec{Name: name, Provider: provider})
	}
}

// WithTool registers a tool group.
func WithTool(name, provider string) Option {
	return func(s *v1alpha1.InferenceStack) {
		resources(s).Tools = append(resources(s).Tools, v1alpha1.ToolGroupSpec{Name: name, Provider: provider})
	}
}

// WithDisabled switches APIs off.
func WithDisabled(apis ...v1alpha1.APIName) Option {
	return func(s *v1alpha1.InferenceStack) { s.Spec.Disabled = append(s.Spec.Disabled, apis...) }
}

// WithOverrideConfig uses the run config in ConfigMap name.
func WithOverrideConfig(name string) Option {
	return func(s *v1alpha1.InferenceStack) {
		s.Spec.OverrideConfig = &v1alpha1.OverrideConfigSpec{ConfigMapName: name}
	}
}

// WithKV sets the key-value store.
func WithKV(kv v1alpha1.KVStoreSpec) Option {
	return func(s *v1alpha1.InferenceStack) {
		if s.Spec.Storage == nil {
			s.Spec.Storage = &v1alpha1.StorageSpec{}
		}
		s.Spec.Storage.KV = &kv
	}
}

// WithSQL sets the SQL store.
func WithSQL(sql v1alpha1.SQLStoreSpec) Option {
	return func(s *v1alpha1.InferenceStack) {
		if s.Spec.Storage == nil {
			s.Spec.Storage = &v1alpha1.StorageSpec{}
		}
		s.Spec.Storage.SQL = &sql
	}
}

// WithCache turns the operator-managed PostgreSQL on.
func WithCache() Option {
	return func(s *v1alpha1.InferenceStack) { s.Spec.Cache = &v1alpha1.CacheSpec{Enabled: true} }
}

// WithPort sets the Service port.
func WithPort(port int32) Option {
	return func(s *v1alpha1.InferenceStack) { networking(s).Port = port }
}

// WithTLS sets the server's TLS.
func WithTLS(tls v1alpha1.TLSSpec) Option {
	return func(s *v1alpha1.InferenceStack) { networking(s).TLS = &tls }
}

func networking(s *v1alpha1.InferenceStack) *v1alpha1.NetworkingSpec {
	if s.Spec.Networking == nil {
		s.Spec.Networking = &v1alpha1.NetworkingSpec{}
	}
	return s.Spec.Networking
}

// WithKubernetesAuth turns on Kubernetes authentication, admitting groups.
func WithKubernetesAuth(groups ...string) Option {
	return func(s *v1alpha1.InferenceStack) {
		s.Spec.Auth = &v1alpha1.AuthSpec{Kubernetes: &v1alpha1.KubernetesAuthSpec{AllowedGroups: groups}}
	}
}

func workload(s *v1alpha1.InferenceStack) *v1alpha1.WorkloadSpec {
	if s.Spec.Workload == nil {
		s.Spec.Workload = &v1alpha1.WorkloadSpec{}
	}
	return s.Spec.Workload
}

// WithReplicas sets the replica count.
func WithReplicas(n int32) Option {
	return func(s *v1alpha1.InferenceStack) { workload(s).Replicas = ptr.To(n) }
}

// WithAutoscaling scales between min and max replicas at target CPU percent.
func WithAutoscaling(minReplicas, maxReplicas, target int32) Option {
	return func(s *v1alpha1.InferenceStack) {
		workload(s).Autoscaling = &v1alpha1.AutoscalingSpec{
			MinReplicas: ptr.To(minReplicas), MaxReplicas: maxReplicas, TargetCPUUtilizationPercentage: ptr.To(target),
		}
	}
}

// WithPodDisruptionBudget sets the budget; nil leaves a bound unset.
func WithPodDisruptionBudget(minAvailable, maxUnavailable *intstr.IntOrString) Option {
	return func(s *v1alpha1.InferenceStack) {
		workload(s).PodDisruptionBudget = &v1alpha1.PodDisruptionBudgetSpec{MinAvailable: minAvailable, MaxUnavailable: maxUnavailable}
	}
}

// WithEnv adds an environment variable to the server container.
func WithEnv(name, value string) Option {
	return func(s *v1alpha1.InferenceStack) {
		workload(s).Env = append(workload(s).Env, corev1.EnvVar{Name: name, Value: value})
	}
}

// WithResources sets the server container's resources.
func WithResources(r corev1.ResourceRequirements) Option {
	return func(s *v1alpha1.InferenceStack) { workload(s).Resources = &r }
}

// WithEnvFrom adds an environment variable read from key of Secret secret.
func WithEnvFrom(name, secret, key string) Option {
	return func(s *v1alpha1.InferenceStack) {
		workload(s).Env = append(workload(s).Env, corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: SecretKey(secret, key)}})
	}
}

// WithExpose sets networking.expose.
func WithExpose(expose bool) Option {
	return func(s *v1alpha1.InferenceStack) { networking(s).Expose = ptr.To(expose) }
}

// WithWorkers sets v1alpha2's workload.workers, carried in the annotation
// v1alpha2.SpecAnnotation.
func WithWorkers(n int32) Option {
	return func(s *v1alpha1.InferenceStack) { v1alpha2Workload(s, "workers", n) }
}

// WithPodOverrides sets v1alpha2's workload.podOverrides, carried in the
// annotation v1alpha2.SpecAnnotation.
func WithPodOverrides(o v1alpha2.PodOverrides) Option {
	return func(s *v1alpha1.InferenceStack) { v1alpha2Workload(s, "podOverrides", o) }
}

// v1alpha2Workload sets workload.<key> in the stack's v1alpha2 spec
// annotation, keeping what it holds.
func v1alpha2Workload(s *v1alpha1.InferenceStack, key string, value any) {
	patch := map[string]any{}
	if a := s.Annotations[v1alpha2.SpecAnnotation]; a != "" {
		if err := json.Unmarshal([]byte(a), &patch); err != nil {
			panic(err)
		}
	}
	w, _ := patch["workload"].(map[string]any)
	if w == nil {
		w = map[string]any{}
	}
	w[key] = value
	patch["workload"] = w
	data, err := json.Marshal(patch)
	if err != nil {
		panic(err)
	}
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Annotations[v1alpha2.SpecAnnotation] = string(data)
}

// Hub is stack as the reconciler and the builders see it: converted to the
// hub version (v1alpha2) with the conversion the operator reads v1alpha1
// stacks through.
func Hub(stack *v1alpha1.InferenceStack) *v1alpha2.InferenceStack {
	hub := &v1alpha2.InferenceStack{}
	if err := stack.ConvertTo(hub); err != nil {
		panic(err)
	}
	return hub
}

// HubFromYAML is the InferenceStack of a manifest of either version (strict:
// a field neither has fails the test), as the operator sees it: in the hub
// version.
func HubFromYAML(t testing.TB, data []byte) *v1alpha2.InferenceStack {
	t.Helper()
	var meta metav1.TypeMeta
	if err := yaml.Unmarshal(data, &meta); err != nil {
		t.Fatal(err)
	}
	if meta.APIVersion == v1alpha2.GroupVersion.String() {
		var hub v1alpha2.InferenceStack
		if err := yaml.UnmarshalStrict(data, &hub); err != nil {
			t.Fatal(err)
		}
		return &hub
	}
	var stack v1alpha1.InferenceStack
	if err := yaml.UnmarshalStrict(data, &stack); err != nil {
		t.Fatal(err)
	}
	return Hub(&stack)
}
