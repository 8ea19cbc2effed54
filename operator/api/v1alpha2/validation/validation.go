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
	"slices"
	"strings"
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
	// internal is the schema the others are made of.
	internal   *apiextensions.JSONSchemaProps
	structural *structuralschema.Structural
	schema     apiservervalidation.SchemaValidator
	// cel holds the CEL validators made so far, by the rules they hold
	// (celFor).
	mu  sync.Mutex
	cel map[string]*celValidator
}

// celValidator is the API server's CEL validator of a schema that holds
// only some of the CRD's rules, and that schema.
type celValidator struct {
	structural *structuralschema.Structural
	cel        *cel.Validator
}

// maxCELValidators bounds how many sets of rules are kept compiled at once.
const maxCELValidators = 16

// load reads the v1alpha2 schema from the embedded CRD once.
var load = sync.OnceValues(func() (*validator, error) {
	return newValidator(crd.InferenceStacks, v1alpha2.GroupVersion.Version)
})

// newValidator is the validator of version of the CRD in data. It compiles
// no CEL rule: celFor does, for the fields an object has.
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
	return &validator{internal: internal, structural: structural, schema: schema, cel: map[string]*celValidator{}}, nil
}

// celFor is the CEL validator of obj: the API server's, made of the schema
// with the CEL rules of the fields obj has, and none of the others. The
// API server evaluates a rule only on a value that is there, so it judges
// obj exactly as the validator of every rule would
// (TestRulesOfAbsentFieldsChangeNoVerdict), and the 80 rules of the CRD
// are not all compiled and kept for objects that use a few of them (a
// starter stack: 6 MB less heap). Validators are kept by the set of rules
// they hold, so stacks of the same shape share one.
func (v *validator) celFor(obj map[string]any) (*celValidator, error) {
	var kept []string
	pruned := withRulesOf(*v.internal, []any{obj}, "", &kept)
	slices.Sort(kept)
	key := strings.Join(kept, "\x00")
	v.mu.Lock()
	defer v.mu.Unlock()
	if c, ok := v.cel[key]; ok {
		return c, nil
	}
	structural, err := structuralschema.NewStructural(&pruned)
	if err != nil {
		return nil, err
	}
	if len(v.cel) >= maxCELValidators {
		clear(v.cel)
	}
	c := &celValidator{structural: structural, cel: cel.NewValidator(structural, true, celconfig.PerCallLimit)}
	v.cel[key] = c
	return c, nil
}

// withRulesOf is a copy of s, the schema of values (every value at that
// place of the object: one per list item or map entry), that keeps the
// CEL rules of a place only where values holds something there; the path
// of each place whose rules it keeps is added to kept. A value that is
// there but null keeps its place's rules (the API server skips them; more
// rules compiled change no verdict).
func withRulesOf(s apiextensions.JSONSchemaProps, values []any, path string, kept *[]string) apiextensions.JSONSchemaProps {
	if len(values) == 0 {
		s.XValidations = nil
	} else if len(s.XValidations) > 0 {
		*kept = append(*kept, path)
	}
	if len(s.Properties) > 0 {
		props := make(map[string]apiextensions.JSONSchemaProps, len(s.Properties))
		for name, p := range s.Properties {
			var at []any
			for _, v := range values {
				if m, ok := v.(map[string]any); ok {
					if cv, ok := m[name]; ok {
						at = append(at, cv)
					}
				}
			}
			props[name] = withRulesOf(p, at, path+"."+name, kept)
		}
		s.Properties = props
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		var at []any
		for _, v := range values {
			if m, ok := v.(map[string]any); ok {
				for name, cv := range m {
					if _, known := s.Properties[name]; !known {
						at = append(at, cv)
					}
				}
			}
		}
		item := withRulesOf(*s.AdditionalProperties.Schema, at, path+".*", kept)
		s.AdditionalProperties = &apiextensions.JSONSchemaPropsOrBool{Allows: s.AdditionalProperties.Allows, Schema: &item}
	}
	if s.Items != nil && s.Items.Schema != nil {
		var at []any
		for _, v := range values {
			if l, ok := v.([]any); ok {
				at = append(at, l...)
			}
		}
		item := withRulesOf(*s.Items.Schema, at, path+"[]", kept)
		s.Items = &apiextensions.JSONSchemaPropsOrArray{Schema: &item}
	}
	return s
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
	obj, err := v.object(hub)
	if err != nil {
		return field.ErrorList{field.InternalError(field.NewPath("spec"), err)}
	}
	errs := apiservervalidation.ValidateCustomResource(nil, obj, v.schema)
	errs = append(errs, listtype.ValidateListSetsAndMaps(nil, v.structural, obj)...)
	return append(errs, v.celErrors(obj)...)
}

// object is what a create of hub is validated on, defaulted: apiVersion,
// kind, the names the CEL rules may read (metadata.name, generateName) and
// the spec; the status is the operator's, written through its own
// subresource.
func (v *validator) object(hub *v1alpha2.InferenceStack) (map[string]any, error) {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&v1alpha2.InferenceStack{Spec: *hub.Spec.DeepCopy()})
	if err != nil {
		return nil, err
	}
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
	return obj, nil
}

// celErrors are the CEL rules' verdicts on obj.
func (v *validator) celErrors(obj map[string]any) field.ErrorList {
	c, err := v.celFor(obj)
	if err != nil {
		return field.ErrorList{field.InternalError(nil, err)}
	}
	if c.cel == nil {
		return nil
	}
	errs, _ := c.cel.Validate(context.Background(), nil, c.structural, obj, nil, celconfig.RuntimeCELCostBudget)
	// The validator walks the schema's properties in map order: sorted, a
	// stack's verdict reads the same every time it is judged (the status
	// names it).
	slices.SortStableFunc(errs, func(a, b *field.Error) int { return strings.Compare(a.Error(), b.Error()) })
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
