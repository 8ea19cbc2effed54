package runconfig

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/runconfig/stackconfig"
)

// Stage 4 of the walk (doc.go): validate. The run config is checked with
// the line's conformance model (stackconfig.Check: upstream's derived
// schemas and the semantic rules it applies in code) in the container's
// environment, then against the pod's writable mounts.
func validate(line stackconfig.Line, spec v1alpha2.InferenceStackSpec, data []byte, env *envSet) (stackconfig.Result, error) {
	checked, err := stackconfig.Check(line, data, stackconfig.Options{Env: stackconfig.MapEnv(ContainerEnv(spec, env.operator())), Home: HomeDir})
	var unset *stackconfig.EnvError
	if errors.As(err, &unset) {
		return stackconfig.Result{}, field.Required(field.NewPath("spec", "workload", "env"), fmt.Sprintf(
			"the run config needs environment variable %s (at %s) and the server exits at start without it: set it in workload.env",
			unset.Name, unset.Path))
	}
	if err != nil {
		return stackconfig.Result{}, err
	}
	if dir, found := notWritable(checked.WritableDirs); found {
		msg := fmt.Sprintf("the server would write to %s, which is on its read-only root filesystem; keep the folders it writes to under %s",
			dir.abs, strings.Join(WritableMounts, " or "))
		if at := checked.WrittenFrom[dir.dir]; at != "" {
			return stackconfig.Result{}, &stackconfig.Problem{At: at, Message: msg}
		}
		return stackconfig.Result{}, errors.New(msg)
	}
	return checked, nil
}

// ContainerEnv is the server container's environment as the server sees
// it, for the conformance check: the operator's variables vars
// (Result.OperatorEnv: literal values, and a sample value for each
// Secret-fed one, whose value is not known here, only that it is set),
// then the user's workload.env.
func ContainerEnv(spec v1alpha2.InferenceStackSpec, vars []corev1.EnvVar) map[string]string {
	out := map[string]string{}
	add := func(v corev1.EnvVar) {
		switch {
		case v.ValueFrom == nil:
			out[v.Name] = v.Value
		case strings.HasSuffix(v.Name, "_PORT"):
			out[v.Name] = "5432"
		default:
			out[v.Name] = "set-from-" + v.Name
		}
	}
	for _, v := range vars {
		add(v)
	}
	if spec.Workload != nil {
		for _, v := range spec.Workload.Env {
			add(v)
		}
	}
	return out
}

// notWritable returns the first of dirs (relative ones are relative to the
// working directory, WorkDir) that no folder of WritableMounts holds: as
// written, and absolute.
func notWritable(dirs []string) (struct{ dir, abs string }, bool) {
	for _, dir := range dirs {
		abs := dir
		if !path.IsAbs(abs) {
			abs = path.Join(WorkDir, abs)
		}
		abs = path.Clean(abs)
		if !slices.ContainsFunc(WritableMounts, func(w string) bool { return abs == w || strings.HasPrefix(abs, w+"/") }) {
			return struct{ dir, abs string }{dir, abs}, true
		}
	}
	return struct{ dir, abs string }{}, false
}
