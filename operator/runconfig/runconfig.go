package runconfig

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/runconfig/distributions"
	"github.com/inferencestack/inferencestack/operator/runconfig/stackconfig"
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
	// StackConfigDir is $LLAMA_STACK_CONFIG_DIR of the server: where it keeps
	// what a run config does not place (0.2's prompts store and, without
	// metadata_store, its registry: <dir>/distributions/<image_name>/, see
	// distributions/v0.2.23/facts.json), on the state volume instead of
	// ~/.llama on the emptyDir.
	StackConfigDir = DataDir + "/.llama"
	// ProvidersDir is external_providers_dir: `llama stack run` creates it
	// at start (cli/stack/run.py at v0.2.23 and v0.3.0 call os.makedirs on
	// it, or on "None" in the working directory when it is unset).
	ProvidersDir = DataDir + "/providers.d"
)

// ServerEnv is the environment the operator gives every server container
// (a variable the user sets in workload.env wins).
func ServerEnv() []corev1.EnvVar {
	return []corev1.EnvVar{{Name: "HOME", Value: HomeDir}, {Name: "LLAMA_STACK_CONFIG_DIR", Value: StackConfigDir}}
}

// WritableMounts are the only folders of the server container on writable
// volumes (DataDir, also its working directory, and HomeDir); its
// root filesystem is read-only. A run config that makes the server write
// anywhere else is refused: the server would exit at start, or fail at
// its first write.
var WritableMounts = []string{DataDir, HomeDir}

// notWritable returns the first of dirs (relative ones are relative to the
// working directory, WorkDir) that no folder of WritableMounts holds.
func notWritable(dirs []string) (string, bool) {
	for _, dir := range dirs {
		abs := dir
		if !path.IsAbs(abs) {
			abs = path.Join(WorkDir, abs)
		}
		abs = path.Clean(abs)
		if !slices.ContainsFunc(WritableMounts, func(w string) bool { return abs == w || strings.HasPrefix(abs, w+"/") }) {
			return abs, true
		}
	}
	return "", false
}

// Result is a run config and what the server needs to use it.
type Result struct {
	// YAML is the run config.
	YAML []byte
	// Hash is the SHA-256 of YAML, hex encoded.
	Hash string
	// Env are the environment variables the server container must carry,
	// sorted by name: literal values and Secret key references.
	Env []corev1.EnvVar
	// Line is the Llama Stack line whose layout YAML follows.
	Line stackconfig.Line
	// WritableDirs are the folders the server writes to (from the
	// conformance check, with the container's environment): the pod must
	// mount each on a writable volume.
	WritableDirs []string
	// Server is the config's server section, expanded with the container's
	// environment (nil when it has none): a uvicorn command line repeats
	// its listen address and TLS files.
	Server *stackconfig.ServerConfig
	// ExternalProvidersDir is the config's external_providers_dir ("" when
	// unset; relative to WorkDir when relative).
	ExternalProvidersDir string
}

// Operand is what the operator knows of the server it deploys.
type Operand struct {
	// LlamaStackVersion is the pinned Llama Stack version (e.g. 0.3.0); it
	// selects the run-config layout.
	LlamaStackVersion string
}

// Distributions lists the distributions upstream publishes an image of at
// every line the operator knows (their base configs are embedded), sorted.
// The CRD's remote-vllm is an alias onto starter (RemoteVLLMAlias).
func Distributions() []string {
	return []string{
		string(v1alpha2.DistributionMetaReferenceGPU),
		string(v1alpha2.DistributionPostgresDemo),
		string(v1alpha2.DistributionStarter),
	}
}

// ImageDistribution is the distribution whose image serves the named one:
// remote-vllm runs the starter image (upstream has no remote-vllm
// distribution after 0.2.14; vLLM is a provider of starter).
func ImageDistribution(name v1alpha2.DistributionName) string {
	if name == v1alpha2.DistributionRemoteVLLM {
		return string(v1alpha2.DistributionStarter)
	}
	return string(name)
}

// Base returns the embedded upstream run config of a distribution at a
// line's tag, as upstream wrote it.
func Base(line stackconfig.Line, distribution string) ([]byte, error) {
	if !slices.Contains(Distributions(), distribution) {
		return nil, field.NotSupported(field.NewPath("spec", "distribution", "name"), distribution, Distributions())
	}
	return distributions.FS.ReadFile(line.Tag() + "/" + distribution + ".yaml")
}

// LineOf is the line of the pinned operand.
func (o Operand) LineOf() (stackconfig.Line, error) {
	return stackconfig.LineOf(o.LlamaStackVersion)
}

// Generate builds the run config of the InferenceStack named name (the name
// derives the names of operator-managed objects such as the cache Secret)
// in the layout of the operand's Llama Stack line, and checks it with that
// line's conformance model.
func Generate(name string, spec v1alpha2.InferenceStackSpec, operand Operand) (Result, error) {
	if spec.OverrideConfig != nil {
		return Result{}, field.Forbidden(field.NewPath("spec", "overrideConfig"),
			"the run config comes from the override ConfigMap: use FromOverride")
	}
	line, err := operand.LineOf()
	if err != nil {
		return Result{}, err
	}
	cfg, err := load(line, spec)
	if err != nil {
		return Result{}, err
	}
	env := newEnvSet()
	origins := specOrigins{}
	if err := overlayProviders(&cfg, line, spec, env, origins); err != nil {
		return Result{}, err
	}
	if err := checkAlias(&cfg, spec); err != nil {
		return Result{}, err
	}
	if err := disable(&cfg, line, spec); err != nil {
		return Result{}, err
	}
	if err := register(&cfg, spec, env); err != nil {
		return Result{}, err
	}
	if err := configureStorage(&cfg, line, name, spec, env); err != nil {
		return Result{}, err
	}
	configureServer(&cfg, spec)
	if err := env.checkUserEnv(line, spec); err != nil {
		return Result{}, err
	}
	lay, err := layoutOf(line)
	if err != nil {
		return Result{}, err
	}
	data, err := marshal(cfg, lay)
	if err != nil {
		return Result{}, err
	}
	res, err := finish(line, spec, data, env)
	if err != nil {
		return Result{}, origins.specError(err)
	}
	return res, nil
}

// FromOverride takes a complete run config from the overrideConfig
// ConfigMap: it must be valid for the operand's Llama Stack line (its
// conformance model, with the container's environment); it is returned
// unchanged with its hash and the environment the rest of the spec asks
// for (the operator-managed PostgreSQL of spec.cache).
func FromOverride(name string, spec v1alpha2.InferenceStackSpec, operand Operand, data []byte) (Result, error) {
	line, err := operand.LineOf()
	if err != nil {
		return Result{}, err
	}
	env := newEnvSet()
	if cacheEnabled(spec) {
		cacheEnv(name, env)
	}
	if err := env.checkUserEnv(line, spec); err != nil {
		return Result{}, err
	}
	res, err := finish(line, spec, bytes.Clone(data), env)
	if err != nil {
		path := field.NewPath("spec", "overrideConfig", "configMapName")
		key, cm := ConfigKey, ""
		if o := spec.OverrideConfig; o != nil {
			cm, key = o.ConfigMapName, o.KeyOrDefault()
		}
		return Result{}, field.Invalid(path, cm, fmt.Sprintf("key %s does not hold a run config the pinned Llama Stack %s server accepts: %v", key, line, err))
	}
	return res, nil
}

// finish checks a run config with the line's conformance model and the
// container's environment, and returns it with its hash and environment.
func finish(line stackconfig.Line, spec v1alpha2.InferenceStackSpec, data []byte, env *envSet) (Result, error) {
	checked, err := stackconfig.Check(line, data, stackconfig.Options{Env: stackconfig.MapEnv(ContainerEnv(spec, env.list())), Home: HomeDir})
	var unset *stackconfig.EnvError
	if errors.As(err, &unset) {
		return Result{}, field.Required(field.NewPath("spec", "workload", "env"), fmt.Sprintf(
			"the run config needs environment variable %s (at %s) and the server exits at start without it: set it in workload.env",
			unset.Name, unset.Path))
	}
	if err != nil {
		return Result{}, err
	}
	if dir, found := notWritable(checked.WritableDirs); found {
		return Result{}, fmt.Errorf("the server would write to %s, which is on its read-only root filesystem; keep the folders it writes to under %s",
			dir, strings.Join(WritableMounts, " or "))
	}
	return Result{YAML: data, Hash: hash(data), Env: env.list(), Line: line, WritableDirs: checked.WritableDirs, Server: checked.Server,
		ExternalProvidersDir: checked.ExternalProvidersDir}, nil
}

// ContainerEnv is the server container's environment as the server sees
// it, for the conformance check: the operator's literal variables, a
// sample value for each Secret-fed one (its value is not known here, only
// that it is set), and the user's workload.env.
func ContainerEnv(spec v1alpha2.InferenceStackSpec, vars []corev1.EnvVar) map[string]string {
	out := map[string]string{}
	for _, v := range ServerEnv() {
		out[v.Name] = v.Value
	}
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

// load parses the base config of the distribution at the line's tag, or
// starts an empty one for a custom image. Parsing the embedded bytes on
// every call gives a fresh copy: the base is never shared or mutated.
func load(line stackconfig.Line, spec v1alpha2.InferenceStackSpec) (runConfig, error) {
	d := spec.Distribution
	path := field.NewPath("spec", "distribution")
	switch {
	case d.Name != "" && d.Image != "":
		return runConfig{}, field.Invalid(path, d.Name, "set exactly one of name or image")
	case d.Image != "":
		if countProviders(spec.Providers) == 0 {
			return runConfig{}, field.Required(field.NewPath("spec", "providers"),
				"a custom distribution.image has no embedded base config: list at least one provider")
		}
		lay, err := layoutOf(line)
		if err != nil {
			return runConfig{}, err
		}
		return lay.empty(), nil
	case d.Name == "":
		return runConfig{}, field.Required(path, "set name (one of "+strings.Join(distributionNames(), ", ")+") or image")
	}
	if !slices.Contains(v1alpha2.DistributionNames, d.Name) {
		return runConfig{}, field.NotSupported(path.Child("name"), d.Name, distributionNames())
	}
	cfg, err := loadBase(line, ImageDistribution(d.Name))
	if err != nil {
		return runConfig{}, err
	}
	return cfg, completeBase(&cfg, line)
}

// loadBase parses the embedded base config of a distribution, relocated,
// in the line's layout.
func loadBase(line stackconfig.Line, base string) (runConfig, error) {
	lay, err := layoutOf(line)
	if err != nil {
		return runConfig{}, err
	}
	data, err := Base(line, base)
	if err != nil {
		return runConfig{}, err
	}
	data = relocate(data, base)
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	cfg, err := lay.decode(dec)
	if err != nil {
		// The embedded bases are tested; this is a build defect.
		return runConfig{}, fmt.Errorf("embedded base config of distribution %q at %s: %w", base, line.Tag(), err)
	}
	if cfg.Providers == nil {
		cfg.Providers = map[string][]provider{}
	}
	return cfg, nil
}

// relocate applies the one edit the operator makes to upstream's base
// configs as text: upstream keeps state under ~/.llama/distributions/<name>
// (the image's home, on its read-only root filesystem); the operator moves
// it to DataDir, the server's state volume. The variables that move it
// (SQLITE_STORE_DIR, FILES_STORAGE_DIR, MILVUS_DB_PATH) keep working.
func relocate(data []byte, distribution string) []byte {
	return bytes.ReplaceAll(data, []byte("~/.llama/distributions/"+distribution), []byte(DataDir))
}

func distributionNames() []string {
	var out []string
	for _, d := range v1alpha2.DistributionNames {
		out = append(out, string(d))
	}
	return out
}

func sqlitePath(file string) string {
	return "${env." + EnvSQLiteStoreDir + ":=" + DataDir + "}/" + file
}

func countProviders(p *v1alpha2.ProvidersSpec) int {
	n := 0
	for _, l := range apiProviders(p) {
		n += len(l.list)
	}
	return n
}

func marshal(cfg runConfig, lay layout) ([]byte, error) {
	doc := lay.file(cfg)
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("marshal run config: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("marshal run config: %w", err)
	}
	return buf.Bytes(), nil
}

func hash(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
