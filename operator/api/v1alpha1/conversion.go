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

	"sigs.k8s.io/controller-runtime/pkg/conversion"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
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
// v1alpha1 lacks, in the v1alpha2.SpecAnnotation. An empty workload: {} is
// kept; one that held only moved fields comes back absent when it is empty
// in v1alpha2 too; an empty scaling: {} (the same as none: both mean the
// defaults) is kept in the spec annotation.

var _ conversion.Convertible = &InferenceStack{}

// ConvertTo converts this InferenceStack to the hub version.
func (src *InferenceStack) ConvertTo(dstRaw conversion.Hub) error {
	dst, ok := dstRaw.(*v1alpha2.InferenceStack)
	if !ok {
		return fmt.Errorf("v1alpha1 converts only to v1alpha2, not %T", dstRaw)
	}
	if err := src.convertTo(dst); err != nil {
		return err
	}
	return src.applySpecAnnotation(dst)
}

// V1alpha2 is the stack as v1alpha2 sees it: what ConvertTo gives. The
// reconciler, which works on v1alpha1 objects, reads the spec fields only
// v1alpha2 has through it.
func (src *InferenceStack) V1alpha2() (*v1alpha2.InferenceStack, error) {
	hub := &v1alpha2.InferenceStack{}
	if err := src.ConvertTo(hub); err != nil {
		return nil, err
	}
	return hub, nil
}

// convertTo is ConvertTo without the v1alpha2.SpecAnnotation: the v1alpha2
// object the fields v1alpha1 has convert to.
func (src *InferenceStack) convertTo(dst *v1alpha2.InferenceStack) error {
	metrics, err := src.annotatedMetrics()
	if err != nil {
		return err
	}
	annotations := maps.Clone(src.Annotations)
	for _, key := range []string{v1alpha2.MetricsAnnotation, v1alpha2.SpecAnnotation} {
		if _, ok := annotations[key]; ok {
			delete(annotations, key)
			if len(annotations) == 0 && src.Annotations != nil {
				annotations = nil
			}
		}
	}
	*dst = v1alpha2.InferenceStack{TypeMeta: dst.TypeMeta}
	src.ObjectMeta.DeepCopyInto(&dst.ObjectMeta)
	dst.Annotations = annotations
	if err := viaJSON(src.Spec, &dst.Spec); err != nil {
		return err
	}
	if err := viaJSON(src.Status, &dst.Status); err != nil {
		return err
	}
	w := src.Spec.Workload
	if w == nil {
		return nil
	}
	if w.Replicas != nil || w.Autoscaling != nil || w.PodDisruptionBudget != nil {
		s := &v1alpha2.ScalingSpec{Replicas: w.Replicas, PodDisruptionBudget: (*v1alpha2.PodDisruptionBudgetSpec)(w.PodDisruptionBudget)}
		if a := w.Autoscaling; a != nil {
			s.Autoscaling = &v1alpha2.AutoscalingSpec{MinReplicas: a.MinReplicas, MaxReplicas: a.MaxReplicas,
				Metrics: withCPU(metrics, a.TargetCPUUtilizationPercentage)}
		}
		dst.Spec.Scaling = s.DeepCopy()
		if reflect.DeepEqual(*dst.Spec.Workload, v1alpha2.WorkloadSpec{}) {
			// Only moved fields: v1alpha2 has no workload.
			dst.Spec.Workload = nil
		}
	}
	return nil
}

// applySpecAnnotation merges the v1alpha2.SpecAnnotation into dst's spec.
// What the merge gives must be a v1alpha2 spec: a field v1alpha2 does not
// have (a typo in a hand-written annotation) is an error naming the
// annotation.
func (src *InferenceStack) applySpecAnnotation(dst *v1alpha2.InferenceStack) error {
	patch, ok := src.Annotations[v1alpha2.SpecAnnotation]
	if !ok {
		return nil
	}
	invalid := func(err error) error {
		return fmt.Errorf("InferenceStack %s/%s: annotation %s: %w: remove it, or set these fields through v1alpha2 (its value is a JSON merge patch onto the v1alpha2 spec, docs/api-versions.md)",
			src.Namespace, src.Name, v1alpha2.SpecAnnotation, err)
	}
	if !json.Valid([]byte(patch)) || !strings.HasPrefix(strings.TrimSpace(patch), "{") {
		return invalid(errors.New("not a JSON object"))
	}
	doc, err := json.Marshal(dst.Spec)
	if err != nil {
		return err
	}
	merged, err := jsonpatch.MergePatch(doc, []byte(patch))
	if err != nil {
		return invalid(err)
	}
	spec := v1alpha2.InferenceStackSpec{}
	dec := json.NewDecoder(bytes.NewReader(merged))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		return invalid(err)
	}
	dst.Spec = spec
	return nil
}

// ConvertFrom converts from the hub version to this InferenceStack.
func (dst *InferenceStack) ConvertFrom(srcRaw conversion.Hub) error {
	src, ok := srcRaw.(*v1alpha2.InferenceStack)
	if !ok {
		return fmt.Errorf("v1alpha1 converts only from v1alpha2, not %T", srcRaw)
	}
	*dst = InferenceStack{TypeMeta: dst.TypeMeta}
	src.ObjectMeta.DeepCopyInto(&dst.ObjectMeta)
	// Only this conversion writes it (a v1alpha2 object has the fields).
	delete(dst.Annotations, v1alpha2.SpecAnnotation)
	if err := viaJSON(src.Spec, &dst.Spec); err != nil {
		return err
	}
	if err := viaJSON(src.Status, &dst.Status); err != nil {
		return err
	}
	if err := dst.scalingFrom(src.Spec.Scaling); err != nil {
		return err
	}
	// What the fields above do not carry back travels in the annotation.
	back := &v1alpha2.InferenceStack{}
	if err := dst.convertTo(back); err != nil {
		return err
	}
	patch, err := mergePatch(back.Spec, src.Spec)
	if err != nil || patch == nil {
		return err
	}
	if dst.Annotations == nil {
		dst.Annotations = map[string]string{}
	}
	dst.Annotations[v1alpha2.SpecAnnotation] = string(patch)
	return nil
}

// scalingFrom moves v1alpha2's spec.scaling into the workload, and the
// metrics v1alpha1 cannot express into the v1alpha2.MetricsAnnotation.
func (dst *InferenceStack) scalingFrom(scaling *v1alpha2.ScalingSpec) error {
	s := scaling.DeepCopy()
	if s == nil || (*s == v1alpha2.ScalingSpec{}) {
		return nil
	}
	if dst.Spec.Workload == nil {
		dst.Spec.Workload = &WorkloadSpec{}
	}
	w := dst.Spec.Workload
	w.Replicas = s.Replicas
	w.PodDisruptionBudget = (*PodDisruptionBudgetSpec)(s.PodDisruptionBudget)
	if a := s.Autoscaling; a != nil {
		w.Autoscaling = &AutoscalingSpec{MinReplicas: a.MinReplicas, MaxReplicas: a.MaxReplicas}
		i := slices.IndexFunc(a.Metrics, func(m v1alpha2.ResourceMetric) bool { return m.Resource == v1alpha2.ResourceCPU })
		if i >= 0 {
			w.Autoscaling.TargetCPUUtilizationPercentage = &a.Metrics[i].AverageUtilization
		}
		if a.Metrics != nil && (len(a.Metrics) != 1 || i != 0) {
			raw, err := json.Marshal(a.Metrics)
			if err != nil {
				return err
			}
			if dst.Annotations == nil {
				dst.Annotations = map[string]string{}
			}
			dst.Annotations[v1alpha2.MetricsAnnotation] = string(raw)
		}
	}
	return nil
}

// mergePatch is the JSON merge patch from one spec to another, nil when
// they are the same.
func mergePatch(from, to v1alpha2.InferenceStackSpec) ([]byte, error) {
	a, err := json.Marshal(from)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(to)
	if err != nil {
		return nil, err
	}
	patch, err := jsonpatch.CreateMergePatch(a, b)
	if err != nil || string(patch) == "{}" {
		return nil, err
	}
	return patch, nil
}

// annotatedMetrics is the metrics list of the v1alpha2.MetricsAnnotation
// (nil without it).
func (src *InferenceStack) annotatedMetrics() ([]v1alpha2.ResourceMetric, error) {
	raw, ok := src.Annotations[v1alpha2.MetricsAnnotation]
	if !ok {
		return nil, nil
	}
	var metrics []v1alpha2.ResourceMetric
	if err := json.Unmarshal([]byte(raw), &metrics); err != nil {
		return nil, fmt.Errorf("InferenceStack %s/%s: annotation %s: %w: remove it, or set it to the JSON of spec.scaling.autoscaling.metrics of v1alpha2",
			src.Namespace, src.Name, v1alpha2.MetricsAnnotation, err)
	}
	return metrics, nil
}

// AutoscalingMetrics is what the stack's autoscaler aims at, in v1alpha2's
// terms (spec.scaling.autoscaling.metrics, as ConvertTo gives it): the
// metrics of the v1alpha2.MetricsAnnotation (what a v1alpha2 client wrote)
// with the CPU target of targetCPUUtilizationPercentage, or v1alpha2's
// default (CPU at 80%) when that leaves none; nil without autoscaling. A
// metric v1alpha2 would refuse (a resource other than cpu or memory, one
// twice, a target outside 1-100) is an error naming the annotation.
func (src *InferenceStack) AutoscalingMetrics() ([]v1alpha2.ResourceMetric, error) {
	w := src.Spec.Workload
	if w == nil || w.Autoscaling == nil {
		return nil, nil
	}
	kept, err := src.annotatedMetrics()
	if err != nil {
		return nil, err
	}
	seen := map[v1alpha2.ResourceName]bool{}
	for _, m := range kept {
		if (m.Resource != v1alpha2.ResourceCPU && m.Resource != v1alpha2.ResourceMemory) || seen[m.Resource] || m.AverageUtilization < 1 || m.AverageUtilization > 100 {
			return nil, fmt.Errorf("InferenceStack %s/%s: annotation %s: metric %+v: each of cpu and memory at most once, averageUtilization 1-100; "+
				"set spec.scaling.autoscaling.metrics through v1alpha2 instead", src.Namespace, src.Name, v1alpha2.MetricsAnnotation, m)
		}
		seen[m.Resource] = true
	}
	metrics := withCPU(kept, w.Autoscaling.TargetCPUUtilizationPercentage)
	if len(metrics) == 0 {
		metrics = []v1alpha2.ResourceMetric{{Resource: v1alpha2.ResourceCPU, AverageUtilization: 80}}
	}
	return metrics, nil
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

// viaJSON copies in to out through their JSON (the parts the two versions
// share have the same JSON shape; fields only one of them has are dropped
// here and moved by the callers).
func viaJSON(in, out any) error {
	data, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, out)
}
