package validation

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
)

// ruleCorpus is every v1alpha2 sample, specs that break rules of most
// kinds (a rule of the spec, of a nested object, of a list, of a list's
// items, of a map's values, of the name) alone and on every sample, and
// every pair of samples' specs merged.
func ruleCorpus(t *testing.T) []*v1alpha2.InferenceStack {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "..", "..", "config", "samples", "inferencestack_v1alpha2_*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	var specs []map[string]any
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		var doc map[string]any
		require.NoError(t, yaml.Unmarshal(data, &doc))
		specs = append(specs, doc["spec"].(map[string]any))
	}
	breaking := []string{
		`{networking: {expose: true, allowedFrom: {namespaces: [clients]}}}`,
		`{networking: {tls: {enabled: true, secretName: tls, operatorClientSecretName: c}}}`,
		`{networking: {ingress: {host: a.example.com}, route: {host: a.example.com}}}`,
		`{workload: {podOverrides: {volumes: [{name: h, hostPath: {path: /}}]}}}`,
		`{workload: {workers: 2, podOverrides: {command: [sh]}}}`,
		`{scaling: {autoscaling: {maxReplicas: 2, metrics: [{resource: cpu, averageUtilization: 50}, {resource: memory, averageUtilization: 60}]}}}`,
		`{scaling: {replicas: 3, autoscaling: {minReplicas: 5, maxReplicas: 2}}}`,
		`{storage: {kv: {type: redis}}, cache: {enabled: true}}`,
		`{distribution: {name: starter, image: "quay.io/x/y:1"}}`,
		`{providers: {inference: [{id: a, provider: ollama, endpoint: "ftp://x"}, {id: a, provider: vllm, endpoint: "http://v:8000"}]}}`,
		`{providers: {safety: [{provider: llama-guard, apiKey: {name: "", key: k}}]}}`,
		`{providers: {vectorIo: [{provider: chromadb, secretRefs: {BAD: {name: s, key: k}}}]}}`,
		`{providers: {toolRuntime: [{provider: tavily, endpoint: "no url"}, {provider: brave}]}}`,
		`{resources: {models: [{name: e, modelType: llm, embeddingDimension: 3}, {name: f, modelType: embedding}]}}`,
		`{resources: {tools: [{name: "builtin::x", mcpEndpoint: "not a url"}]}}`,
		`{storage: {sql: {type: postgres}, kv: {type: redis, endpoint: "r:6379", password: {name: "", key: k}}}}`,
		`{workload: {stateVolume: {size: "0"}}, cache: {enabled: true, storageSize: "0"}}`,
		`{lineMove: {line: "x", acceptLosses: ["Bad Loss"]}}`,
		`{scaling: {podDisruptionBudget: {minAvailable: 1, maxUnavailable: 1}}}`,
		`{auth: {}}`,
		`{workload: {podOverrides: {volumeMounts: [{name: v, mountPath: /etc/llama-stack}], volumes: [{name: run-config, emptyDir: {}}]}}}`,
	}
	base := map[string]any{"distribution": map[string]any{"name": "starter"}}
	var out []map[string]any
	out = append(out, specs...)
	for _, b := range breaking {
		var m map[string]any
		require.NoError(t, yaml.Unmarshal([]byte(b), &m))
		var alone v1alpha2.InferenceStack
		require.NoError(t, yaml.UnmarshalStrict(mustYAML(t, map[string]any{"metadata": map[string]any{"name": "s"}, "spec": merge(base, m)}), &alone), b)
		require.NotEmpty(t, Validate(&alone), "%s breaks a rule", b)
		out = append(out, merge(base, m))
		for _, s := range specs {
			out = append(out, merge(s, m))
		}
	}
	for i, a := range specs {
		for _, b := range specs[i+1:] {
			out = append(out, merge(a, b))
		}
	}
	var stacks []*v1alpha2.InferenceStack
	for i, spec := range out {
		var s v1alpha2.InferenceStack
		require.NoError(t, yaml.UnmarshalStrict(mustYAML(t, map[string]any{"metadata": map[string]any{"name": []string{"s", "A_stack"}[i%2]}, "spec": spec}), &s))
		stacks = append(stacks, &s)
	}
	return stacks
}

func mustYAML(t *testing.T, v any) []byte {
	t.Helper()
	data, err := yaml.Marshal(v)
	require.NoError(t, err)
	return data
}

// merge is a with b's keys over it, maps merged deeply.
func merge(a, b map[string]any) map[string]any {
	out := maps.Clone(a)
	for k, v := range b {
		if bm, ok := v.(map[string]any); ok {
			if am, ok := out[k].(map[string]any); ok {
				out[k] = merge(am, bm)
				continue
			}
		}
		out[k] = v
	}
	return out
}

// TestRulesOfAbsentFieldsChangeNoVerdict: the CEL validator made of the
// rules of the fields a stack has (celFor) gives every stack of the corpus
// the verdicts of the API server's validator of all the CRD's rules
// (sorted: the API server's order follows map iteration); a starter
// stack's holds a fraction of them.
func TestRulesOfAbsentFieldsChangeNoVerdict(t *testing.T) {
	v, err := load()
	require.NoError(t, err)
	all := cel.NewValidator(v.structural, true, celconfig.PerCallLimit)
	broken := 0
	corpus := ruleCorpus(t)
	for _, stack := range corpus {
		obj, err := v.object(stack)
		require.NoError(t, err)
		want, _ := all.Validate(context.Background(), nil, v.structural, obj, nil, celconfig.RuntimeCELCostBudget)
		got := v.celErrors(obj)
		require.ElementsMatch(t, errorStrings(want), errorStrings(got), "spec %+v", stack.Spec)
		require.True(t, slices.IsSorted(errorStrings(got)), "the verdicts are sorted")
		if len(want) > 0 {
			broken++
		}
	}
	t.Logf("%d stacks, %d of them refused by a rule", len(corpus), broken)
	require.Greater(t, broken, len(corpus)/2, "the corpus breaks rules")

	var starter []string
	obj, err := v.object(&v1alpha2.InferenceStack{Spec: v1alpha2.InferenceStackSpec{Distribution: v1alpha2.DistributionSpec{Name: "starter"}}})
	require.NoError(t, err)
	withRulesOf(*v.internal, []any{obj}, "", &starter)
	places := rulePlaces(*v.internal)
	t.Logf("a starter stack's validator holds the rules of %d of the %d places that have rules", len(starter), places)
	require.Less(t, len(starter), places/4, "rules kept for a starter stack: %v", starter)
}

// rulePlaces counts the places of a schema that have CEL rules.
func rulePlaces(s apiextensions.JSONSchemaProps) int {
	n := 0
	if len(s.XValidations) > 0 {
		n++
	}
	for _, p := range s.Properties {
		n += rulePlaces(p)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		n += rulePlaces(*s.AdditionalProperties.Schema)
	}
	if s.Items != nil && s.Items.Schema != nil {
		n += rulePlaces(*s.Items.Schema)
	}
	return n
}

func errorStrings(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}
