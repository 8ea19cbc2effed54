package runconfig

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/inferencestack/inferencestack/operator/runconfig/stackconfig"
)

// Stage 5 of the walk (doc.go): the result, what the controller deploys.

// Result is a run config and what the server needs to use it.
type Result struct {
	// YAML is the run config.
	YAML []byte
	// Hash is the SHA-256 of YAML, hex encoded.
	Hash string
	// Env are the environment variables the server container must carry,
	// sorted by name: literal values and Secret key references.
	Env []corev1.EnvVar
	// ServerEnv is the operator's environment of every server of the
	// line (runconfig.ServerEnv): a variable of the user's workload.env
	// wins over it.
	ServerEnv []corev1.EnvVar
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

// result is a checked run config with its hash and environment.
func result(line stackconfig.Line, data []byte, env *envSet, checked stackconfig.Result) Result {
	return Result{YAML: data, Hash: hash(data), Env: env.list(), ServerEnv: env.server, Line: line, WritableDirs: checked.WritableDirs, Server: checked.Server,
		ExternalProvidersDir: checked.ExternalProvidersDir}
}

// OperatorEnv is what the operator sets in the server container:
// ServerEnv, then Env (ContainerEnv adds the user's workload.env).
func (r Result) OperatorEnv() []corev1.EnvVar {
	return append(slices.Clone(r.ServerEnv), r.Env...)
}

func hash(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
