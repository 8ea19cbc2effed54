package apply_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

func TestDigest(t *testing.T) {
	cpu := func(q string) *corev1ac.ResourceRequirementsApplyConfiguration {
		return corev1ac.ResourceRequirements().WithRequests(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(q)})
	}
	tests := []struct {
		name string
		a, b any
		same bool
	}{
		{name: "quantities in canonical form", a: cpu("0.5"), b: cpu("500m"), same: true},
		{name: "other values", a: cpu("0.5"), b: cpu("1"), same: false},
		{name: "empty and absent map", a: corev1ac.ConfigMap("a", "ns"), b: corev1ac.ConfigMap("a", "ns").WithData(map[string]string{}), same: true},
		{name: "map order", a: corev1ac.ConfigMap("a", "ns").WithData(map[string]string{"x": "1", "y": "2"}),
			b: corev1ac.ConfigMap("a", "ns").WithData(map[string]string{"y": "2"}).WithData(map[string]string{"x": "1"}), same: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			da, err := apply.Digest(tc.a)
			require.NoError(t, err)
			db, err := apply.Digest(tc.b)
			require.NoError(t, err)
			equal, err := apply.Equal(tc.a, tc.b)
			require.NoError(t, err)
			assert.Equal(t, tc.same, da == db, "digests %s and %s", da, db)
			assert.Equal(t, equal, da == db, "Equal and Digest disagree")
		})
	}
}

// TestSetDigest: the digest of the fields the operator owns replaces the
// managed fields, once: a second transform of the same object keeps it.
func TestSetDigest(t *testing.T) {
	desired := corev1ac.ConfigMap("a", "ns").WithData(map[string]string{"k": "v"})
	fields := `{"f:data":{".":{},"f:k":{}}}`
	live := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", ManagedFields: []metav1.ManagedFieldsEntry{{
			Manager: apply.FieldOwner, Operation: metav1.ManagedFieldsOperationApply, APIVersion: "v1",
			FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(fields),
		}}},
		Data: map[string]string{"k": "v", "other": "kept by someone else"},
	}
	want, err := apply.Digest(desired)
	require.NoError(t, err)
	require.NoError(t, apply.ConfigMap.SetDigest(live))
	assert.Empty(t, live.ManagedFields)
	assert.Equal(t, want, live.Annotations[apply.DigestAnnotation], "the digest of the owned fields equals the desired one's")
	require.NoError(t, apply.ConfigMap.SetDigest(live))
	assert.Equal(t, want, live.Annotations[apply.DigestAnnotation], "a second transform changed the digest")
}
