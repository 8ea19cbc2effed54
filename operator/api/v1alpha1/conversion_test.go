package v1alpha1_test

import (
	"encoding/json"
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"sigs.k8s.io/randfill"
	"sigs.k8s.io/yaml"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
)

// roundTrips is how many random objects of each version each round-trip
// test converts there and back.
const roundTrips = 3000

func filler(seed int64) *randfill.Filler {
	codecs := serializer.NewCodecFactory(runtime.NewScheme())
	// Provider settings are free-form JSON objects.
	settings := func(codecs serializer.CodecFactory) []any {
		return []any{func(r *runtime.RawExtension, c randfill.Continue) {
			var m map[string]string
			c.Fill(&m)
			r.Raw, _ = json.Marshal(m)
		}, func(m *[]v1alpha2.ResourceMetric, c randfill.Continue) {
			// What the CRD admits: cpu and memory, each at most once, in
			// any order.
			*m = nil
			for _, r := range c.Perm(2)[:c.Intn(3)] {
				*m = append(*m, v1alpha2.ResourceMetric{Resource: []v1alpha2.ResourceName{"cpu", "memory"}[r], AverageUtilization: 1 + c.Int31n(100)})
			}
		}}
	}
	return fuzzer.FuzzerFor(fuzzer.MergeFuzzerFuncs(metafuzzer.Funcs, settings), rand.NewSource(seed), codecs).NilChance(0.3).MaxDepth(12)
}

// normalized is obj as the API server holds it: through its JSON, so that
// what JSON cannot tell apart (an empty list and none, nanoseconds) is not
// counted as a loss.
func normalized[T any](t *testing.T, obj *T) *T {
	t.Helper()
	data, err := json.Marshal(obj)
	require.NoError(t, err)
	out := new(T)
	require.NoError(t, json.Unmarshal(data, out))
	return out
}

func jsonOf(t *testing.T, obj any) string {
	t.Helper()
	data, err := json.Marshal(obj)
	require.NoError(t, err)
	return string(data)
}

// TestRoundTripFromV1alpha1: every random v1alpha1 object converted to the
// hub and back is what it was, byte for byte in JSON.
func TestRoundTripFromV1alpha1(t *testing.T) {
	f := filler(1)
	for i := range roundTrips {
		in := &v1alpha1.InferenceStack{}
		f.Fill(in)
		in = normalized(t, in)
		hub := &v1alpha2.InferenceStack{}
		require.NoError(t, in.ConvertTo(hub), "object %d", i)
		out := &v1alpha1.InferenceStack{}
		require.NoError(t, out.ConvertFrom(hub), "object %d", i)
		require.JSONEq(t, jsonOf(t, in), jsonOf(t, normalized(t, out)), "object %d, through v1alpha2 %s", i, jsonOf(t, hub))
	}
}

// TestRoundTripFromV1alpha2: every random v1alpha2 object converted to
// v1alpha1 and back is what it was. Two v1alpha2 forms have no v1alpha1
// spelling and are the same as another one, so the filler does not make
// them: an empty scaling: {} (the same as none: the defaults), and an empty
// workload: {} beside a scaling (v1alpha1's workload then holds the moved
// fields, and comes back as none).
func TestRoundTripFromV1alpha2(t *testing.T) {
	f := filler(2)
	for i := range roundTrips {
		in := &v1alpha2.InferenceStack{}
		f.Fill(in)
		in = normalized(t, in)
		if s := in.Spec.Scaling; s != nil && *s == (v1alpha2.ScalingSpec{}) {
			in.Spec.Scaling = nil
		}
		if w := in.Spec.Workload; w != nil && in.Spec.Scaling != nil && jsonOf(t, w) == "{}" {
			in.Spec.Workload = nil
		}
		spoke := &v1alpha1.InferenceStack{}
		require.NoError(t, spoke.ConvertFrom(in), "object %d", i)
		out := &v1alpha2.InferenceStack{}
		require.NoError(t, normalized(t, spoke).ConvertTo(out), "object %d", i)
		require.JSONEq(t, jsonOf(t, in), jsonOf(t, normalized(t, out)), "object %d, through v1alpha1 %s", i, jsonOf(t, spoke))
	}
}

// TestRoundTripsAreNotVacuous: the random objects reach every moved field
// and the annotations, so the round trips above test the conversion.
func TestRoundTripsAreNotVacuous(t *testing.T) {
	f := filler(2)
	seen := map[string]int{}
	for range roundTrips {
		in := &v1alpha2.InferenceStack{}
		f.Fill(in)
		in = normalized(t, in)
		spoke := &v1alpha1.InferenceStack{}
		require.NoError(t, spoke.ConvertFrom(in))
		if s := in.Spec.Scaling; s != nil {
			if s.Replicas != nil {
				seen["replicas"]++
			}
			if s.Autoscaling != nil && len(s.Autoscaling.Metrics) > 1 {
				seen["several metrics"]++
			}
		}
		if _, ok := spoke.Annotations[v1alpha2.MetricsAnnotation]; ok {
			seen["annotation"]++
		}
		if patch, ok := spoke.Annotations[v1alpha2.SpecAnnotation]; ok {
			if n := in.Spec.Networking; n != nil && n.AllowedFrom != nil && len(n.AllowedFrom.Namespaces) > 0 {
				require.Contains(t, patch, `"allowedFrom"`)
				seen["allowedFrom"]++
			}
		}
	}
	for _, k := range []string{"replicas", "several metrics", "annotation", "allowedFrom"} {
		require.Greater(t, seen[k], roundTrips/100, "random v1alpha2 objects with %s: %v", k, seen)
	}
}

// TestConversionCases: hand-written pairs, each side as a user writes it.
func TestConversionCases(t *testing.T) {
	tests := []struct {
		name     string
		v1alpha1 string
		v1alpha2 string
	}{{
		name:     "no moved field",
		v1alpha1: `{spec: {distribution: {name: starter}, workload: {env: [{name: A, value: b}]}}}`,
		v1alpha2: `{spec: {distribution: {name: starter}, workload: {env: [{name: A, value: b}]}}}`,
	}, {
		name:     "an empty workload stays",
		v1alpha1: `{spec: {distribution: {name: starter}, workload: {}}}`,
		v1alpha2: `{spec: {distribution: {name: starter}, workload: {}}}`,
	}, {
		name:     "replicas move to scaling, workload goes when nothing else is in it",
		v1alpha1: `{spec: {distribution: {name: starter}, workload: {replicas: 3}}}`,
		v1alpha2: `{spec: {distribution: {name: starter}, scaling: {replicas: 3}}}`,
	}, {
		name:     "replicas move, the rest of workload stays",
		v1alpha1: `{spec: {distribution: {name: starter}, workload: {replicas: 0, serviceAccountName: sa, podDisruptionBudget: {minAvailable: 1}}}}`,
		v1alpha2: `{spec: {distribution: {name: starter}, workload: {serviceAccountName: sa}, scaling: {replicas: 0, podDisruptionBudget: {minAvailable: 1}}}}`,
	}, {
		name:     "the CPU target is a metric",
		v1alpha1: `{spec: {distribution: {name: starter}, workload: {autoscaling: {minReplicas: 2, maxReplicas: 5, targetCPUUtilizationPercentage: 70}}}}`,
		v1alpha2: `{spec: {distribution: {name: starter}, scaling: {autoscaling: {minReplicas: 2, maxReplicas: 5, metrics: [{resource: cpu, averageUtilization: 70}]}}}}`,
	}, {
		name: "a memory target has no v1alpha1 field: it is kept in the annotation",
		v1alpha1: `{metadata: {annotations: {inferencestack.io/v1alpha2-autoscaling-metrics: '[{"resource":"memory","averageUtilization":60}]'}},
			spec: {distribution: {name: starter}, workload: {autoscaling: {maxReplicas: 5}}}}`,
		v1alpha2: `{spec: {distribution: {name: starter}, scaling: {autoscaling: {maxReplicas: 5, metrics: [{resource: memory, averageUtilization: 60}]}}}}`,
	}, {
		name: "CPU and memory: CPU in its field, both (and their order) in the annotation",
		v1alpha1: `{metadata: {annotations: {inferencestack.io/v1alpha2-autoscaling-metrics: '[{"resource":"memory","averageUtilization":60},{"resource":"cpu","averageUtilization":75}]', team: a}},
			spec: {distribution: {name: starter}, workload: {autoscaling: {maxReplicas: 5, targetCPUUtilizationPercentage: 75}}}}`,
		v1alpha2: `{metadata: {annotations: {team: a}},
			spec: {distribution: {name: starter}, scaling: {autoscaling: {maxReplicas: 5, metrics: [{resource: memory, averageUtilization: 60}, {resource: cpu, averageUtilization: 75}]}}}}`,
	}, {
		name: "a field only v1alpha2 has travels in the spec annotation, as a merge patch",
		v1alpha1: `{metadata: {annotations: {inferencestack.io/v1alpha2-spec: '{"networking":{"allowedFrom":{"namespaces":["clients"]}}}'}},
			spec: {distribution: {name: starter}, networking: {port: 8443}}}`,
		v1alpha2: `{spec: {distribution: {name: starter}, networking: {port: 8443, allowedFrom: {namespaces: [clients]}}}}`,
	}, {
		name: "the operator's client certificate (v1alpha2 only) travels in the spec annotation",
		v1alpha1: `{metadata: {annotations: {inferencestack.io/v1alpha2-spec: '{"networking":{"tls":{"operatorClientSecretName":"operator-client"}}}'}},
			spec: {distribution: {name: starter}, networking: {tls: {enabled: true, secretName: tls, caBundle: {configMapName: ca}}}}}`,
		v1alpha2: `{spec: {distribution: {name: starter}, networking: {tls: {enabled: true, secretName: tls, caBundle: {configMapName: ca},
			operatorClientSecretName: operator-client}}}}`,
	}, {
		name: "an Ingress and a Route (an empty object: the router picks the host) travel in the spec annotation",
		v1alpha1: `{metadata: {annotations: {inferencestack.io/v1alpha2-spec: '{"networking":{"ingress":{"annotations":{"a":"b"},"className":"nginx","host":"llama.example.com","tls":{"secretName":"llama-tls"}},"route":{}}}'}},
			spec: {distribution: {name: starter}, networking: {expose: false}}}`,
		v1alpha2: `{spec: {distribution: {name: starter}, networking: {expose: false,
			ingress: {host: llama.example.com, className: nginx, tls: {secretName: llama-tls}, annotations: {a: b}}, route: {}}}}`,
	}, {
		name:     "the Ingress and Route URLs are status in both versions",
		v1alpha1: `{spec: {distribution: {name: starter}}, status: {url: "http://a.b.svc:8321", ingressURL: "https://llama.example.com", routeURL: "https://a-b.apps.example.com"}}`,
		v1alpha2: `{spec: {distribution: {name: starter}}, status: {url: "http://a.b.svc:8321", ingressURL: "https://llama.example.com", routeURL: "https://a-b.apps.example.com"}}`,
	}, {
		name: "workers and podOverrides travel in the spec annotation, beside the workload fields v1alpha1 has",
		v1alpha1: `{metadata: {annotations: {inferencestack.io/v1alpha2-spec: '{"workload":{"podOverrides":{"args":["--timeout-keep-alive","30"],"terminationGracePeriodSeconds":60,"volumeMounts":[{"mountPath":"/opt/prompts","name":"prompts"}],"volumes":[{"configMap":{"name":"prompts"},"name":"prompts"}]},"workers":4}}'}},
			spec: {distribution: {name: starter}, workload: {serviceAccountName: sa}}}`,
		v1alpha2: `{spec: {distribution: {name: starter}, workload: {serviceAccountName: sa, workers: 4, podOverrides: {
			volumes: [{name: prompts, configMap: {name: prompts}}], volumeMounts: [{name: prompts, mountPath: /opt/prompts}],
			args: ["--timeout-keep-alive", "30"], terminationGracePeriodSeconds: 60}}}}`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var v1, want1 v1alpha1.InferenceStack
			var v2, want2 v1alpha2.InferenceStack
			require.NoError(t, yaml.UnmarshalStrict([]byte(tt.v1alpha1), &v1))
			require.NoError(t, yaml.UnmarshalStrict([]byte(tt.v1alpha2), &v2))
			require.NoError(t, yaml.UnmarshalStrict([]byte(tt.v1alpha1), &want1))
			require.NoError(t, yaml.UnmarshalStrict([]byte(tt.v1alpha2), &want2))

			var got2 v1alpha2.InferenceStack
			require.NoError(t, v1.ConvertTo(&got2))
			require.JSONEq(t, jsonOf(t, want2), jsonOf(t, got2), "v1alpha1 -> v1alpha2")
			var got1 v1alpha1.InferenceStack
			require.NoError(t, got1.ConvertFrom(&v2))
			require.JSONEq(t, jsonOf(t, want1), jsonOf(t, got1), "v1alpha2 -> v1alpha1")
		})
	}
}

// TestConversionEditsThroughV1alpha1: a v1alpha1 client that changes the
// CPU target of an object made through v1alpha2 changes that metric and
// keeps the others; one that drops it keeps the others.
func TestConversionEditsThroughV1alpha1(t *testing.T) {
	var v2 v1alpha2.InferenceStack
	require.NoError(t, yaml.UnmarshalStrict([]byte(`{spec: {distribution: {name: starter},
		scaling: {autoscaling: {maxReplicas: 5, metrics: [{resource: memory, averageUtilization: 60}, {resource: cpu, averageUtilization: 75}]}}}}`), &v2))
	var v1 v1alpha1.InferenceStack
	require.NoError(t, v1.ConvertFrom(&v2))

	edited := v1.DeepCopy()
	edited.Spec.Workload.Autoscaling.TargetCPUUtilizationPercentage = new(int32(90))
	var got v1alpha2.InferenceStack
	require.NoError(t, edited.ConvertTo(&got))
	require.Equal(t, []v1alpha2.ResourceMetric{{Resource: "memory", AverageUtilization: 60}, {Resource: "cpu", AverageUtilization: 90}}, got.Spec.Scaling.Autoscaling.Metrics)

	edited.Spec.Workload.Autoscaling.TargetCPUUtilizationPercentage = nil
	require.NoError(t, edited.ConvertTo(&got))
	require.Equal(t, []v1alpha2.ResourceMetric{{Resource: "memory", AverageUtilization: 60}}, got.Spec.Scaling.Autoscaling.Metrics)
}

// TestConversionRefusesABrokenAnnotation: an annotation that is not the
// JSON of the metrics, or a spec annotation that is not a merge patch of
// v1alpha2 fields (a typo), is an error naming the object and the
// annotation.
func TestConversionRefusesABrokenAnnotation(t *testing.T) {
	for annotation, want := range map[string]string{
		`inferencestack.io/v1alpha2-autoscaling-metrics: 'memory=60'`:                           "annotation inferencestack.io/v1alpha2-autoscaling-metrics",
		`inferencestack.io/v1alpha2-spec: 'allowedFrom=clients'`:                                "annotation inferencestack.io/v1alpha2-spec: not a JSON object",
		`inferencestack.io/v1alpha2-spec: '{"networking":{"allowedFrm":{"namespaces":["a"]}}}'`: `annotation inferencestack.io/v1alpha2-spec: json: unknown field "allowedFrm"`,
		`inferencestack.io/v1alpha2-spec: '{"networking":{"allowedFrom":{"namespaces":"a"}}}'`:  "annotation inferencestack.io/v1alpha2-spec: json: cannot unmarshal string",
	} {
		var v1 v1alpha1.InferenceStack
		require.NoError(t, yaml.UnmarshalStrict([]byte(`{metadata: {name: s, namespace: ns, annotations: {`+annotation+`}},
		spec: {distribution: {name: starter}, workload: {autoscaling: {maxReplicas: 5}}}}`), &v1))
		var v2 v1alpha2.InferenceStack
		require.ErrorContains(t, v1.ConvertTo(&v2), "InferenceStack ns/s: "+want)
	}
}

// TestConversionSpecAnnotationSurvivesEdits: a v1alpha1 client that edits
// the fields it has keeps the ones only v1alpha2 has, and a v1alpha2 object
// that carries the annotation itself does not get it back twice.
func TestConversionSpecAnnotationSurvivesEdits(t *testing.T) {
	var v2 v1alpha2.InferenceStack
	require.NoError(t, yaml.UnmarshalStrict([]byte(`{metadata: {annotations: {inferencestack.io/v1alpha2-spec: '{"networking":{"port":1}}'}},
		spec: {distribution: {name: starter}, networking: {allowedFrom: {labels: [team]}}}}`), &v2))
	var v1 v1alpha1.InferenceStack
	require.NoError(t, v1.ConvertFrom(&v2))
	require.JSONEq(t, `{"networking":{"allowedFrom":{"labels":["team"]}}}`, v1.Annotations[v1alpha2.SpecAnnotation])

	v1.Spec.Networking.Port = 9000
	v1.Spec.Distribution.Name = "remote-vllm"
	var got v1alpha2.InferenceStack
	require.NoError(t, v1.ConvertTo(&got))
	require.Equal(t, int32(9000), got.Spec.Networking.Port)
	require.Equal(t, v1alpha2.DistributionName("remote-vllm"), got.Spec.Distribution.Name)
	require.Equal(t, []string{"team"}, got.Spec.Networking.AllowedFrom.Labels)
	require.NotContains(t, got.Annotations, v1alpha2.SpecAnnotation)
}

// TestV1alpha2SamplesConvert: every v1alpha2 sample (the examples of a CRD
// package release that serves v1alpha2) has no unknown field, converts to
// a v1alpha1 object the API server admits, and back to what it was.
func TestV1alpha2SamplesConvert(t *testing.T) {
	ctx, c := setup(t)
	files, err := filepath.Glob(filepath.Join("..", "..", "config", "samples", "inferencestack_v1alpha2_*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no v1alpha2 sample")
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			require.NoError(t, err)
			var hub v1alpha2.InferenceStack
			require.NoError(t, yaml.UnmarshalStrict(data, &hub), "sample %s has unknown fields", f)
			var spoke v1alpha1.InferenceStack
			require.NoError(t, spoke.ConvertFrom(&hub))
			var back v1alpha2.InferenceStack
			require.NoError(t, spoke.DeepCopy().ConvertTo(&back))
			require.Equal(t, jsonOf(t, hub.Spec), jsonOf(t, back.Spec))
			spoke.Namespace = namespace
			spoke.Name = "v1alpha2-sample-" + hub.Name
			require.NoError(t, c.Create(ctx, &spoke))
		})
	}
}
