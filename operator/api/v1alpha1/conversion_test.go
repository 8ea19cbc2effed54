package v1alpha1_test

import (
	"bytes"
	"encoding/json"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
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

// mergePatch is the JSON merge patch from a to b (for messages).
func mergePatch(t *testing.T, a, b string) string {
	t.Helper()
	patch, err := jsonpatch.CreateMergePatch([]byte(a), []byte(b))
	require.NoError(t, err)
	return string(patch)
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
		require.Equal(t, jsonOf(t, in), jsonOf(t, normalized(t, out)), "object %d, through v1alpha2 %s", i, jsonOf(t, hub))
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
		require.Equal(t, jsonOf(t, in), jsonOf(t, normalized(t, out)), "object %d, through v1alpha1 %s", i, jsonOf(t, spoke))
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
		name: "a memory target has no v1alpha1 field: it is kept in the annotation, and the CPU target field holds v1alpha1's default (the API server's), which adds none",
		v1alpha1: `{metadata: {annotations: {inferencestack.io/v1alpha2-autoscaling-metrics: '[{"resource":"memory","averageUtilization":60}]'}},
			spec: {distribution: {name: starter}, workload: {autoscaling: {maxReplicas: 5, targetCPUUtilizationPercentage: 80}}}}`,
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
			require.Equal(t, jsonOf(t, want2), jsonOf(t, got2), "v1alpha1 -> v1alpha2")
			var got1 v1alpha1.InferenceStack
			require.NoError(t, got1.ConvertFrom(&v2))
			require.Equal(t, jsonOf(t, want1), jsonOf(t, got1), "v1alpha2 -> v1alpha1")
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

// TestConversionKeepsABrokenAnnotation: an annotation conversion cannot
// read (not JSON, not the v1alpha2 shape, a field v1alpha2 does not have)
// fails no conversion: the v1alpha1 fields convert, the annotation rides on
// the hub as it is, comes back byte for byte, and AnnotationProblems names
// it (V1alpha2, for the reconciler that still reads v1alpha1, fails with
// it).
func TestConversionKeepsABrokenAnnotation(t *testing.T) {
	for annotation, want := range map[string]string{
		`inferencestack.io/v1alpha2-autoscaling-metrics: 'memory=60'`:                                       "metadata.annotations[inferencestack.io/v1alpha2-autoscaling-metrics]: Invalid value: \"memory=60\": annotation inferencestack.io/v1alpha2-autoscaling-metrics is not the JSON of spec.scaling.autoscaling.metrics",
		`inferencestack.io/v1alpha2-autoscaling-metrics: '[{"resource":"memory","averageUtilisation":60}]'`: `json: unknown field "averageUtilisation"`,
		`inferencestack.io/v1alpha2-spec: 'allowedFrom=clients'`:                                            "metadata.annotations[inferencestack.io/v1alpha2-spec]: Invalid value: \"allowedFrom=clients\": annotation inferencestack.io/v1alpha2-spec is not a JSON merge patch of v1alpha2 spec fields (not a JSON object), so it is not applied",
		`inferencestack.io/v1alpha2-spec: '{"networking":{"allowedFrm":{"namespaces":["a"]}}}'`:             `annotation inferencestack.io/v1alpha2-spec is not a JSON merge patch of v1alpha2 spec fields (json: unknown field "allowedFrm")`,
		`inferencestack.io/v1alpha2-spec: '{"networking":{"allowedFrom":{"namespaces":"a"}}}'`:              "(json: cannot unmarshal string",
	} {
		t.Run(annotation, func(t *testing.T) {
			var v1 v1alpha1.InferenceStack
			require.NoError(t, yaml.UnmarshalStrict([]byte(`{metadata: {name: s, namespace: ns, annotations: {`+annotation+`}},
				spec: {distribution: {name: starter}, workload: {autoscaling: {maxReplicas: 5, targetCPUUtilizationPercentage: 70}}}}`), &v1))
			var hub v1alpha2.InferenceStack
			require.NoError(t, v1.ConvertTo(&hub))
			require.Equal(t, `{"distribution":{"name":"starter"},"scaling":{"autoscaling":{"maxReplicas":5,"metrics":[{"resource":"cpu","averageUtilization":70}]}}}`,
				jsonOf(t, hub.Spec), "the v1alpha1 fields convert")
			require.Equal(t, v1.Annotations, hub.Annotations, "the annotation rides on the hub as it is")
			problems := v1alpha1.AnnotationProblems(&hub)
			require.Len(t, problems, 1)
			require.Contains(t, problems.ToAggregate().Error(), want)

			var back v1alpha1.InferenceStack
			require.NoError(t, back.ConvertFrom(&hub))
			require.Equal(t, jsonOf(t, &v1), jsonOf(t, &back), "back through v1alpha1, byte for byte")
		})
	}
}

// TestConversionFindings: each finding of issue 35 on the annotation, as a
// v1alpha1 object that a round trip through the hub must give back byte
// for byte, the hub it must convert to, and what AnnotationProblems must
// say of it.
func TestConversionFindings(t *testing.T) {
	tests := []struct {
		name     string
		v1alpha1 string
		// spec is the hub's spec, annotations the hub's annotations.
		spec, annotations string
		problems          []string
	}{{
		name: "two views: the annotation's replicas beside workload.replicas; v1alpha1's field wins",
		v1alpha1: `{metadata: {annotations: {inferencestack.io/v1alpha2-spec: '{"scaling":{"replicas":7}}'}},
			spec: {distribution: {name: starter}, workload: {replicas: 2}}}`,
		spec:        `{"distribution":{"name":"starter"},"scaling":{"replicas":2}}`,
		annotations: `{"inferencestack.io/v1alpha2-spec":"{\"scaling\":{\"replicas\":7}}"}`,
		problems:    []string{"spec.scaling.replicas: Forbidden: set by spec.workload.replicas in v1alpha1, which wins: annotation inferencestack.io/v1alpha2-spec may hold only fields v1alpha1 lacks"},
	}, {
		name: "two views: the annotation's port beside networking.port; v1alpha1's field wins, the rest of the annotation applies",
		v1alpha1: `{metadata: {annotations: {inferencestack.io/v1alpha2-spec: '{"networking":{"port":1,"allowedFrom":{"namespaces":["a"]}}}'}},
			spec: {distribution: {name: starter}, networking: {port: 8443}}}`,
		spec:        `{"distribution":{"name":"starter"},"networking":{"port":8443,"allowedFrom":{"namespaces":["a"]}}}`,
		annotations: `{"inferencestack.io/v1alpha2-spec":"{\"networking\":{\"port\":1,\"allowedFrom\":{\"namespaces\":[\"a\"]}}}"}`,
		problems:    []string{"spec.networking.port: Forbidden: set by spec.networking.port in v1alpha1"},
	}, {
		name: "a pretty-printed annotation comes back as it was",
		v1alpha1: `{metadata: {annotations: {inferencestack.io/v1alpha2-spec: "{\n  \"networking\": {\n    \"allowedFrom\": {}\n  }\n}\n"}},
			spec: {distribution: {name: starter}, networking: {port: 8321}}}`,
		spec:        `{"distribution":{"name":"starter"},"networking":{"port":8321,"allowedFrom":{}}}`,
		annotations: `{"inferencestack.io/v1alpha2-spec":"{\n  \"networking\": {\n    \"allowedFrom\": {}\n  }\n}\n"}`,
	}, {
		name:        "an empty annotation {} comes back",
		v1alpha1:    `{metadata: {annotations: {inferencestack.io/v1alpha2-spec: '{}'}}, spec: {distribution: {name: starter}}}`,
		spec:        `{"distribution":{"name":"starter"}}`,
		annotations: `{"inferencestack.io/v1alpha2-spec":"{}"}`,
	}, {
		name: "a metrics annotation without autoscaling comes back",
		v1alpha1: `{metadata: {annotations: {inferencestack.io/v1alpha2-autoscaling-metrics: '[{"resource":"memory","averageUtilization":60}]'}},
			spec: {distribution: {name: starter}, workload: {replicas: 1}}}`,
		spec:        `{"distribution":{"name":"starter"},"scaling":{"replicas":1}}`,
		annotations: `{"inferencestack.io/v1alpha2-autoscaling-metrics":"[{\"resource\":\"memory\",\"averageUtilization\":60}]"}`,
	}, {
		name: "no stray networking: {} in the spec",
		v1alpha1: `{metadata: {annotations: {inferencestack.io/v1alpha2-spec: '{"networking":{"allowedFrom":{"namespaces":["a"]}}}'}},
			spec: {distribution: {name: starter}}}`,
		spec: `{"distribution":{"name":"starter"},"networking":{"allowedFrom":{"namespaces":["a"]}}}`,
	}, {
		name: "a CPU target changed through v1alpha1 beside the metrics annotation: the annotation stays as the client left it",
		v1alpha1: `{metadata: {annotations: {inferencestack.io/v1alpha2-autoscaling-metrics: '[{"resource":"memory","averageUtilization":60},{"resource":"cpu","averageUtilization":75}]'}},
			spec: {distribution: {name: starter}, workload: {autoscaling: {maxReplicas: 5, targetCPUUtilizationPercentage: 90}}}}`,
		spec:        `{"distribution":{"name":"starter"},"scaling":{"autoscaling":{"maxReplicas":5,"metrics":[{"resource":"memory","averageUtilization":60},{"resource":"cpu","averageUtilization":90}]}}}`,
		annotations: `{"inferencestack.io/v1alpha2-autoscaling-metrics":"[{\"resource\":\"memory\",\"averageUtilization\":60},{\"resource\":\"cpu\",\"averageUtilization\":75}]"}`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var v1 v1alpha1.InferenceStack
			require.NoError(t, yaml.UnmarshalStrict([]byte(tt.v1alpha1), &v1))
			var hub v1alpha2.InferenceStack
			require.NoError(t, v1.ConvertTo(&hub))
			require.Equal(t, tt.spec, jsonOf(t, hub.Spec))
			if tt.annotations == "" {
				require.Empty(t, hub.Annotations)
			} else {
				require.Equal(t, tt.annotations, jsonOf(t, hub.Annotations), "what the hub carries")
			}
			var got []string
			for _, p := range v1alpha1.AnnotationProblems(&hub) {
				got = append(got, p.Error())
			}
			require.Len(t, got, len(tt.problems), "%q", got)
			for i, want := range tt.problems {
				require.Contains(t, got[i], want)
			}
			var back v1alpha1.InferenceStack
			require.NoError(t, back.ConvertFrom(&hub))
			require.Equal(t, jsonOf(t, &v1), jsonOf(t, &back), "back through v1alpha1, byte for byte")
		})
	}
}

// TestRoundTripThroughTheAnnotations: v1alpha1 objects whose annotations
// come from random v1alpha2 objects (as ConvertFrom writes them, then
// pretty-printed or with their keys reordered, as a v1alpha1 client may
// write them back) convert to that v1alpha2 object, with no problem, and
// back to themselves, byte for byte.
func TestRoundTripThroughTheAnnotations(t *testing.T) {
	f := filler(3)
	r := rand.New(rand.NewSource(3))
	seen := map[string]int{}
	for i := range roundTrips {
		want := &v1alpha2.InferenceStack{}
		f.Fill(want)
		want = normalized(t, want)
		if w := want.Spec.Workload; w != nil && want.Spec.Scaling != nil && jsonOf(t, w) == "{}" {
			want.Spec.Workload = nil
		}
		for _, key := range []string{v1alpha2.SpecAnnotation, v1alpha2.MetricsAnnotation} {
			delete(want.Annotations, key)
		}
		spoke := &v1alpha1.InferenceStack{}
		require.NoError(t, spoke.ConvertFrom(want), "object %d", i)
		for _, key := range []string{v1alpha2.SpecAnnotation, v1alpha2.MetricsAnnotation} {
			raw, ok := spoke.Annotations[key]
			if !ok {
				continue
			}
			seen[key]++
			switch r.Intn(3) {
			case 1: // pretty-printed
				var out bytes.Buffer
				require.NoError(t, json.Indent(&out, []byte(raw), "", "  "))
				spoke.Annotations[key] = out.String() + "\n"
				seen["pretty-printed"]++
			case 2: // keys in alphabetical order
				var v any
				dec := json.NewDecoder(strings.NewReader(raw))
				dec.UseNumber()
				require.NoError(t, dec.Decode(&v))
				sorted, err := json.Marshal(v)
				require.NoError(t, err)
				spoke.Annotations[key] = string(sorted)
				if string(sorted) != raw {
					seen["reordered"]++
				}
			}
		}
		spoke = normalized(t, spoke)
		hub := &v1alpha2.InferenceStack{}
		require.NoError(t, spoke.ConvertTo(hub), "object %d", i)
		require.Equal(t, jsonOf(t, want.Spec), jsonOf(t, normalized(t, hub).Spec), "object %d: the spec through the annotations, from %s; patch to what it gave: %s",
			i, jsonOf(t, spoke), mergePatch(t, jsonOf(t, want.Spec), jsonOf(t, normalized(t, hub).Spec)))
		require.Empty(t, v1alpha1.AnnotationProblems(hub), "object %d", i)
		back := &v1alpha1.InferenceStack{}
		require.NoError(t, back.ConvertFrom(hub), "object %d", i)
		require.Equal(t, jsonOf(t, spoke), jsonOf(t, normalized(t, back)), "object %d, through v1alpha2 %s", i, jsonOf(t, hub))
	}
	for _, k := range []string{v1alpha2.SpecAnnotation, v1alpha2.MetricsAnnotation, "pretty-printed", "reordered"} {
		require.Greater(t, seen[k], roundTrips/20, "random objects with %s: %v", k, seen)
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
	require.Equal(t, `{"networking":{"allowedFrom":{"labels":["team"]}}}`, v1.Annotations[v1alpha2.SpecAnnotation])
	require.Nil(t, v1.Spec.Networking, "networking holds only allowedFrom: it is the annotation's")

	v1.Spec.Networking = &v1alpha1.NetworkingSpec{Port: 9000}
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
