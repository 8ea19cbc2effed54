package v1alpha1_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	"github.com/inferencestack/inferencestack/test/testenv"
	"github.com/inferencestack/inferencestack/test/testutil"
)

var env *testenv.Env

const namespace = "validation"

func TestMain(m *testing.M) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		panic(err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		panic(err)
	}
	testenv.RunMain(m, testenv.Options{
		CRDDirectoryPaths: []string{filepath.Join("..", "..", "config", "crd", "bases")},
		Scheme:            scheme,
	}, &env)
}

func setup(t *testing.T) (context.Context, client.Client) {
	t.Helper()
	ctx := t.Context()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if err := env.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	return ctx, env.Client
}

// stack is a fixture in the test namespace.
func stack(name string, opts ...testutil.Option) *v1alpha1.InferenceStack {
	return testutil.Stack(name, append([]testutil.Option{testutil.WithNamespace(namespace)}, opts...)...)
}

func intOrString(s string) *intstr.IntOrString {
	v := intstr.Parse(s)
	return &v
}

// TestInvalidStacksAreRefused: every rule of the API is enforced by the API
// server itself, with a message that says what to change.
func TestInvalidStacksAreRefused(t *testing.T) {
	ctx, c := setup(t)
	vllm := testutil.Provider("vllm", testutil.WithEndpoint("http://vllm:8000/v1"))
	tests := []struct {
		name  string
		stack *v1alpha1.InferenceStack
		want  string
	}{
		{
			name:  "two replicas with local SQLite state",
			stack: stack("a", testutil.WithReplicas(2)),
			want:  "more than one server replica (workload.replicas > 1 or workload.autoscaling) needs state shared by every pod: set storage.kv to redis and storage.sql to postgres (or cache.enabled)",
		},
		{
			name:  "autoscaling with redis but SQLite SQL stores",
			stack: stack("a", testutil.WithAutoscaling(1, 3, 80), testutil.WithKV(v1alpha1.KVStoreSpec{Type: v1alpha1.KVStoreRedis, Endpoint: "redis:6379"})),
			want:  "more than one server replica",
		},
		{
			name:  "distribution name and image",
			stack: stack("a", testutil.WithSpec(func(s *v1alpha1.InferenceStackSpec) { s.Distribution.Image = "quay.io/x/y:1" })),
			want:  "set exactly one of distribution.name or distribution.image",
		},
		{
			name:  "no distribution",
			stack: stack("a", testutil.WithSpec(func(s *v1alpha1.InferenceStackSpec) { s.Distribution = v1alpha1.DistributionSpec{} })),
			want:  "set exactly one of distribution.name or distribution.image",
		},
		{
			name:  "unknown distribution",
			stack: stack("a", testutil.WithDistribution("together")),
			want:  `spec.distribution.name: Unsupported value: "together"`,
		},
		{
			name:  "image with a space",
			stack: stack("a", testutil.WithImage("quay.io/x/y :1"), testutil.WithProviders("inference", vllm)),
			want:  "distribution.image must be an image reference without spaces",
		},
		{
			name:  "custom image without providers",
			stack: stack("a", testutil.WithImage("quay.io/x/y:1")),
			want:  "a custom distribution.image has no embedded base config: set providers or overrideConfig",
		},
		{
			name:  "two providers, one without id",
			stack: stack("a", testutil.WithProviders("inference", testutil.Provider("vllm", testutil.WithID("a")), testutil.Provider("ollama"))),
			want:  "id is required on every provider when an API type lists more than one",
		},
		{
			name:  "duplicate provider ids",
			stack: stack("a", testutil.WithProviders("vectorIo", testutil.Provider("pgvector", testutil.WithID("db")), testutil.Provider("chromadb", testutil.WithID("db")))),
			want:  "provider ids must be unique within an API type",
		},
		{
			name:  "provider id with capitals",
			stack: stack("a", testutil.WithProviders("inference", testutil.Provider("vllm", testutil.WithID("My_VLLM")))),
			want:  "spec.providers.inference[0].id: Invalid value: \"My_VLLM\": spec.providers.inference[0].id in body should match",
		},
		{
			name:  "endpoint not http",
			stack: stack("a", testutil.WithProviders("inference", testutil.Provider("vllm", testutil.WithEndpoint("ftp://vllm:21")))),
			want:  "endpoint must be an http:// or https:// URL",
		},
		{
			name:  "secretRefs key not a config key",
			stack: stack("a", testutil.WithProviders("vectorIo", testutil.Provider("pgvector", testutil.WithSecretRef("DB-Password", "pg", "password")))),
			want:  "secretRefs keys are provider config keys",
		},
		{
			name:  "model registered twice",
			stack: stack("a", testutil.WithModel("llama", "ollama"), testutil.WithModel("llama", "openai")),
			want:  `spec.resources.models[1]: Duplicate value: {"name":"llama"}`,
		},
		{
			name:  "embedding dimension on an llm",
			stack: stack("a", testutil.WithModelSpec(v1alpha1.ModelSpec{Name: "m", ModelType: v1alpha1.ModelTypeLLM, EmbeddingDimension: ptr.To[int32](384)})),
			want:  "embeddingDimension is only valid for modelType embedding",
		},
		{
			name:  "embedding model without dimension",
			stack: stack("a", testutil.WithModelSpec(v1alpha1.ModelSpec{Name: "m", ModelType: v1alpha1.ModelTypeEmbedding})),
			want:  "an embedding model needs embeddingDimension",
		},
		{
			name: "mcp endpoint not a URL",
			stack: stack("a", testutil.WithSpec(func(s *v1alpha1.InferenceStackSpec) {
				s.Resources = &v1alpha1.ResourcesSpec{Tools: []v1alpha1.ToolGroupSpec{{Name: "mcp::x", MCPEndpoint: "docs-mcp:8000"}}}
			})),
			want: "mcpEndpoint must be an http:// or https:// URL",
		},
		{
			name:  "redis endpoint on a sqlite kv store",
			stack: stack("a", testutil.WithKV(v1alpha1.KVStoreSpec{Type: v1alpha1.KVStoreSQLite, Endpoint: "redis:6379"})),
			want:  "endpoint and password are only valid for a kv store of type redis",
		},
		{
			name:  "redis password on a sqlite kv store",
			stack: stack("a", testutil.WithKV(v1alpha1.KVStoreSpec{Type: v1alpha1.KVStoreSQLite, Password: testutil.SecretKey("redis", "password")})),
			want:  "endpoint and password are only valid for a kv store of type redis",
		},
		{
			name:  "redis without endpoint",
			stack: stack("a", testutil.WithKV(v1alpha1.KVStoreSpec{Type: v1alpha1.KVStoreRedis})),
			want:  "a kv store of type redis needs an endpoint",
		},
		{
			name:  "redis endpoint not host:port",
			stack: stack("a", testutil.WithKV(v1alpha1.KVStoreSpec{Type: v1alpha1.KVStoreRedis, Endpoint: "redis://cache"})),
			want:  "spec.storage.kv.endpoint in body should match",
		},
		{
			name:  "connection string on a sqlite sql store",
			stack: stack("a", testutil.WithSQL(v1alpha1.SQLStoreSpec{Type: v1alpha1.SQLStoreSQLite, ConnectionString: testutil.SecretKey("pg", "uri")})),
			want:  "connectionString is only valid for a sql store of type postgres",
		},
		{
			name:  "postgres without connection string",
			stack: stack("a", testutil.WithSQL(v1alpha1.SQLStoreSpec{Type: v1alpha1.SQLStorePostgres})),
			want:  "a sql store of type postgres needs connectionString",
		},
		{
			name:  "cache and external postgres",
			stack: stack("a", testutil.WithCache(), testutil.WithSQL(v1alpha1.SQLStoreSpec{Type: v1alpha1.SQLStorePostgres, ConnectionString: testutil.SecretKey("pg", "uri")})),
			want:  "cache.enabled runs an operator-managed PostgreSQL: it cannot be combined with an external storage.sql of type postgres",
		},
		{
			name: "cache of size zero",
			stack: stack("a", testutil.WithSpec(func(s *v1alpha1.InferenceStackSpec) {
				s.Cache = &v1alpha1.CacheSpec{Enabled: true, StorageSize: ptr.To(resource.MustParse("0"))}
			})),
			want: "cache.storageSize must be greater than zero",
		},
		{
			name:  "postgres-demo without PostgreSQL",
			stack: stack("a", testutil.WithDistribution(v1alpha1.DistributionPostgresDemo)),
			want:  "distribution postgres-demo keeps its stores in PostgreSQL",
		},
		{
			name:  "unknown API disabled",
			stack: stack("a", testutil.WithDisabled("memory")),
			want:  `spec.disabled[0]: Unsupported value: "memory"`,
		},
		{
			name:  "API disabled twice",
			stack: stack("a", testutil.WithDisabled(v1alpha1.APISafety, v1alpha1.APISafety)),
			want:  `spec.disabled[1]: Duplicate value: "safety"`,
		},
		{
			name:  "providers of a disabled API",
			stack: stack("a", testutil.WithDisabled(v1alpha1.APISafety), testutil.WithProviders("safety", testutil.Provider("nvidia"))),
			want:  "providers.safety is set but the safety API is disabled",
		},
		{
			name:  "models with inference disabled",
			stack: stack("a", testutil.WithDisabled(v1alpha1.APIInference), testutil.WithModel("llama", "")),
			want:  "resources.models need the inference API: remove inference from disabled",
		},
		{
			name:  "tools with tool_runtime disabled",
			stack: stack("a", testutil.WithDisabled(v1alpha1.APIToolRuntime), testutil.WithTool("builtin::websearch", "")),
			want:  "resources.tools need the tool_runtime API: remove tool_runtime from disabled",
		},
		{
			name:  "override with providers",
			stack: stack("a", testutil.WithOverrideConfig("cfg"), testutil.WithProviders("inference", vllm)),
			want:  "overrideConfig holds a complete run config: it cannot be combined with providers, resources, storage or disabled",
		},
		{
			name:  "override with disabled",
			stack: stack("a", testutil.WithOverrideConfig("cfg"), testutil.WithDisabled(v1alpha1.APIEval)),
			want:  "overrideConfig holds a complete run config",
		},
		{
			name:  "override with auth",
			stack: stack("a", testutil.WithOverrideConfig("cfg"), testutil.WithKubernetesAuth()),
			want:  "auth is written into the generated run config",
		},
		{
			name:  "port out of range",
			stack: stack("a", testutil.WithPort(70000)),
			want:  "spec.networking.port: Invalid value: 70000: spec.networking.port in body should be less than or equal to 65535",
		},
		{
			name:  "tls secret while tls is off",
			stack: stack("a", testutil.WithTLS(v1alpha1.TLSSpec{SecretName: "tls"})),
			want:  "secretName and caBundle are only valid when tls.enabled is true",
		},
		{
			name:  "tls on without a secret",
			stack: stack("a", testutil.WithTLS(v1alpha1.TLSSpec{Enabled: true})),
			want:  "tls.enabled needs secretName",
		},
		{
			name:  "auth without a provider",
			stack: stack("a", testutil.WithSpec(func(s *v1alpha1.InferenceStackSpec) { s.Auth = &v1alpha1.AuthSpec{} })),
			want:  "auth needs a provider: set auth.kubernetes",
		},
		{
			name:  "negative replicas",
			stack: stack("a", testutil.WithReplicas(-1)),
			want:  "spec.workload.replicas in body should be greater than or equal to 0",
		},
		{
			name:  "autoscaling max below min",
			stack: stack("a", testutil.WithAutoscaling(3, 2, 80)),
			want:  "autoscaling.maxReplicas must be greater than or equal to minReplicas",
		},
		{
			name:  "autoscaling min zero",
			stack: stack("a", testutil.WithAutoscaling(0, 2, 80)),
			want:  "spec.workload.autoscaling.minReplicas in body should be greater than or equal to 1",
		},
		{
			name:  "autoscaling target above 100",
			stack: stack("a", testutil.WithAutoscaling(1, 2, 101)),
			want:  "spec.workload.autoscaling.targetCPUUtilizationPercentage in body should be less than or equal to 100",
		},
		{
			name:  "replicas and autoscaling",
			stack: stack("a", testutil.WithReplicas(2), testutil.WithAutoscaling(1, 3, 80)),
			want:  "replicas and autoscaling are mutually exclusive",
		},
		{
			name:  "pdb with both bounds",
			stack: stack("a", testutil.WithPodDisruptionBudget(intOrString("1"), intOrString("50%"))),
			want:  "podDisruptionBudget needs exactly one of minAvailable or maxUnavailable",
		},
		{
			name:  "pdb with no bound",
			stack: stack("a", testutil.WithPodDisruptionBudget(nil, nil)),
			want:  "podDisruptionBudget needs exactly one of minAvailable or maxUnavailable",
		},
		{
			name:  "apiKey without a Secret name",
			stack: stack("a", testutil.WithProviders("inference", testutil.Provider("vllm", testutil.WithAPIKey("", "token")))),
			want:  "apiKey needs name and key",
		},
		{
			name:  "apiKey without a key",
			stack: stack("a", testutil.WithProviders("inference", testutil.Provider("vllm", testutil.WithAPIKey("vllm-key", "")))),
			want:  "apiKey needs name and key",
		},
		{
			name:  "secretRefs entry without a Secret name",
			stack: stack("a", testutil.WithProviders("vectorIo", testutil.Provider("pgvector", testutil.WithSecretRef("password", "", "password")))),
			want:  "every secretRefs entry needs name and key",
		},
		{
			name:  "secretRefs entry without a key",
			stack: stack("a", testutil.WithProviders("vectorIo", testutil.Provider("pgvector", testutil.WithSecretRef("password", "pg", "")))),
			want:  "every secretRefs entry needs name and key",
		},
		{
			name:  "redis password without a Secret name",
			stack: stack("a", testutil.WithKV(v1alpha1.KVStoreSpec{Type: v1alpha1.KVStoreRedis, Endpoint: "redis:6379", Password: testutil.SecretKey("", "password")})),
			want:  "password needs name and key",
		},
		{
			name:  "connection string without a key",
			stack: stack("a", testutil.WithSQL(v1alpha1.SQLStoreSpec{Type: v1alpha1.SQLStorePostgres, ConnectionString: testutil.SecretKey("pg", "")})),
			want:  "connectionString needs name and key",
		},
		{
			name:  "env from a Secret without a name",
			stack: stack("a", testutil.WithEnvFrom("TOKEN", "", "token")),
			want:  "env valueFrom.secretKeyRef needs name and key",
		},
		{
			name: "env from a ConfigMap without a key",
			stack: stack("a", testutil.WithSpec(func(s *v1alpha1.InferenceStackSpec) {
				s.Workload = &v1alpha1.WorkloadSpec{Env: []corev1.EnvVar{{Name: "A", ValueFrom: &corev1.EnvVarSource{
					ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}}}}}
			})),
			want: "env valueFrom.configMapKeyRef needs name and key",
		},
		{
			name:  "name too long for derived names",
			stack: stack(strings.Repeat("a", 46)),
			want:  "metadata.name must start with a letter, hold only lowercase letters, digits and '-', and be at most 45 characters",
		},
		{
			name:  "name starting with a digit",
			stack: stack("1stack"),
			want:  "metadata.name must start with a letter",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := c.Create(ctx, tc.stack)
			require.Error(t, err, "the API server accepted an invalid InferenceStack")
			require.Truef(t, apierrors.IsInvalid(err), "want an Invalid error, got %v", err)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// TestInvalidManifestsAreRefused: what a manifest can say but a Go client
// cannot send (its types omit empty lists, maps and strings) is refused
// too: an empty list, map or string is never taken for an unset one.
func TestInvalidManifestsAreRefused(t *testing.T) {
	ctx, c := setup(t)
	tests := []struct {
		name string
		spec string
		want string
	}{
		{name: "empty disabled", spec: `{disabled: []}`, want: "spec.disabled: Invalid value: 0: spec.disabled in body should have at least 1 items"},
		{
			name: "empty provider list",
			spec: `{providers: {inference: []}}`,
			want: "spec.providers.inference: Invalid value: 0: spec.providers.inference in body should have at least 1 items",
		},
		{
			name: "empty secretRefs",
			spec: `{providers: {vectorIo: [{provider: pgvector, secretRefs: {}}]}}`,
			want: "spec.providers.vectorIo[0].secretRefs: Invalid value: 0: spec.providers.vectorIo[0].secretRefs in body should have at least 1 properties",
		},
		{
			name: "apiKey without name",
			spec: `{providers: {inference: [{provider: vllm, apiKey: {key: token}}]}}`,
			want: "apiKey needs name and key",
		},
		{name: "empty models", spec: `{resources: {models: []}}`, want: "spec.resources.models in body should have at least 1 items"},
		{name: "empty shields", spec: `{resources: {shields: []}}`, want: "spec.resources.shields in body should have at least 1 items"},
		{name: "empty tools", spec: `{resources: {tools: []}}`, want: "spec.resources.tools in body should have at least 1 items"},
		{name: "model provider empty", spec: `{resources: {models: [{name: m, provider: ""}]}}`, want: "spec.resources.models[0].provider in body should be at least 1 chars long"},
		{name: "model providerModelId empty", spec: `{resources: {models: [{name: m, providerModelId: ""}]}}`, want: "spec.resources.models[0].providerModelId in body should be at least 1 chars long"},
		{name: "shield provider empty", spec: `{resources: {shields: [{name: s, provider: ""}]}}`, want: "spec.resources.shields[0].provider in body should be at least 1 chars long"},
		{name: "shield providerShieldId empty", spec: `{resources: {shields: [{name: s, providerShieldId: ""}]}}`, want: "spec.resources.shields[0].providerShieldId in body should be at least 1 chars long"},
		{name: "tool provider empty", spec: `{resources: {tools: [{name: t, provider: ""}]}}`, want: "spec.resources.tools[0].provider in body should be at least 1 chars long"},
		{
			name: "tls secretName empty",
			spec: `{networking: {tls: {enabled: true, secretName: ""}}}`,
			want: "spec.networking.tls.secretName in body should be at least 1 chars long",
		},
		{
			name: "caBundle key empty",
			spec: `{networking: {tls: {enabled: true, secretName: tls, caBundle: {configMapName: ca, key: ""}}}}`,
			want: "spec.networking.tls.caBundle.key in body should be at least 1 chars long",
		},
		{
			name: "override key empty",
			spec: `{overrideConfig: {configMapName: cfg, key: ""}}`,
			want: "spec.overrideConfig.key in body should be at least 1 chars long",
		},
		{name: "empty allowedGroups", spec: `{auth: {kubernetes: {allowedGroups: []}}}`, want: "spec.auth.kubernetes.allowedGroups in body should have at least 1 items"},
		{name: "empty env", spec: `{workload: {env: []}}`, want: "spec.workload.env in body should have at least 1 items"},
		{name: "empty tolerations", spec: `{workload: {tolerations: []}}`, want: "spec.workload.tolerations in body should have at least 1 items"},
		{
			name: "empty topologySpreadConstraints",
			spec: `{workload: {topologySpreadConstraints: []}}`,
			want: "spec.workload.topologySpreadConstraints in body should have at least 1 items",
		},
		{name: "expose not a boolean", spec: `{networking: {expose: "yes"}}`, want: `spec.networking.expose: Invalid value: "string": spec.networking.expose in body must be of type boolean`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := c.Create(ctx, manifest(t, "a", tc.spec))
			require.Error(t, err, "the API server accepted an invalid InferenceStack")
			require.Truef(t, apierrors.IsInvalid(err), "want an Invalid error, got %v", err)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// manifest is an InferenceStack as a user writes it: the starter
// distribution plus the fields of spec (YAML), sent as is.
func manifest(t *testing.T, name, spec string) *unstructured.Unstructured {
	t.Helper()
	var fields map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(spec), &fields))
	fields["distribution"] = map[string]any{"name": "starter"}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.GroupVersion.String(),
		"kind":       "InferenceStack",
		"metadata":   map[string]any{"name": name, "namespace": namespace},
		"spec":       fields,
	}}
	return u
}

// TestExposeKeepsFalseApartFromUnset: networking.expose is a pointer, so
// the false of a manifest reaches Go clients as false, not as unset, and
// existing manifests (true, false, no expose) stay valid.
func TestExposeKeepsFalseApartFromUnset(t *testing.T) {
	ctx, c := setup(t)
	tests := []struct {
		name string
		spec string
		want *bool
	}{
		{name: "expose-true", spec: `{networking: {expose: true}}`, want: ptr.To(true)},
		{name: "expose-false", spec: `{networking: {expose: false}}`, want: ptr.To(false)},
		{name: "expose-unset", spec: `{networking: {port: 8000}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, c.Create(ctx, manifest(t, tc.name, tc.spec)))
			got := &v1alpha1.InferenceStack{}
			require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: tc.name}, got))
			require.Equal(t, tc.want, got.Spec.Networking.Expose)
		})
	}
}

// TestValidStacksAreAccepted: edge cases that must stay legal.
func TestValidStacksAreAccepted(t *testing.T) {
	ctx, c := setup(t)
	tests := []struct {
		name  string
		stack *v1alpha1.InferenceStack
	}{
		{name: "defaults only", stack: stack("plain")},
		{name: "one provider needs no id", stack: stack("one-provider", testutil.WithProviders("inference", testutil.Provider("vllm", testutil.WithEndpoint("https://vllm.example.com/v1"))))},
		{name: "scaled to zero", stack: stack("zero", testutil.WithReplicas(0))},
		{name: "two replicas with shared state", stack: stack("shared", testutil.WithReplicas(2), testutil.WithCache(),
			testutil.WithKV(v1alpha1.KVStoreSpec{Type: v1alpha1.KVStoreRedis, Endpoint: "redis.cache.svc:6379"}))},
		{name: "name of 45 characters", stack: stack("a" + strings.Repeat("b", 44))},
		{name: "tls with a client CA", stack: stack("mtls", testutil.WithTLS(v1alpha1.TLSSpec{Enabled: true, SecretName: "tls", CABundle: &v1alpha1.CABundleSource{ConfigMapName: "ca"}}))},
		{name: "redis with password", stack: stack("redis", testutil.WithKV(v1alpha1.KVStoreSpec{Type: v1alpha1.KVStoreRedis, Endpoint: "redis.cache.svc:6379", Password: testutil.SecretKey("redis", "password")}))},
		{name: "pdb as a percentage", stack: stack("pdb", testutil.WithPodDisruptionBudget(nil, intOrString("25%")))},
		{name: "settings are free-form", stack: stack("settings", testutil.WithProviders("inference", testutil.Provider("vllm", testutil.WithSettings(`{"max_tokens": 4096, "tls_verify": false, "extra": {"a": [1, 2]}}`))))},
		{name: "postgres-demo with cache", stack: stack("pg", testutil.WithDistribution(v1alpha1.DistributionPostgresDemo), testutil.WithCache())},
		{name: "storage class empty: no dynamic provisioning", stack: stack("static-pv", testutil.WithSpec(func(s *v1alpha1.InferenceStackSpec) {
			s.Cache = &v1alpha1.CacheSpec{Enabled: true, StorageClassName: ptr.To("")}
		}))},
	}
	for i := range testutil.FeatureVariants {
		tests = append(tests, struct {
			name  string
			stack *v1alpha1.InferenceStack
		}{name: fmt.Sprintf("feature mix %d", i), stack: testutil.FeatureStack(namespace, fmt.Sprintf("feature-%d", i), i)})
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, c.Create(ctx, tc.stack))
		})
	}
}

// TestDefaults: the API server fills the documented defaults.
func TestDefaults(t *testing.T) {
	ctx, c := setup(t)
	s := stack("defaults",
		testutil.WithModelSpec(v1alpha1.ModelSpec{Name: "m"}),
		testutil.WithSpec(func(s *v1alpha1.InferenceStackSpec) {
			s.Networking = &v1alpha1.NetworkingSpec{TLS: &v1alpha1.TLSSpec{}}
			s.Cache = &v1alpha1.CacheSpec{Enabled: true}
			s.OverrideConfig = nil
		}),
		testutil.WithAutoscaling(1, 2, 80),
		testutil.WithKV(v1alpha1.KVStoreSpec{Type: v1alpha1.KVStoreRedis, Endpoint: "redis:6379"}),
	)
	s.Spec.Workload.Autoscaling.MinReplicas = nil
	s.Spec.Workload.Autoscaling.TargetCPUUtilizationPercentage = nil
	require.NoError(t, c.Create(ctx, s))
	got := &v1alpha1.InferenceStack{}
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(s), got))
	require.Equal(t, int32(8321), got.Spec.Networking.Port)
	require.False(t, got.Spec.Networking.TLS.Enabled)
	require.Equal(t, v1alpha1.ModelTypeLLM, got.Spec.Resources.Models[0].ModelType)
	require.Equal(t, ptr.To(true), got.Spec.Cache.RetainOnDelete)
	require.True(t, resource.MustParse("1Gi").Equal(*got.Spec.Cache.StorageSize))
	require.Equal(t, ptr.To[int32](1), got.Spec.Workload.Autoscaling.MinReplicas)
	require.Equal(t, ptr.To[int32](80), got.Spec.Workload.Autoscaling.TargetCPUUtilizationPercentage)
}

// TestSamplesAreAccepted: every sample the kustomization lists is a valid
// InferenceStack.
func TestSamplesAreAccepted(t *testing.T) {
	ctx, c := setup(t)
	dir := filepath.Join("..", "..", "config", "samples")
	data, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	require.NoError(t, err)
	var k struct {
		Resources []string `json:"resources"`
	}
	require.NoError(t, yaml.UnmarshalStrict(data, &k))
	require.NotEmpty(t, k.Resources)
	entries, err := filepath.Glob(filepath.Join(dir, "inferencestack_v1alpha1_*.yaml"))
	require.NoError(t, err)
	require.Len(t, k.Resources, len(entries), "every sample file is listed in kustomization.yaml")
	distributions := map[v1alpha1.DistributionName]bool{}
	for _, name := range k.Resources {
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(dir, name))
			require.NoError(t, err)
			var s v1alpha1.InferenceStack
			require.NoError(t, yaml.UnmarshalStrict(data, &s), "sample %s has unknown fields", name)
			distributions[s.Spec.Distribution.Name] = true
			s.Namespace = namespace
			s.Name = fmt.Sprintf("sample-%s", s.Name)
			require.NoError(t, c.Create(ctx, &s))
		})
	}
	for _, d := range v1alpha1.DistributionNames {
		require.True(t, distributions[d], "no sample for distribution %s", d)
	}
}

// TestSettingsArePreserved: free-form provider settings survive the API
// server (no pruning), nested values included.
func TestSettingsArePreserved(t *testing.T) {
	ctx, c := setup(t)
	settings := `{"extra":{"a":[1,2],"b":"c"},"max_tokens":4096,"tls_verify":false}`
	s := stack("kept-settings", testutil.WithProviders("inference", testutil.Provider("vllm", testutil.WithSettings(settings))))
	require.NoError(t, c.Create(ctx, s))
	got := &v1alpha1.InferenceStack{}
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(s), got))
	require.JSONEq(t, settings, string(got.Spec.Providers.Inference[0].Settings.Raw))
}

// TestUpdatesAreChecked: rules that compare a change with the stored object.
func TestUpdatesAreChecked(t *testing.T) {
	ctx, c := setup(t)
	tests := []struct {
		name   string
		change func(*v1alpha1.CacheSpec)
		want   string
	}{
		{
			name:   "cache volume shrinks",
			change: func(c *v1alpha1.CacheSpec) { c.StorageSize = ptr.To(resource.MustParse("1Gi")) },
			want:   "cache.storageSize cannot shrink",
		},
		{
			name:   "cache storage class changes",
			change: func(c *v1alpha1.CacheSpec) { c.StorageClassName = ptr.To("slow") },
			want:   "cache.storageClassName cannot change",
		},
		{
			name:   "cache volume grows",
			change: func(c *v1alpha1.CacheSpec) { c.StorageSize = ptr.To(resource.MustParse("10Gi")) },
		},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := stack(fmt.Sprintf("update-%d", i), testutil.WithSpec(func(s *v1alpha1.InferenceStackSpec) {
				s.Cache = &v1alpha1.CacheSpec{Enabled: true, StorageSize: ptr.To(resource.MustParse("5Gi")), StorageClassName: ptr.To("fast")}
			}))
			require.NoError(t, c.Create(ctx, s))
			tc.change(s.Spec.Cache)
			err := c.Update(ctx, s)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.Truef(t, apierrors.IsInvalid(err), "want an Invalid error, got %v", err)
			require.ErrorContains(t, err, tc.want)
		})
	}
}
