package scaling_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/inferencestack/inferencestack/operator/components/scaling"
	"github.com/inferencestack/inferencestack/test/testutil"
)

func TestOnlyWhenAsked(t *testing.T) {
	plain := testutil.Stack("s")
	if scaling.HorizontalPodAutoscaler(plain) != nil || scaling.PodDisruptionBudget(plain) != nil {
		t.Error("a stack that asks for no scaling gets an autoscaler or a disruption budget")
	}
	asked := testutil.Stack("s", testutil.WithAutoscaling(2, 5, 60),
		testutil.WithPodDisruptionBudget(nil, ptr.To(intstr.FromString("50%"))))
	hpa := scaling.HorizontalPodAutoscaler(asked)
	if *hpa.Spec.MinReplicas != 2 || *hpa.Spec.MaxReplicas != 5 ||
		*hpa.Spec.Metrics[0].Resource.Target.AverageUtilization != 60 || *hpa.Spec.ScaleTargetRef.Name != "s" {
		t.Errorf("autoscaler spec %+v", hpa.Spec)
	}
	pdb := scaling.PodDisruptionBudget(asked)
	if pdb.Spec.MinAvailable != nil || pdb.Spec.MaxUnavailable.String() != "50%" {
		t.Errorf("disruption budget spec %+v", pdb.Spec)
	}
}
