package apply_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	"github.com/inferencestack/inferencestack/operator/apply"
)

func TestEqual(t *testing.T) {
	a := corev1ac.ResourceRequirements().WithRequests(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0.5")})
	b := corev1ac.ResourceRequirements().WithRequests(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")})
	if same, err := apply.Equal(a, b); err != nil || !same {
		t.Errorf("0.5 and 500m CPU: equal=%v err=%v, want equal", same, err)
	}
	c := corev1ac.ResourceRequirements().WithRequests(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")})
	if same, _ := apply.Equal(a, c); same {
		t.Error("0.5 and 1 CPU compare equal")
	}
	if same, _ := apply.Equal(corev1ac.ConfigMap("a", "ns"), corev1ac.ConfigMap("a", "ns").WithData(map[string]string{})); !same {
		t.Error("an empty and an absent map differ")
	}
}
