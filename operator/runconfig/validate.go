package runconfig

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/lru"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/runconfig/stackconfig"
)

// Stage 4 of the walk (doc.go): validate. The run config is checked with
// the line's conformance model (stackconfig.Check: upstream's derived
// schemas and the semantic rules it applies in code) in the container's
// environment, then against the pod's writable mounts.
func validate(line stackconfig.Line, spec v1alpha2.InferenceStackSpec, data []byte, env *envSet) (stackconfig.Result, error) {
	checked, err := check(line, data, ContainerEnv(spec, env.operator()), HomeDir)
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

// accepted holds the verdicts of the last run configs the conformance
// model accepted, by a digest of everything stackconfig.Check reads: the
// line, the file, the environment and $HOME. Check is a function of
// those alone, and stacks made from one template (the usual fleet) get
// the same file and environment, so from the second of them on the
// check, the largest part of making a run config, is skipped. Refused
// configs are not kept (their errors name the stack's own fields).
// acceptedSize verdicts of a few kB each.
var accepted = lru.New(acceptedSize)

const acceptedSize = 64

// check is stackconfig.Check with the container's environment env and
// home, through accepted; what it returns shares nothing with what is kept.
func check(line stackconfig.Line, data []byte, env map[string]string, home string) (stackconfig.Result, error) {
	key := checkKey(line, data, env, home)
	if kept, ok := accepted.Get(key); ok {
		return copyVerdict(kept.(stackconfig.Result))
	}
	res, err := stackconfig.Check(line, data, stackconfig.Options{Env: stackconfig.MapEnv(env), Home: home})
	if err != nil {
		return res, err
	}
	kept, err := copyVerdict(res)
	if err != nil {
		return res, err
	}
	accepted.Add(key, kept)
	return res, nil
}

// checkKey is the SHA-256 of what Check reads, each part length-prefixed.
func checkKey(line stackconfig.Line, data []byte, env map[string]string, home string) [sha256.Size]byte {
	h := sha256.New()
	part := func(b []byte) {
		h.Write(binary.BigEndian.AppendUint64(nil, uint64(len(b))))
		h.Write(b)
	}
	part([]byte(line))
	part([]byte(home))
	part(data)
	for _, k := range slices.Sorted(maps.Keys(env)) {
		part([]byte(k))
		part([]byte(env[k]))
	}
	var key [sha256.Size]byte
	h.Sum(key[:0])
	return key
}

// copyVerdict is a copy of what the run-config pipeline reads of a verdict
// (the folders the server writes to and where the config places them, its
// server section, its external providers folder), sharing nothing with r;
// the rest of r is left out.
func copyVerdict(r stackconfig.Result) (stackconfig.Result, error) {
	out := stackconfig.Result{Line: r.Line, WritableDirs: slices.Clone(r.WritableDirs), WrittenFrom: maps.Clone(r.WrittenFrom),
		ExternalProvidersDir: r.ExternalProvidersDir}
	if r.Server != nil {
		data, err := json.Marshal(r.Server)
		if err != nil {
			return out, fmt.Errorf("copy the server section: %w", err)
		}
		out.Server = &stackconfig.ServerConfig{}
		if err := json.Unmarshal(data, out.Server); err != nil {
			return out, fmt.Errorf("copy the server section: %w", err)
		}
	}
	return out, nil
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
