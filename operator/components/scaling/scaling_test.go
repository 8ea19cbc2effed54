package scaling_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/components/scaling"
	"github.com/inferencestack/inferencestack/test/testutil"
)

func TestOnlyWhenAsked(t *testing.T) {
	plain := testutil.Hub(testutil.Stack("s"))
	hpa := scaling.HorizontalPodAutoscaler(plain)
	if hpa != nil || scaling.PodDisruptionBudget(plain) != nil {
		t.Error("a stack that asks for no scaling gets an autoscaler or a disruption budget")
	}
	asked := testutil.Hub(testutil.Stack("s", testutil.WithAutoscaling(2, 5, 60),
		testutil.WithPodDisruptionBudget(nil, ptr.To(intstr.FromString("50%")))))
	hpa = scaling.HorizontalPodAutoscaler(asked)
	if *hpa.Spec.MinReplicas != 2 || *hpa.Spec.MaxReplicas != 5 ||
		*hpa.Spec.Metrics[0].Resource.Target.AverageUtilization != 60 || *hpa.Spec.ScaleTargetRef.Name != "s" {
		t.Errorf("autoscaler spec %+v", hpa.Spec)
	}
	pdb := scaling.PodDisruptionBudget(asked)
	if pdb.Spec.MinAvailable != nil || pdb.Spec.MaxUnavailable.String() != "50%" {
		t.Errorf("disruption budget spec %+v", pdb.Spec)
	}
}

// TestMetrics: the autoscaler aims at spec.scaling.autoscaling.metrics, in
// their order, CPU at 80% when the list is empty. (How a v1alpha1 stack's
// targetCPUUtilizationPercentage and annotation become that list is the
// conversion's, tested in operator/api/v1alpha1.)
func TestMetrics(t *testing.T) {
	aims := func(metrics ...v1alpha2.ResourceMetric) []v1alpha2.ResourceMetric {
		t.Helper()
		s := &v1alpha2.InferenceStack{Spec: v1alpha2.InferenceStackSpec{Distribution: v1alpha2.DistributionSpec{Name: "starter"},
			Scaling: &v1alpha2.ScalingSpec{Autoscaling: &v1alpha2.AutoscalingSpec{MaxReplicas: 3, Metrics: metrics}}}}
		s.Name, s.Namespace = "s", "ns"
		var got []v1alpha2.ResourceMetric
		for _, m := range scaling.HorizontalPodAutoscaler(s).Spec.Metrics {
			got = append(got, v1alpha2.ResourceMetric{Resource: v1alpha2.ResourceName(*m.Resource.Name), AverageUtilization: *m.Resource.Target.AverageUtilization})
		}
		return got
	}
	cpu := func(n int32) v1alpha2.ResourceMetric {
		return v1alpha2.ResourceMetric{Resource: v1alpha2.ResourceCPU, AverageUtilization: n}
	}
	memory := func(n int32) v1alpha2.ResourceMetric {
		return v1alpha2.ResourceMetric{Resource: v1alpha2.ResourceMemory, AverageUtilization: n}
	}
	require.Equal(t, []v1alpha2.ResourceMetric{memory(60)}, aims(memory(60)), "memory alone: no CPU target")
	require.Equal(t, []v1alpha2.ResourceMetric{memory(60), cpu(70)}, aims(memory(60), cpu(70)))
	require.Equal(t, []v1alpha2.ResourceMetric{cpu(70)}, aims(cpu(70)))
	require.Equal(t, []v1alpha2.ResourceMetric{cpu(80)}, aims(), "the default")
	require.Equal(t, []v1alpha2.ResourceMetric{cpu(80)}, aims(nil...), "the default")
}
