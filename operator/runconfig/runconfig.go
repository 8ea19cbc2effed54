package runconfig

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
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
	// auth provider sends TokenReviews to.
	KubernetesAPIServerURL = "https://kubernetes.default.svc"
	// ServiceAccountCAFile is the cluster CA every pod gets.
	ServiceAccountCAFile = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
)

//go:embed distributions/*.yaml
var distributions embed.FS

// Result is a run config and what the server needs to use it.
type Result struct {
	// YAML is the run config.
	YAML []byte
	// Hash is the SHA-256 of YAML, hex encoded.
	Hash string
	// Env are the environment variables the server container must carry,
	// sorted by name: literal values and Secret key references.
	Env []corev1.EnvVar
}

// Distributions lists the distributions whose base configs are embedded,
// sorted.
func Distributions() []string {
	entries, err := distributions.ReadDir("distributions")
	if err != nil {
		return nil
	}
	var names []string
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	slices.Sort(names)
	return names
}

// Base returns the embedded base config of a distribution, as written.
func Base(distribution string) ([]byte, error) {
	if !slices.Contains(Distributions(), distribution) {
		return nil, field.NotSupported(field.NewPath("spec", "distribution", "name"), distribution, Distributions())
	}
	return distributions.ReadFile("distributions/" + distribution + ".yaml")
}

// Generate builds the run config of the InferenceStack named name (the name
// derives the names of operator-managed objects such as the cache Secret).
func Generate(name string, spec v1alpha1.InferenceStackSpec) (Result, error) {
	if spec.OverrideConfig != nil {
		return Result{}, field.Forbidden(field.NewPath("spec", "overrideConfig"),
			"the run config comes from the override ConfigMap: use FromOverride")
	}
	cfg, err := load(spec)
	if err != nil {
		return Result{}, err
	}
	env := newEnvSet()
	if err := overlayProviders(&cfg, spec, env); err != nil {
		return Result{}, err
	}
	if err := disable(&cfg, spec); err != nil {
		return Result{}, err
	}
	if err := register(&cfg, spec); err != nil {
		return Result{}, err
	}
	if err := configureStorage(&cfg, name, spec, env); err != nil {
		return Result{}, err
	}
	configureServer(&cfg, spec)
	if err := env.checkUserEnv(spec); err != nil {
		return Result{}, err
	}
	data, err := marshal(cfg)
	if err != nil {
		return Result{}, err
	}
	return Result{YAML: data, Hash: hash(data), Env: env.list()}, nil
}

// FromOverride takes a complete run config from the overrideConfig
// ConfigMap: it checks that the data is one YAML mapping with providers,
// and returns it unchanged with its hash and the environment the rest of
// the spec asks for (the operator-managed PostgreSQL of spec.cache).
func FromOverride(name string, spec v1alpha1.InferenceStackSpec, data []byte) (Result, error) {
	path := field.NewPath("spec", "overrideConfig", "configMapName")
	key, name := ConfigKey, ""
	if o := spec.OverrideConfig; o != nil {
		name, key = o.ConfigMapName, o.KeyOrDefault()
	}
	bad := func(detail string) error {
		return field.Invalid(path, name, fmt.Sprintf("key %s does not hold a run config: %s", key, detail))
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		return Result{}, bad(fmt.Sprintf("not a YAML mapping (%v)", err))
	}
	var extra any
	if err := dec.Decode(&extra); err == nil {
		return Result{}, bad("more than one YAML document")
	}
	if providers, ok := doc["providers"].(map[string]any); !ok || len(providers) == 0 {
		return Result{}, bad("no providers (a run config lists its providers per API)")
	}
	env := newEnvSet()
	if cacheEnabled(spec) {
		cacheEnv(name, env)
	}
	if err := env.checkUserEnv(spec); err != nil {
		return Result{}, err
	}
	out := bytes.Clone(data)
	return Result{YAML: out, Hash: hash(out), Env: env.list()}, nil
}

// load parses the base config of the distribution, or starts an empty one
// for a custom image. Parsing the embedded bytes on every call gives a fresh
// copy: the base is never shared or mutated.
func load(spec v1alpha1.InferenceStackSpec) (runConfig, error) {
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
		return runConfig{
			Version:   2,
			ImageName: v1alpha1.CustomDistributionName,
			Providers: map[string][]provider{},
			MetadataStore: map[string]any{
				"type": "sqlite", "db_path": sqlitePath("registry.db"),
			},
			InferenceStore: map[string]any{
				"type": "sqlite", "db_path": sqlitePath("inference_store.db"),
			},
		}, nil
	case d.Name == "":
		return runConfig{}, field.Required(path, "set name (one of "+strings.Join(Distributions(), ", ")+") or image")
	}
	data, err := Base(string(d.Name))
	if err != nil {
		return runConfig{}, err
	}
	var cfg runConfig
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil {
		// The embedded bases are tested; this is a build defect.
		return runConfig{}, fmt.Errorf("embedded base config of distribution %q: %w", d.Name, err)
	}
	if cfg.Providers == nil {
		cfg.Providers = map[string][]provider{}
	}
	return cfg, nil
}

func sqlitePath(file string) string {
	return "${env." + EnvSQLiteStoreDir + ":=" + DataDir + "}/" + file
}

func countProviders(p *v1alpha1.ProvidersSpec) int {
	n := 0
	for _, l := range apiProviders(p) {
		n += len(l.list)
	}
	return n
}

func marshal(cfg runConfig) ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(cfg); err != nil {
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
