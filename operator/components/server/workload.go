package server

import (
	"fmt"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/runconfig"
)

// extras are the server's settings only v1alpha2 has, and the autoscaling
// metrics its requests must serve.
type extras struct {
	workers   *int32
	overrides *v1alpha2.PodOverrides
	metrics   []v1alpha2.ResourceMetric
}

// extrasOf reads workload.workers and workload.podOverrides and checks them
// (CheckOverrides).
func extrasOf(stack *v1alpha2.InferenceStack) (extras, error) {
	x := extras{metrics: stack.Spec.Scaling.MetricsOrDefault()}
	if w := stack.Spec.Workload; w != nil {
		x.workers, x.overrides = w.Workers, w.PodOverrides
	}
	if err := CheckOverrides(x.overrides); err != nil {
		return extras{}, fmt.Errorf("InferenceStack %s/%s: %w", stack.Namespace, stack.Name, err)
	}
	return x, nil
}

// operatorVolumes are the volumes the operator makes; a user volume cannot
// take their names, and a user mount may name the first three (always
// there).
var operatorVolumes = []string{volumeConfig, volumeData, volumeTmp, volumeTLS, volumeCA, volumeKubeCA, volumeProviders}

// CheckOverrides applies the rules of workload.podOverrides that the
// v1alpha2 CRD does not express: each mount names a volume of the list (or
// the operator's run-config, data or tmp) and has a clean absolute path.
// The CRD's own rules (workers' range and command, the volumes' names and
// types, the operator's folders, unique names and paths) are the API
// server's on a v1alpha2 write, and the operator's on a stack read through
// v1alpha1 (validation.Validate), never written again here.
func CheckOverrides(o *v1alpha2.PodOverrides) error {
	const at = "workload.podOverrides"
	if o == nil {
		return nil
	}
	names := map[string]bool{}
	for _, v := range o.Volumes {
		names[v.Name] = true
	}
	for i, m := range o.VolumeMounts {
		switch {
		case !slices.Contains(operatorVolumes[:3], m.Name) && !names[m.Name]:
			return fmt.Errorf("spec.%s.volumeMounts[%d] names volume %q, which is not in %s.volumes (nor the operator's run-config, data or tmp): add the volume, or mount one of those", at, i, m.Name, at)
		case !cleanAbsolute(m.MountPath):
			return fmt.Errorf("spec.%s.volumeMounts[%d]: mountPath %q must be an absolute, clean path (no //, . or .. parts, no trailing /)", at, i, m.MountPath)
		}
	}
	return nil
}

// cleanAbsolute reports whether p is an absolute path that path.Clean
// leaves as it is (no //, . or .. parts, no trailing /).
func cleanAbsolute(p string) bool { return path.IsAbs(p) && path.Clean(p) == p }

// command is the server container's command: podOverrides.command; with
// workers, the uvicorn command line that repeats what `llama stack run`
// passes uvicorn from the run config (stackconfig.Line.UvicornArgs), on
// the port the container declares; else the line's run command with the
// config (Facts.CLI: `llama stack run <config>`, `ogx stack run <config>`
// at 0.8).
func command(x extras, in Inputs) []string {
	if o := x.overrides; o != nil && len(o.Command) > 0 {
		return o.Command
	}
	if x.workers != nil {
		return in.line().UvicornArgs(in.Config.Server, int64(runconfig.ServerPort), int(*x.workers))
	}
	return append(in.line().Command(), ConfigPath)
}

// providersMount is where, with workers, an empty volume makes the
// config's external_providers_dir exist ("" when none is needed): `llama
// stack run` creates that folder before serving, the app factory uvicorn
// runs does not, and refuses to start when it is set and missing
// (stackconfig rule external_providers_dir.exists). Only a folder on the
// operator's writable volumes (the state volume, $HOME) is made: nothing
// but `llama stack run` puts one there, where one elsewhere is the image's.
func providersMount(x extras, in Inputs) string {
	dir := in.Config.ExternalProvidersDir
	if x.workers == nil || dir == "" { // workers run the operator's command (CheckOverrides)
		return ""
	}
	if !path.IsAbs(dir) {
		dir = path.Join(runconfig.WorkDir, dir)
	}
	dir = path.Clean(dir)
	for _, d := range []string{runconfig.DataDir, runconfig.HomeDir} {
		if strings.HasPrefix(dir, d+"/") {
			return dir
		}
	}
	return ""
}

// Resources are the server container's resources.
//
// Without workers: workload.resources, or DefaultResources.
//
// With workers N, each worker is a whole server process (uvicorn forks N
// processes that each build the stack), so the defaults are sized per
// worker: a CPU request of N (one core per worker, as the upstream operator
// requests), and N times the default memory request and limit of one
// process. The user's workload.resources win; a request they leave out is
// filled in the same way.
//
// An autoscaler on a resource computes utilization against the request: a
// resource an autoscaling metric names gets its default request (sized
// for the workers) when workload.resources sets neither a request nor a
// limit for it (Kubernetes defaults a missing request to the limit).
func Resources(user *corev1.ResourceRequirements, workers *int32, metrics []v1alpha2.ResourceMetric, operatorMajor string) corev1.ResourceRequirements {
	def := DefaultResources(operatorMajor)
	if workers != nil {
		n := int64(*workers)
		def.Requests[corev1.ResourceCPU] = *resource.NewQuantity(n, resource.DecimalSI)
		def.Requests[corev1.ResourceMemory] = times(def.Requests[corev1.ResourceMemory], n)
		if m, ok := def.Limits[corev1.ResourceMemory]; ok {
			def.Limits[corev1.ResourceMemory] = times(m, n)
		}
	}
	if user == nil {
		return def
	}
	out := *user.DeepCopy()
	var need []corev1.ResourceName
	if workers != nil {
		need = append(need, corev1.ResourceCPU, corev1.ResourceMemory)
	}
	for _, m := range metrics {
		need = append(need, corev1.ResourceName(m.Resource))
	}
	for _, r := range need {
		if q, ok := out.Requests[r]; ok && !q.IsZero() {
			continue
		}
		if _, ok := out.Limits[r]; ok {
			continue // Kubernetes sets the request to the limit
		}
		if out.Requests == nil {
			out.Requests = corev1.ResourceList{}
		}
		out.Requests[r] = def.Requests[r]
	}
	return out
}

func times(q resource.Quantity, n int64) resource.Quantity {
	return *resource.NewQuantity(q.Value()*n, q.Format)
}
