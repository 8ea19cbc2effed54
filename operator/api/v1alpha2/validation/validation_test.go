package validation_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/api/v1alpha2/validation"
)

func hub(t *testing.T, doc string) *v1alpha2.InferenceStack {
	t.Helper()
	var s v1alpha2.InferenceStack
	require.NoError(t, yaml.UnmarshalStrict([]byte(doc), &s))
	return &s
}

// TestValidSamples: every v1alpha2 sample passes.
func TestValidSamples(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "..", "config", "samples", "inferencestack_v1alpha2_*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		require.Empty(t, validation.Validate(hub(t, string(data))), f)
	}
}

// TestValidate: the schema's rules, the list types and the CEL rules of
// v1alpha2 (among them the rules v1alpha1 lacks), each at the v1alpha2
// field path with the CRD's message.
func TestValidate(t *testing.T) {
	tests := []struct {
		name, spec, want string
	}{
		{"CEL: allowedFrom and a LoadBalancer", `networking: {expose: true, allowedFrom: {namespaces: [clients]}}`,
			"spec.networking: Invalid value: allowedFrom admits pods of namespaces, and a LoadBalancer (expose: true) serves clients outside the cluster"},
		{"CEL: the operator's client certificate without caBundle", `networking: {tls: {enabled: true, secretName: tls, operatorClientSecretName: c}}`,
			"spec.networking.tls: Invalid value: operatorClientSecretName is the operator's client certificate for mutual TLS: it needs caBundle"},
		{"pattern: an Ingress host that is an IP", `networking: {ingress: {host: "10.0.0.1"}}`, "spec.networking.ingress.host: Invalid value: \"10.0.0.1\": spec.networking.ingress.host in body should match"},
		{"CEL: one host for the Ingress and the Route", `networking: {ingress: {host: a.example.com}, route: {host: a.example.com}}`, "ingress.host and route.host are the same host"},
		{"minimum: no workers", `workload: {workers: 0}`, "spec.workload.workers: Invalid value: 0: spec.workload.workers in body should be greater than or equal to 1"},
		{"CEL: a hostPath volume", `workload: {podOverrides: {volumes: [{name: h, hostPath: {path: /}}]}}`, "spec.workload.podOverrides.volumes: Invalid value: podOverrides.volumes: the server pod runs under the restricted pod security standard"},
		{"CEL: workers with a command", `workload: {workers: 2, podOverrides: {command: [sh]}}`, "workers runs the server with the operator's uvicorn command"},
		{"enum: a metric of gpu", `scaling: {autoscaling: {maxReplicas: 2, metrics: [{resource: gpu, averageUtilization: 50}]}}`, "spec.scaling.autoscaling.metrics[0].resource: Unsupported value: \"gpu\""},
		{"list map: cpu twice", `scaling: {autoscaling: {maxReplicas: 2, metrics: [{resource: cpu, averageUtilization: 50}, {resource: cpu, averageUtilization: 60}]}}`,
			"spec.scaling.autoscaling.metrics[1]: Duplicate value: {\"resource\":\"cpu\"}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := hub(t, `{metadata: {name: s, namespace: ns}, spec: {distribution: {name: starter}, storage: {kv: {type: redis, endpoint: "r:6379"}}, cache: {enabled: true}, `+tt.spec+`}}`)
			errs := validation.Validate(s)
			require.NotEmpty(t, errs)
			require.Contains(t, errs.ToAggregate().Error(), tt.want)
		})
	}
	require.Empty(t, validation.Validate(hub(t, `{metadata: {name: s}, spec: {distribution: {name: starter}, storage: {kv: {type: redis, endpoint: "r:6379"}}, cache: {enabled: true},
		scaling: {autoscaling: {maxReplicas: 2, metrics: [{resource: memory, averageUtilization: 60}]}}}}`)), "a valid stack")
	require.Contains(t, validation.Validate(hub(t, `{metadata: {name: A_stack}, spec: {distribution: {name: starter}}}`)).ToAggregate().Error(),
		"metadata.name must start with a letter", "the rule on the name")
}

// TestValidateWhatTheAnnotationCarries: fields a v1alpha1 client wrote in
// the spec annotation, which the API server saw only as a string, are
// refused by the same rules once converted, at their v1alpha2 path.
func TestValidateWhatTheAnnotationCarries(t *testing.T) {
	var v1 v1alpha1.InferenceStack
	require.NoError(t, yaml.UnmarshalStrict([]byte(`{metadata: {name: s, namespace: ns, annotations: {inferencestack.io/v1alpha2-spec: '{"networking":{"allowedFrom":{"namespaces":["a"]}},"workload":{"podOverrides":{"volumes":[{"name":"host","hostPath":{"path":"/"}}]}}}'}},
		spec: {distribution: {name: starter}, networking: {expose: true}}}`), &v1))
	var h v1alpha2.InferenceStack
	require.NoError(t, v1.ConvertTo(&h))
	msg := validation.Validate(&h).ToAggregate().Error()
	require.Contains(t, msg, "spec.networking: Invalid value: allowedFrom admits pods of namespaces")
	require.Contains(t, msg, "spec.workload.podOverrides.volumes: Invalid value: podOverrides.volumes: the server pod runs under the restricted pod security standard")
}

// BenchmarkValidate is what the operator's check of a stack read through
// v1alpha1 costs per reconcile (operator/internal/controller specStep), on
// each v1alpha2 sample: go test -run '^$' -bench Validate -benchmem.
func BenchmarkValidate(b *testing.B) {
	files, err := filepath.Glob(filepath.Join("..", "..", "..", "config", "samples", "inferencestack_v1alpha2_*.yaml"))
	require.NoError(b, err)
	var stacks []*v1alpha2.InferenceStack
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(b, err)
		var s v1alpha2.InferenceStack
		require.NoError(b, yaml.UnmarshalStrict(data, &s))
		stacks = append(stacks, &s)
	}
	require.Empty(b, validation.Validate(stacks[0]))
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if errs := validation.Validate(stacks[i%len(stacks)]); len(errs) > 0 {
			b.Fatal(errs)
		}
	}
}
