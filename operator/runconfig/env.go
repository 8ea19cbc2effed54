package runconfig

import (
	"fmt"
	"maps"
	pathpkg "path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/runconfig/stackconfig"
)

// Environment variables the run config refers to. Provider secrets get
// names of the form <API>_<PROVIDER ID>_<CONFIG KEY>, upper case with every
// character other than a letter or digit turned into '_', e.g.
// INFERENCE_OPENAI_API_KEY or VECTOR_IO_PGVECTOR_PASSWORD.
const (
	// EnvSQLiteStoreDir moves the sqlite stores (default DataDir).
	EnvSQLiteStoreDir = "SQLITE_STORE_DIR"
	// EnvPostgresHost, EnvPostgresPort, EnvPostgresDB, EnvPostgresUser and
	// EnvPostgresPassword point the SQL stores at PostgreSQL: the
	// operator-managed one (spec.cache) or the external one
	// (storage.sql.connectionString, split into the Secret
	// ExternalSQLSecretName).
	EnvPostgresHost     = "POSTGRES_HOST"
	EnvPostgresPort     = "POSTGRES_PORT"
	EnvPostgresDB       = "POSTGRES_DB"
	EnvPostgresUser     = "POSTGRES_USER"
	EnvPostgresPassword = "POSTGRES_PASSWORD"
)

// envSet collects the variables a run config needs; every name has one
// origin (a field path) so that a clash is reported with both fields.
// server holds the operator's ServerEnv, which the container carries
// besides the config's variables.
type envSet struct {
	vars   map[string]corev1.EnvVar
	origin map[string]string
	server []corev1.EnvVar
}

func newEnvSet(server []corev1.EnvVar) *envSet {
	return &envSet{vars: map[string]corev1.EnvVar{}, origin: map[string]string{}, server: server}
}

// secret adds a variable filled from a Secret key and returns its
// ${env.NAME} placeholder.
func (e *envSet) secret(name string, ref corev1.SecretKeySelector, origin *field.Path) (string, error) {
	ref = *ref.DeepCopy()
	return e.add(corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &ref}}, origin)
}

// value adds a variable with a literal value.
func (e *envSet) value(name, value string, origin *field.Path) (string, error) {
	return e.add(corev1.EnvVar{Name: name, Value: value}, origin)
}

func (e *envSet) add(v corev1.EnvVar, origin *field.Path) (string, error) {
	if prev, ok := e.origin[v.Name]; ok && prev != origin.String() {
		return "", field.Duplicate(origin, fmt.Sprintf(
			"environment variable %s is already used for %s: choose a different provider id or key", v.Name, prev))
	}
	e.vars[v.Name] = v
	e.origin[v.Name] = origin.String()
	return placeholder(v.Name), nil
}

// operator is what the operator sets in the container: ServerEnv, then
// the config's variables.
func (e *envSet) operator() []corev1.EnvVar {
	return append(slices.Clone(e.server), e.list()...)
}

func (e *envSet) list() []corev1.EnvVar {
	out := make([]corev1.EnvVar, 0, len(e.vars))
	for _, name := range slices.Sorted(maps.Keys(e.vars)) {
		out = append(out, e.vars[name])
	}
	return out
}

// checkUserEnv refuses workload.env entries that would shadow a variable
// the run config depends on, or move the server's state off its state
// volume (DataDir): upstream reads the paths of its state from the
// variables of the line's Facts.StateEnv (FILES_STORAGE_DIR,
// SQLITE_STORE_DIR, ...; LLAMA_STACK_CONFIG_DIR on 0.2), and a path
// elsewhere would be lost with the pod.
func (e *envSet) checkUserEnv(line stackconfig.Line, spec v1alpha2.InferenceStackSpec) error {
	if spec.Workload == nil {
		return nil
	}
	for i, v := range spec.Workload.Env {
		path := field.NewPath("spec", "workload", "env").Index(i)
		if prev, ok := e.origin[v.Name]; ok {
			return field.Invalid(path.Child("name"), v.Name,
				fmt.Sprintf("the operator sets this variable for %s: remove it from workload.env", prev))
		}
		src, ok := stateSource(line, v.Name)
		if !ok {
			continue
		}
		if v.ValueFrom != nil {
			return field.Invalid(path.Child("valueFrom"), v.Name, fmt.Sprintf(
				"%s places the server's state (upstream: %s): give it a literal value under %s, or remove it", v.Name, src, DataDir))
		}
		if clean := pathpkg.Clean(v.Value); v.Value != "" && clean != DataDir && !strings.HasPrefix(clean, DataDir+"/") {
			return field.Invalid(path.Child("value"), v.Value, fmt.Sprintf(
				"%s places the server's state (upstream: %s) and %s is off the state volume: the state would be lost with the pod; "+
					"use a folder under %s, or remove %s", v.Name, src, v.Value, DataDir, v.Name))
		}
	}
	return nil
}

// stateSource is the upstream file that reads a variable placing the
// server's state: one of the line's Facts.StateEnv (the config folder's
// variable is one where the line keeps state there, as 0.2 does).
func stateSource(line stackconfig.Line, name string) (string, bool) {
	f := line.Facts()
	k := slices.IndexFunc(f.StateEnv, func(s stackconfig.StateEnv) bool { return s.Env == name })
	if k < 0 {
		return "", false
	}
	return f.StateEnv[k].Source, true
}

func placeholder(name string) string {
	return "${env." + name + "}"
}

// envName builds a stable variable name from parts.
func envName(parts ...string) string {
	s := strings.ToUpper(strings.Join(parts, "_"))
	return strings.Map(func(r rune) rune {
		if (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			return r
		}
		return '_'
	}, s)
}
