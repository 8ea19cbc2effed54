package runconfig

import (
	"bytes"
	"fmt"
	pathpkg "path"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
)

// Where the server finds its files. The controller mounts them there.
const (
	// ConfigKey is the key of the run config in its ConfigMap.
	ConfigKey = "run.yaml"
	// DataDir is where the sqlite stores live (SQLITE_STORE_DIR); the
	// controller mounts a writable volume there.
	DataDir = "/var/lib/llama-stack"
	// TLSDir holds the serving certificate (tls.crt) and key (tls.key)
	// from networking.tls.secretName.
	TLSDir = "/etc/llama-stack/tls"
	// CADir holds the client CA bundle of networking.tls.caBundle, as
	// CAFile.
	CADir = "/etc/llama-stack/ca"
	// CAFile is the file name of the CA bundle in CADir.
	CAFile = "ca.crt"
	// ServerPort is the port the server container listens on. The Service
	// exposes it on networking.port (default 8321 too); Llama Stack refuses
	// ports below 1024, so the container port never follows the Service's.
	ServerPort int32 = 8321
	// KubernetesAPIServerURL is the in-cluster API server the kubernetes
	// auth provider sends each caller's SelfSubjectReview to.
	KubernetesAPIServerURL = "https://kubernetes.default.svc"
	// KubeCADir holds the cluster CA (ca.crt of the kube-root-ca.crt
	// ConfigMap every namespace has), so the server verifies the API
	// server without mounting a ServiceAccount token it does not need.
	KubeCADir = "/etc/llama-stack/kube-ca"
	// KubeCAFile is the cluster CA the kubernetes auth provider trusts.
	KubeCAFile = KubeCADir + "/ca.crt"
	// HomeDir is $HOME of the server container, on a writable emptyDir
	// (caches).
	HomeDir = "/tmp"
	// WorkDir is the server's working directory, on the state volume: a
	// relative path of a run config (external_providers_dir left unset makes
	// `llama stack run` create "None" there) keeps what the server writes
	// with its state.
	WorkDir = DataDir
	// ProvidersDir is external_providers_dir: `llama stack run` creates it
	// at start (cli/stack/run.py at v0.2.23 and v0.3.0 call os.makedirs on
	// it, or on "None" in the working directory when it is unset).
	ProvidersDir = DataDir + "/providers.d"
)

// ConfigDir is the server's config folder (Facts.ConfigDir: what a run
// config does not place, such as 0.2's prompts store and, without
// metadata_store, its registry: <dir>/distributions/<image_name>/), on the
// state volume instead of the image's home: DataDir/.llama for the lines
// whose default is ~/.llama, DataDir/.ogx for OGX's ~/.ogx. It follows the
// state's line (Operand.StateLine, else the operand's): OGX moves ~/.llama
// to ~/.ogx only when its variable is unset (core/utils/config_dirs.py at
// v0.8.0), so a folder on the state volume keeps the name the old line
// gave it.
func ConfigDir(o Operand) (string, error) {
	line, err := o.stateLine()
	if err != nil {
		return "", err
	}
	return pathpkg.Join(DataDir, pathpkg.Base(line.ConfigDirDefault())), nil
}

// ServerEnv is the environment the operator gives every server container
// of the operand's line (a variable the user sets in workload.env wins):
// $HOME on the writable emptyDir, the line's config-folder variable
// (LLAMA_STACK_CONFIG_DIR; OGX_CONFIG_DIR at 0.8, which reads no
// LLAMA_STACK_* variable) at ConfigDir, and the line's port variable
// (LLAMA_STACK_PORT, OGX_PORT) at ServerPort, so that neither the image's
// defaults nor a line's new names move the state or the port.
func ServerEnv(o Operand) ([]corev1.EnvVar, error) {
	line, err := o.LineOf()
	if err != nil {
		return nil, err
	}
	dir, err := ConfigDir(o)
	if err != nil {
		return nil, err
	}
	return []corev1.EnvVar{
		{Name: "HOME", Value: HomeDir},
		{Name: line.ConfigDirEnv(), Value: dir},
		{Name: line.PortEnv(), Value: strconv.Itoa(int(ServerPort))},
	}, nil
}

// WritableMounts are the only folders of the server container on writable
// volumes (DataDir, also its working directory, and HomeDir); its
// root filesystem is read-only. A run config that makes the server write
// anywhere else is refused: the server would exit at start, or fail at
// its first write.
var WritableMounts = []string{DataDir, HomeDir}

// Generate builds the run config of the InferenceStack named name (the name
// derives the names of operator-managed objects such as the cache Secret)
// in the layout of the operand's Llama Stack line, and checks it with that
// line's conformance model. It walks the stages of doc.go in order.
func Generate(name string, spec v1alpha2.InferenceStackSpec, operand Operand) (Result, error) {
	// 1. spec (spec.go): the line of the pin, what the spec asks for
	if spec.OverrideConfig != nil {
		return Result{}, field.Forbidden(field.NewPath("spec", "overrideConfig"),
			"the run config comes from the override ConfigMap: use FromOverride")
	}
	line, err := operand.LineOf()
	if err != nil {
		return Result{}, err
	}
	// 2. line layout (layout.go): the base config in the line's layout
	lay, err := layoutOf(line)
	if err != nil {
		return Result{}, err
	}
	cfg, err := load(line, spec)
	if err != nil {
		return Result{}, err
	}
	// 3. render (render*.go): the spec onto the base, then the bytes
	server, err := ServerEnv(operand)
	if err != nil {
		return Result{}, err
	}
	state, err := operand.stateLine()
	if err != nil {
		return Result{}, err
	}
	data, env, origins, err := render(&cfg, lay, line, name, spec, server, state)
	if err != nil {
		return Result{}, err
	}
	// 4. validate (validate.go): upstream's models and rules, the pod's mounts
	checked, err := validate(line, spec, data, env)
	if err != nil {
		return Result{}, origins.specError(err, &cfg)
	}
	// 5. result (result.go)
	return result(line, data, env, checked), nil
}

// FromOverride takes a complete run config from the overrideConfig
// ConfigMap: it must be valid for the operand's Llama Stack line (its
// conformance model, with the container's environment); it is returned
// unchanged with its hash and the environment the rest of the spec asks
// for (the operator-managed PostgreSQL of spec.cache). It skips stages 2
// and 3: the user wrote the file.
func FromOverride(name string, spec v1alpha2.InferenceStackSpec, operand Operand, data []byte) (Result, error) {
	line, err := operand.LineOf()
	if err != nil {
		return Result{}, err
	}
	server, err := ServerEnv(operand)
	if err != nil {
		return Result{}, err
	}
	env := newEnvSet(server)
	if cacheEnabled(spec) {
		cacheEnv(name, env)
	}
	if err := env.checkUserEnv(line, spec); err != nil {
		return Result{}, err
	}
	data = bytes.Clone(data)
	checked, err := validate(line, spec, data, env)
	if err != nil {
		path := field.NewPath("spec", "overrideConfig", "configMapName")
		key, cm := ConfigKey, ""
		if o := spec.OverrideConfig; o != nil {
			cm, key = o.ConfigMapName, o.KeyOrDefault()
		}
		return Result{}, field.Invalid(path, cm, fmt.Sprintf("key %s does not hold a run config the pinned Llama Stack %s server accepts: %v", key, line, err))
	}
	return result(line, data, env, checked), nil
}
