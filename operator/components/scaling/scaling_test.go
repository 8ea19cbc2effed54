package scaling_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/components/scaling"
	"github.com/inferencestack/inferencestack/test/testutil"
)

func TestOnlyWhenAsked(t *testing.T) {
	plain := testutil.Stack("s")
	hpa, err := scaling.HorizontalPodAutoscaler(plain)
	require.NoError(t, err)
	if hpa != nil || scaling.PodDisruptionBudget(plain) != nil {
		t.Error("a stack that asks for no scaling gets an autoscaler or a disruption budget")
	}
	asked := testutil.Stack("s", testutil.WithAutoscaling(2, 5, 60),
		testutil.WithPodDisruptionBudget(nil, ptr.To(intstr.FromString("50%"))))
	hpa, err = scaling.HorizontalPodAutoscaler(asked)
	require.NoError(t, err)
	if *hpa.Spec.MinReplicas != 2 || *hpa.Spec.MaxReplicas != 5 ||
		*hpa.Spec.Metrics[0].Resource.Target.AverageUtilization != 60 || *hpa.Spec.ScaleTargetRef.Name != "s" {
		t.Errorf("autoscaler spec %+v", hpa.Spec)
	}
	pdb := scaling.PodDisruptionBudget(asked)
	if pdb.Spec.MinAvailable != nil || pdb.Spec.MaxUnavailable.String() != "50%" {
		t.Errorf("disruption budget spec %+v", pdb.Spec)
	}
}

// TestMetrics: the autoscaler aims at what v1alpha2's
// spec.scaling.autoscaling.metrics says (a stack written through v1alpha2
// and read through v1alpha1 carries it in the annotation), CPU at 80% by
// default; an annotation v1alpha2 would refuse is an error.
func TestMetrics(t *testing.T) {
	through := func(metrics ...v1alpha2.ResourceMetric) *v1alpha1.InferenceStack {
		t.Helper()
		v2 := &v1alpha2.InferenceStack{Spec: v1alpha2.InferenceStackSpec{Distribution: v1alpha2.DistributionSpec{Name: "starter"},
			Scaling: &v1alpha2.ScalingSpec{Autoscaling: &v1alpha2.AutoscalingSpec{MaxReplicas: 3, Metrics: metrics}}}}
		v2.Name, v2.Namespace = "s", "ns"
		var v1 v1alpha1.InferenceStack
		require.NoError(t, v1.ConvertFrom(v2))
		return &v1
	}
	type metric struct {
		resource string
		target   int32
	}
	aims := func(s *v1alpha1.InferenceStack) []metric {
		t.Helper()
		hpa, err := scaling.HorizontalPodAutoscaler(s)
		require.NoError(t, err)
		var got []metric
		for _, m := range hpa.Spec.Metrics {
			got = append(got, metric{string(*m.Resource.Name), *m.Resource.Target.AverageUtilization})
		}
		return got
	}
	cpu := func(n int32) v1alpha2.ResourceMetric {
		return v1alpha2.ResourceMetric{Resource: v1alpha2.ResourceCPU, AverageUtilization: n}
	}
	memory := func(n int32) v1alpha2.ResourceMetric {
		return v1alpha2.ResourceMetric{Resource: v1alpha2.ResourceMemory, AverageUtilization: n}
	}
	require.Equal(t, []metric{{"memory", 60}}, aims(through(memory(60))), "memory alone: no CPU target")
	require.Equal(t, []metric{{"memory", 60}, {"cpu", 70}}, aims(through(memory(60), cpu(70))))
	require.Equal(t, []metric{{"cpu", 70}}, aims(through(cpu(70))))
	require.Equal(t, []metric{{"cpu", 80}}, aims(through()), "the default")
	require.Equal(t, []metric{{"cpu", 80}}, aims(testutil.Stack("s", func(s *v1alpha1.InferenceStack) {
		s.Spec.Workload = &v1alpha1.WorkloadSpec{Autoscaling: &v1alpha1.AutoscalingSpec{MaxReplicas: 3}}
	})), "v1alpha1 without a target")

	// A v1alpha1 client changed the CPU target: the annotation's memory
	// metric stays.
	edited := through(memory(60), cpu(70))
	edited.Spec.Workload.Autoscaling.TargetCPUUtilizationPercentage = ptr.To(int32(50))
	require.Equal(t, []metric{{"memory", 60}, {"cpu", 50}}, aims(edited))

	for _, bad := range []string{`not json`, `[{"resource":"gpu","averageUtilization":50}]`,
		`[{"resource":"memory","averageUtilization":0}]`, `[{"resource":"memory","averageUtilization":50},{"resource":"memory","averageUtilization":60}]`} {
		s := through(memory(60))
		s.Annotations[v1alpha2.MetricsAnnotation] = bad
		_, err := scaling.HorizontalPodAutoscaler(s)
		require.ErrorContains(t, err, "ns/s: annotation "+v1alpha2.MetricsAnnotation, bad)
	}
}
