// Package v1alpha2 holds the inferencestack.io/v1alpha2 API: the
// InferenceStack kind, one installation of a Llama Stack server. It is the
// hub of the InferenceStack versions: every other version converts to and
// from it (see docs/api-versions.md).
//
// +kubebuilder:object:generate=true
// +groupName=inferencestack.io
package v1alpha2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the group and version of this API.
var GroupVersion = schema.GroupVersion{Group: "inferencestack.io", Version: "v1alpha2"}

// AddToScheme adds the types of this API to a runtime.Scheme.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &InferenceStack{}, &InferenceStackList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

// Hub marks v1alpha2 as the version every other one converts through
// (sigs.k8s.io/controller-runtime/pkg/conversion.Hub).
func (*InferenceStack) Hub() {}

// MetricsAnnotation holds, on an object read through v1alpha1, the
// autoscaling metrics v1alpha1 cannot express (any besides one CPU target),
// as the JSON of spec.scaling.autoscaling.metrics, so that a v1alpha1 client
// that writes the object back loses none of them. It is the same device as
// autoscaling/v1's autoscaling.alpha.kubernetes.io/metrics.
const MetricsAnnotation = "inferencestack.io/v1alpha2-autoscaling-metrics"

// SpecAnnotation holds, on an object read through v1alpha1, the spec
// fields of v1alpha2 that v1alpha1 has no place for (networking.allowedFrom
// and every field added in v1alpha2 after it), as a JSON merge patch
// (RFC 7386) onto the v1alpha2 spec the rest of the v1alpha1 object converts
// to, so that a v1alpha1 client that writes the object back loses none of
// them, and a field added to v1alpha2 needs no conversion code. The
// autoscaling metrics keep their own, older MetricsAnnotation.
const SpecAnnotation = "inferencestack.io/v1alpha2-spec"
