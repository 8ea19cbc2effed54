package v1alpha1

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"sigs.k8s.io/controller-runtime/pkg/conversion"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/api/v1alpha2/validation"
)

// v1alpha1 converts through the hub, v1alpha2. The two versions differ in
// where the replica count lives and in the autoscaling targets:
//
//	v1alpha1 spec.workload.replicas                          v1alpha2 spec.scaling.replicas
//	v1alpha1 spec.workload.autoscaling                       v1alpha2 spec.scaling.autoscaling
//	v1alpha1 spec.workload.podDisruptionBudget               v1alpha2 spec.scaling.podDisruptionBudget
//	v1alpha1 ...autoscaling.targetCPUUtilizationPercentage   v1alpha2 ...autoscaling.metrics[resource=cpu]
//
// Everything else has the same JSON shape in both and is copied through it.
// What v1alpha1 cannot express (metrics besides one CPU target, their
// order) travels in the v1alpha2.MetricsAnnotation annotation, as
// autoscaling/v1 keeps autoscaling/v2's metrics; every other v1alpha2 field
// v1alpha1 lacks, in the v1alpha2.SpecAnnotation.
//
// The two annotations are conversion's own: only conversion reads and
// writes them, and conversion never fails because of them (one object's
// annotation must never fail a ConversionReview, and with it every list and
// watch of the cluster). The rules (docs/api-versions.md):
//
//   - ConvertTo applies an annotation field by field: a field v1alpha1 has
//     is v1alpha1's (its own field wins over what the spec annotation says
//     of it), and an annotation that cannot be read (not JSON, not of the
//     v1alpha2 shape, a field v1alpha2 does not have) is not applied at all.
//     AnnotationProblems reports both, on the v1alpha2 object.
//   - The hub carries an annotation's bytes, under the same key, whenever
//     ConvertFrom would not write those exact bytes again (an annotation
//     that is pretty-printed, `{}`, inert, partly ignored or unreadable), so
//     that a v1alpha1 client's annotation is never rewritten.
//   - ConvertFrom writes the carried bytes back when they still describe the
//     v1alpha2 spec exactly (ConvertTo of the result gives that spec), and
//     the canonical annotations (the compact merge patch, the metrics' JSON)
//     otherwise: a v1alpha2 client's change of the spec replaces them.

var _ conversion.Convertible = &InferenceStack{}

// ConvertTo converts this InferenceStack to the hub version. It fails only
// for another hub type: an annotation that cannot be applied is kept on the
// hub as it is and reported by AnnotationProblems.
func (src *InferenceStack) ConvertTo(dstRaw conversion.Hub) error {
	dst, ok := dstRaw.(*v1alpha2.InferenceStack)
	if !ok {
		return fmt.Errorf("v1alpha1 converts only to v1alpha2, not %T", dstRaw)
	}
	hub, _ := src.toHub()
	hub.TypeMeta = dst.TypeMeta
	*dst = *hub
	// What ConvertFrom would not write back byte for byte rides on the hub.
	canonical := fromHub(hub, false)
	for _, key := range []string{v1alpha2.MetricsAnnotation, v1alpha2.SpecAnnotation} {
		value, ok := src.Annotations[key]
		if !ok {
			continue
		}
		if again, ok := canonical.Annotations[key]; ok && again == value {
			continue
		}
		if dst.Annotations == nil {
			dst.Annotations = map[string]string{}
		}
		dst.Annotations[key] = value
	}
	return nil
}

// AnnotationProblems is nil when hub carries no v1alpha1 annotation
// (v1alpha2.SpecAnnotation, v1alpha2.MetricsAnnotation) that conversion
// could not apply; otherwise one error for each: an unreadable annotation
// (its path names it), and each field of the spec annotation that v1alpha1
// has as a field of its own, which wins (its path is the v1alpha2 field, the
// message names the annotation and the v1alpha1 field). An annotation that
// no longer describes hub's spec (a v1alpha2 client changed the spec since)
// is no problem: the next conversion to v1alpha1 replaces it.
func AnnotationProblems(hub *v1alpha2.InferenceStack) field.ErrorList {
	_, spec := hub.Annotations[v1alpha2.SpecAnnotation]
	_, metrics := hub.Annotations[v1alpha2.MetricsAnnotation]
	if !spec && !metrics {
		return nil
	}
	carried := fromHub(hub, true)
	again, problems := carried.toHub()
	if !sameSpec(again, hub, true) {
		return nil
	}
	return problems
}

// annotationPath is where a field error about an annotation points.
func annotationPath(key string) *field.Path {
	return field.NewPath("metadata", "annotations").Key(key)
}

// toHub is the hub object src converts to, without the carried annotations,
// and what of src's annotations could not be applied.
func (src *InferenceStack) toHub() (*v1alpha2.InferenceStack, field.ErrorList) {
	var problems field.ErrorList
	metrics, err := src.annotatedMetrics()
	if err != nil {
		problems = append(problems, field.Invalid(annotationPath(v1alpha2.MetricsAnnotation), src.Annotations[v1alpha2.MetricsAnnotation],
			fmt.Sprintf("annotation %s is not the JSON of spec.scaling.autoscaling.metrics (%v), so it is not applied: "+
				"remove it, or set the metrics through v1alpha2", v1alpha2.MetricsAnnotation, err)))
		metrics = nil
	}
	hub := src.fieldsToHub(metrics)
	if patch, ok := src.Annotations[v1alpha2.SpecAnnotation]; ok {
		problems = append(problems, applySpecAnnotation(src, hub, metrics, patch)...)
	}
	return hub, problems
}

// fieldsToHub is the hub object src's fields (and metrics, those of the
// metrics annotation) convert to, without the spec annotation.
func (src *InferenceStack) fieldsToHub(metrics []v1alpha2.ResourceMetric) *v1alpha2.InferenceStack {
	annotations := maps.Clone(src.Annotations)
	for _, key := range []string{v1alpha2.MetricsAnnotation, v1alpha2.SpecAnnotation} {
		delete(annotations, key)
	}
	if len(annotations) == 0 {
		annotations = nil
	}
	dst := &v1alpha2.InferenceStack{}
	src.ObjectMeta.DeepCopyInto(&dst.ObjectMeta)
	dst.Annotations = annotations
	dst.Spec = specFields(src.Spec, metrics)
	mustViaJSON(src.Status, &dst.Status)
	return dst
}

// specFields is the v1alpha2 spec of a v1alpha1 spec's fields.
func specFields(in InferenceStackSpec, metrics []v1alpha2.ResourceMetric) v1alpha2.InferenceStackSpec {
	var out v1alpha2.InferenceStackSpec
	mustViaJSON(in, &out)
	w := in.Workload
	if w == nil || (w.Replicas == nil && w.Autoscaling == nil && w.PodDisruptionBudget == nil) {
		return out
	}
	s := &v1alpha2.ScalingSpec{Replicas: w.Replicas, PodDisruptionBudget: (*v1alpha2.PodDisruptionBudgetSpec)(w.PodDisruptionBudget)}
	if a := w.Autoscaling; a != nil {
		s.Autoscaling = &v1alpha2.AutoscalingSpec{MinReplicas: a.MinReplicas, MaxReplicas: a.MaxReplicas,
			Metrics: withCPU(metrics, cpuTarget(metrics, a.TargetCPUUtilizationPercentage))}
	}
	out.Scaling = s.DeepCopy()
	if reflect.DeepEqual(*out.Workload, v1alpha2.WorkloadSpec{}) {
		// Only moved fields: v1alpha2 has no workload.
		out.Workload = nil
	}
	return out
}

// applySpecAnnotation merges the spec annotation (a JSON merge patch onto
// the v1alpha2 spec) into hub's spec, field by field: only what v1alpha1
// has no field for is taken from it. An annotation that is not a merge
// patch of v1alpha2 fields is not applied at all.
func applySpecAnnotation(src *InferenceStack, hub *v1alpha2.InferenceStack, metrics []v1alpha2.ResourceMetric, patch string) field.ErrorList {
	at := annotationPath(v1alpha2.SpecAnnotation)
	unreadable := func(err error) field.ErrorList {
		return field.ErrorList{field.Invalid(at, patch, fmt.Sprintf("annotation %s is not a JSON merge patch of v1alpha2 spec fields (%v), so it is not applied: "+
			"remove it, or set these fields through v1alpha2 (docs/api-versions.md)", v1alpha2.SpecAnnotation, err))}
	}
	if !json.Valid([]byte(patch)) || !strings.HasPrefix(strings.TrimSpace(patch), "{") {
		return unreadable(errors.New("not a JSON object"))
	}
	base := mustJSON(hub.Spec)
	mergedJSON, err := jsonpatch.MergePatch(base, []byte(patch))
	if err != nil {
		return unreadable(err)
	}
	var merged v1alpha2.InferenceStackSpec
	dec := json.NewDecoder(bytes.NewReader(mergedJSON))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&merged); err != nil {
		return unreadable(err)
	}
	// What of the merged spec v1alpha1 can say with its fields (expressible)
	// must be what its fields say: a difference is the annotation setting
	// a field of v1alpha1's, which v1alpha1 wins.
	expressible := specFields(specToV1alpha1(merged, false), metrics)
	var problems field.ErrorList
	for _, p := range leaves(mustDiff(hub.Spec, expressible), nil) {
		problems = append(problems, field.Forbidden(field.NewPath("spec", p...),
			fmt.Sprintf("set by %s in v1alpha1, which wins: annotation %s may hold only fields v1alpha1 lacks, so this one is ignored "+
				"(remove it from the annotation, or write the stack through v1alpha2)", v1alpha1Field(p), v1alpha2.SpecAnnotation)))
	}
	// The rest, what only v1alpha2 has, applies. (The metrics are
	// v1alpha1's targetCPUUtilizationPercentage and the metrics
	// annotation: a merge patch replaces a list whole.)
	only := object(mustDiff(expressible, merged))
	if only == nil {
		only = map[string]any{}
	}
	if scaling, ok := only["scaling"].(map[string]any); ok {
		if a, ok := scaling["autoscaling"].(map[string]any); ok {
			if _, ok := a["metrics"]; ok {
				delete(a, "metrics")
				if len(a) == 0 {
					delete(scaling, "autoscaling")
					if len(scaling) == 0 {
						delete(only, "scaling")
					}
				}
			}
		}
	}
	result, err := jsonpatch.MergePatch(base, mustJSON(only))
	var spec v1alpha2.InferenceStackSpec
	if err == nil {
		err = json.Unmarshal(result, &spec)
	}
	if err != nil || len(leaves(mustDiff(hub.Spec, specFields(specToV1alpha1(spec, false), metrics)), nil)) > 0 {
		// A field v1alpha1 has, changed through a list the annotation
		// replaces: nothing of it applies.
		return append(problems, field.Invalid(at, patch, fmt.Sprintf("annotation %s changes fields v1alpha1 has through a list it replaces, so it is not applied: "+
			"remove it, or set these fields through v1alpha2", v1alpha2.SpecAnnotation)))
	}
	hub.Spec = spec
	return problems
}

// v1alpha1Field names the v1alpha1 field a v1alpha2 spec path (below spec)
// is.
func v1alpha1Field(p []string) string {
	if p[0] != "scaling" {
		return "spec." + strings.Join(p, ".")
	}
	switch {
	case len(p) == 1:
		return "spec.workload.replicas, autoscaling and podDisruptionBudget"
	case len(p) >= 3 && p[1] == "autoscaling" && p[2] == "metrics":
		return "spec.workload.autoscaling.targetCPUUtilizationPercentage (and annotation " + v1alpha2.MetricsAnnotation + ")"
	default:
		return "spec.workload." + strings.Join(p[1:], ".")
	}
}

// leaves are the paths a JSON merge patch sets or removes; creating an
// empty object (a container for fields only v1alpha2 has) sets nothing.
func leaves(patch []byte, prefix []string) [][]string {
	var doc map[string]any
	if patch == nil || json.Unmarshal(patch, &doc) != nil {
		return nil
	}
	return leavesOf(doc, prefix)
}

func leavesOf(doc map[string]any, prefix []string) [][]string {
	var out [][]string
	for _, k := range slices.Sorted(maps.Keys(doc)) {
		p := append(slices.Clone(prefix), k)
		switch v := doc[k].(type) {
		case map[string]any:
			out = append(out, leavesOf(v, p)...)
		default:
			out = append(out, p)
		}
	}
	return out
}

// ConvertFrom converts from the hub version to this InferenceStack. It
// fails only for another hub type.
func (dst *InferenceStack) ConvertFrom(srcRaw conversion.Hub) error {
	src, ok := srcRaw.(*v1alpha2.InferenceStack)
	if !ok {
		return fmt.Errorf("v1alpha1 converts only from v1alpha2, not %T", srcRaw)
	}
	out := fromHub(src, true)
	out.TypeMeta = dst.TypeMeta
	*dst = *out
	return nil
}

// fromHub is the v1alpha1 object of hub. With carried, the annotations hub
// carries are written back as they are when they still describe hub's spec
// exactly; otherwise (and without carried) the canonical ones are written.
func fromHub(hub *v1alpha2.InferenceStack, carried bool) *InferenceStack {
	out := &InferenceStack{}
	hub.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	delete(out.Annotations, v1alpha2.SpecAnnotation)
	delete(out.Annotations, v1alpha2.MetricsAnnotation)
	out.Spec = specToV1alpha1(hub.Spec, true)
	mustViaJSON(hub.Status, &out.Status)
	if raw := metricsAnnotation(hub.Spec.Scaling); raw != "" {
		out.setAnnotation(v1alpha2.MetricsAnnotation, raw)
	}
	if carried {
		spec, hasSpec := hub.Annotations[v1alpha2.SpecAnnotation]
		metrics, hasMetrics := hub.Annotations[v1alpha2.MetricsAnnotation]
		if hasSpec || hasMetrics {
			candidate := out.DeepCopy()
			if hasMetrics {
				candidate.setAnnotation(v1alpha2.MetricsAnnotation, metrics)
			}
			if hasSpec {
				candidate.setAnnotation(v1alpha2.SpecAnnotation, spec)
			} else {
				candidate.setSpecAnnotation(hub.Spec)
			}
			// The API server's defaults inside what the carried spec
			// annotation sets (a volume type's defaults in podOverrides)
			// do not make it stale; a canonical one computed here is
			// exact or nothing.
			if again, _ := candidate.toHub(); sameSpec(again, hub, hasSpec) {
				return candidate
			}
		}
	}
	out.setSpecAnnotation(hub.Spec)
	if len(out.Annotations) == 0 && hub.Annotations == nil {
		out.Annotations = nil
	}
	return out
}

// setSpecAnnotation sets the spec annotation to the canonical merge patch
// from what the rest of the object converts to onto spec (none when that
// is spec already).
func (dst *InferenceStack) setSpecAnnotation(spec v1alpha2.InferenceStackSpec) {
	delete(dst.Annotations, v1alpha2.SpecAnnotation)
	metrics, _ := dst.annotatedMetrics()
	patch := mustDiff(specFields(dst.Spec, metrics), spec)
	if patch != nil {
		dst.setAnnotation(v1alpha2.SpecAnnotation, string(patch))
	}
}

func (dst *InferenceStack) setAnnotation(key, value string) {
	if dst.Annotations == nil {
		dst.Annotations = map[string]string{}
	}
	dst.Annotations[key] = value
}

// specToV1alpha1 is the v1alpha1 spec of what v1alpha1 has fields for in
// spec. With prune, an object that only holds fields v1alpha1 lacks
// (networking with only allowedFrom, workload with only workers) is left
// out rather than written empty: it is the spec annotation's.
func specToV1alpha1(spec v1alpha2.InferenceStackSpec, prune bool) InferenceStackSpec {
	var out InferenceStackSpec
	mustViaJSON(spec, &out)
	if prune {
		if out.Networking != nil && mustJSONString(out.Networking) == "{}" && mustJSONString(spec.Networking) != "{}" {
			out.Networking = nil
		}
		if out.Workload != nil && mustJSONString(out.Workload) == "{}" && mustJSONString(spec.Workload) != "{}" {
			out.Workload = nil
		}
	}
	s := spec.Scaling
	if s == nil || (*s == v1alpha2.ScalingSpec{}) {
		return out
	}
	if out.Workload == nil {
		out.Workload = &WorkloadSpec{}
	}
	w := out.Workload
	w.Replicas = s.Replicas
	w.PodDisruptionBudget = (*PodDisruptionBudgetSpec)(s.PodDisruptionBudget.DeepCopy())
	if a := s.Autoscaling; a != nil {
		w.Autoscaling = &AutoscalingSpec{MinReplicas: a.MinReplicas, MaxReplicas: a.MaxReplicas}
		switch i := slices.IndexFunc(a.Metrics, func(m v1alpha2.ResourceMetric) bool { return m.Resource == v1alpha2.ResourceCPU }); {
		case i >= 0:
			w.Autoscaling.TargetCPUUtilizationPercentage = new(a.Metrics[i].AverageUtilization)
		case a.Metrics != nil:
			// No CPU target: the metrics annotation says so, and the
			// field holds v1alpha1's default, which the API server would
			// fill in anyway (cpuTarget).
			w.Autoscaling.TargetCPUUtilizationPercentage = new(int32(defaultCPU))
		}
	}
	return out
}

// metricsAnnotation is the canonical metrics annotation of scaling: the
// JSON of its metrics when v1alpha1's one CPU target cannot say them, ""
// otherwise.
func metricsAnnotation(s *v1alpha2.ScalingSpec) string {
	if s == nil || s.Autoscaling == nil || s.Autoscaling.Metrics == nil {
		return ""
	}
	m := s.Autoscaling.Metrics
	if len(m) == 1 && m[0].Resource == v1alpha2.ResourceCPU {
		return ""
	}
	return mustJSONString(m)
}

// sameSpec reports whether converted, what a v1alpha1 object converts to,
// has hub's spec, byte for byte in JSON: as it is, or (withDefaults) with
// the v1alpha2 defaults the API server applies to what it stores (hub may
// come from storage, converted never does).
func sameSpec(converted, hub *v1alpha2.InferenceStack, withDefaults bool) bool {
	want := mustJSON(hub.Spec)
	if bytes.Equal(mustJSON(converted.Spec), want) {
		return true
	}
	if !withDefaults {
		return false
	}
	defaulted, err := validation.Defaulted(converted.Spec)
	return err == nil && bytes.Equal(mustJSON(defaulted), want)
}

// mustDiff is the JSON merge patch (RFC 7386) from one spec to another,
// nil when they are the same. (Numbers keep their digits: evanphx's
// CreateMergePatch reads them as float64.)
func mustDiff(from, to v1alpha2.InferenceStackSpec) []byte {
	patch := mergePatchOf(object(mustJSON(from)), object(mustJSON(to)))
	if len(patch) == 0 {
		return nil
	}
	return mustJSON(patch)
}

// mergePatchOf is the merge patch that turns a into b.
func mergePatchOf(a, b map[string]any) map[string]any {
	patch := map[string]any{}
	for k := range a {
		if _, ok := b[k]; !ok {
			patch[k] = nil
		}
	}
	for k, vb := range b {
		va, ok := a[k]
		oa, aIsObject := va.(map[string]any)
		ob, bIsObject := vb.(map[string]any)
		switch {
		case ok && aIsObject && bIsObject:
			if sub := mergePatchOf(oa, ob); len(sub) > 0 {
				patch[k] = sub
			}
		case !ok || !reflect.DeepEqual(va, vb):
			patch[k] = vb
		}
	}
	return patch
}

// object is the JSON object data, its numbers as json.Number.
func object(data []byte) map[string]any {
	var out map[string]any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if data != nil {
		if err := dec.Decode(&out); err != nil {
			panic(fmt.Sprintf("decoding a JSON object: %v", err))
		}
	}
	return out
}

// annotatedMetrics is the metrics list of the v1alpha2.MetricsAnnotation
// (nil without it).
func (src *InferenceStack) annotatedMetrics() ([]v1alpha2.ResourceMetric, error) {
	raw, ok := src.Annotations[v1alpha2.MetricsAnnotation]
	if !ok {
		return nil, nil
	}
	var metrics []v1alpha2.ResourceMetric
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&metrics); err != nil {
		return nil, fmt.Errorf("InferenceStack %s/%s: annotation %s: %w: remove it, or set it to the JSON of spec.scaling.autoscaling.metrics of v1alpha2",
			src.Namespace, src.Name, v1alpha2.MetricsAnnotation, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("InferenceStack %s/%s: annotation %s: more than one JSON value: remove it, or set it to the JSON of spec.scaling.autoscaling.metrics of v1alpha2",
			src.Namespace, src.Name, v1alpha2.MetricsAnnotation)
	}
	return metrics, nil
}

// defaultCPU is v1alpha1's default targetCPUUtilizationPercentage, which
// the API server fills in wherever workload.autoscaling has none.
const defaultCPU = 80

// cpuTarget is the CPU target of a v1alpha1 autoscaling beside the metrics
// of the annotation (nil without it): none when the annotation lists
// metrics but no CPU target and targetCPUUtilizationPercentage is
// v1alpha1's default. v1alpha2 metrics without a CPU target (a memory
// target alone) have no v1alpha1 spelling but the annotation: the field
// holds the default, which the API server fills in wherever it is unset,
// and which must not add a CPU target on the way back.
func cpuTarget(kept []v1alpha2.ResourceMetric, cpu *int32) *int32 {
	if cpu != nil && *cpu == defaultCPU && kept != nil &&
		!slices.ContainsFunc(kept, func(m v1alpha2.ResourceMetric) bool { return m.Resource == v1alpha2.ResourceCPU }) {
		return nil
	}
	return cpu
}

// withCPU is the v1alpha2 metrics of a v1alpha1 autoscaling: kept, the ones
// the annotation held (nil when it held none), with the CPU target set to
// cpu: replaced where the list has one, first when it has none, removed when
// cpu is nil.
func withCPU(kept []v1alpha2.ResourceMetric, cpu *int32) []v1alpha2.ResourceMetric {
	out := slices.Clone(kept)
	i := slices.IndexFunc(out, func(m v1alpha2.ResourceMetric) bool { return m.Resource == v1alpha2.ResourceCPU })
	switch {
	case cpu == nil && i >= 0:
		out = slices.Delete(out, i, i+1)
	case cpu != nil && i >= 0:
		out[i].AverageUtilization = *cpu
	case cpu != nil:
		out = slices.Insert(out, 0, v1alpha2.ResourceMetric{Resource: v1alpha2.ResourceCPU, AverageUtilization: *cpu})
	}
	if kept == nil && len(out) == 0 {
		return nil
	}
	return out
}

// The API types always marshal (no channels, funcs or cyclic values), and
// the JSON they marshal to always unmarshals into the other version's
// types (they share that shape): a failure is a bug of the types, not of
// an object's content.

func mustJSON(v any) []byte {
	data, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("marshalling %T: %v", v, err))
	}
	return data
}

func mustJSONString(v any) string { return string(mustJSON(v)) }

func mustUnmarshal(data []byte, out any) {
	if data == nil {
		return
	}
	if err := json.Unmarshal(data, out); err != nil {
		panic(fmt.Sprintf("unmarshalling into %T: %v", out, err))
	}
}

// mustViaJSON copies in to out through their JSON (the parts the two
// versions share have the same JSON shape; fields only one of them has are
// dropped here and moved by the callers).
func mustViaJSON(in, out any) { mustUnmarshal(mustJSON(in), out) }
