// Package validation validates a v1alpha2 InferenceStack by the rules the
// API server enforces on a v1alpha2 write: the v1alpha2 version's OpenAPI
// schema, its list types and its CEL rules, read from the generated CRD
// (operator/config/crd) and run with the API server's own code
// (k8s.io/apiextensions-apiserver), so that no rule is written twice.
//
// The operator needs it for what reaches v1alpha2 without a v1alpha2 write:
// fields that a v1alpha1 client wrote into the annotation
// v1alpha2.SpecAnnotation, which the API server validated only as a string.
package validation

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/config/crd"
)

// validator is the v1alpha2 version's schema, ready to validate with.
type validator struct {
	structural *structuralschema.Structural
	schema     apiservervalidation.SchemaValidator
	cel        *cel.Validator
}

// load reads the v1alpha2 schema from the embedded CRD once.
var load = sync.OnceValues(func() (*validator, error) {
	return newValidator(crd.InferenceStacks, v1alpha2.GroupVersion.Version)
})

// newValidator is the validator of version of the CRD in data.
func newValidator(data []byte, version string) (*validator, error) {
	var c apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		return nil, fmt.Errorf("reading the InferenceStack CRD (operator/config/crd/bases): %w", err)
	}
	var external *apiextensionsv1.JSONSchemaProps
	for _, v := range c.Spec.Versions {
		if v.Name == version && v.Schema != nil {
			external = v.Schema.OpenAPIV3Schema
		}
	}
	if external == nil {
		return nil, fmt.Errorf("the InferenceStack CRD (operator/config/crd/bases) has no schema for version %s: run make manifests", version)
	}
	internal := &apiextensions.JSONSchemaProps{}
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(external, internal, nil); err != nil {
		return nil, fmt.Errorf("the %s schema of the InferenceStack CRD: %w", version, err)
	}
	structural, err := structuralschema.NewStructural(internal)
	if err != nil {
		return nil, fmt.Errorf("the %s schema of the InferenceStack CRD is not structural: %w", version, err)
	}
	schema, _, err := apiservervalidation.NewSchemaValidator(internal)
	if err != nil {
		return nil, fmt.Errorf("the %s schema of the InferenceStack CRD: %w", version, err)
	}
	return &validator{structural: structural, schema: schema, cel: cel.NewValidator(structural, true, celconfig.PerCallLimit)}, nil
}

// Validate is what the API server would refuse of hub's spec on a v1alpha2
// create (after its defaulting, which Validate applies to a copy): the
// schema's types, formats, patterns, enums and bounds, list uniqueness and
// the CEL rules, each error at the v1alpha2 field path with the CRD's
// message. Nil when the API server would admit it. Rules that compare with
// the previous object (oldSelf) are not checked: they need one.
func Validate(hub *v1alpha2.InferenceStack) field.ErrorList {
	v, err := load()
	if err != nil {
		return field.ErrorList{field.InternalError(nil, err)}
	}
	return v.validate(hub)
}

func (v *validator) validate(hub *v1alpha2.InferenceStack) field.ErrorList {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&v1alpha2.InferenceStack{Spec: *hub.Spec.DeepCopy()})
	if err != nil {
		return field.ErrorList{field.InternalError(field.NewPath("spec"), err)}
	}
	// What a create is validated on: apiVersion, kind, the names the CEL
	// rules may read (metadata.name, generateName) and the spec; the status
	// is the operator's, written through its own subresource.
	obj["apiVersion"] = v1alpha2.GroupVersion.String()
	obj["kind"] = "InferenceStack"
	meta := map[string]any{}
	if hub.Name != "" {
		meta["name"] = hub.Name
	}
	if hub.GenerateName != "" {
		meta["generateName"] = hub.GenerateName
	}
	obj["metadata"] = meta
	delete(obj, "status")
	structuraldefaulting.Default(obj, v.structural)
	errs := apiservervalidation.ValidateCustomResource(nil, obj, v.schema)
	errs = append(errs, listtype.ValidateListSetsAndMaps(nil, v.structural, obj)...)
	if v.cel != nil {
		celErrs, _ := v.cel.Validate(context.Background(), nil, v.structural, obj, nil, celconfig.RuntimeCELCostBudget)
		errs = append(errs, celErrs...)
	}
	return errs
}

// Defaulted is spec with the v1alpha2 schema's defaults applied, as the API
// server applies them to every v1alpha2 object it stores or reads from
// storage. (Conversion compares with it: a spec the API server defaulted
// differs from the one a v1alpha1 annotation gave only by those defaults.)
func Defaulted(spec v1alpha2.InferenceStackSpec) (v1alpha2.InferenceStackSpec, error) {
	v, err := load()
	if err != nil {
		return spec, err
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&v1alpha2.InferenceStack{Spec: *spec.DeepCopy()})
	if err != nil {
		return spec, err
	}
	structuraldefaulting.Default(obj, v.structural)
	var out v1alpha2.InferenceStack
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, &out); err != nil {
		return spec, err
	}
	return out.Spec, nil
}
