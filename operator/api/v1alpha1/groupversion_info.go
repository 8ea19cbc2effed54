// Package v1alpha1 holds the inferencestack.io/v1alpha1 API: the
// InferenceStack kind, one installation of a Llama Stack server.
//
// +kubebuilder:object:generate=true
// +groupName=inferencestack.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the group and version of this API.
var GroupVersion = schema.GroupVersion{Group: "inferencestack.io", Version: "v1alpha1"}

// AddToScheme adds the types of this API to a runtime.Scheme.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &InferenceStack{}, &InferenceStackList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
