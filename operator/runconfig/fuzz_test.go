package runconfig

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/yaml"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/runconfig/stackconfig"
	"github.com/inferencestack/inferencestack/test/testutil"
)

// FuzzGenerate feeds arbitrary InferenceStack documents to the pipeline:
// it never panics, never changes its input, and gives the same bytes, hash
// and environment on a second run. The seeds are the golden inputs, so a
// plain `go test` runs them once. Override configs are FuzzFromOverride's.
func FuzzGenerate(f *testing.F) {
	inputs, err := filepath.Glob(filepath.Join("testdata", "*", "in", "stack.yaml"))
	require.NoError(f, err)
	require.NotEmpty(f, inputs)
	for _, path := range inputs {
		data, err := os.ReadFile(path)
		require.NoError(f, err)
		f.Add(data)
	}
	dump := os.Getenv("FUZZ_SPEC_DUMP")
	f.Fuzz(func(t *testing.T, data []byte) {
		var spoke v1alpha1.InferenceStack
		if err := yaml.Unmarshal(data, &spoke); err != nil || spoke.Spec.OverrideConfig != nil {
			return
		}
		stack := *testutil.Hub(&spoke)
		for _, l := range lines {
			res := generateOne(t, stack, l.line, l.operand)
			dumpAccepted(t, dump, l.line, dataName("stack", data), res.YAML, ContainerEnv(stack.Spec, res.OperatorEnv()))
		}
	})
}

func generateOne(t *testing.T, stack v1alpha2.InferenceStack, line stackconfig.Line, operand Operand) Result {
	spec := *stack.Spec.DeepCopy()
	first, err1 := Generate(stack.Name, spec, operand)
	second, err2 := Generate(stack.Name, spec, operand)
	require.True(t, equality.Semantic.DeepEqual(stack.Spec, spec), "Generate changed its input")
	if err1 != nil {
		require.EqualError(t, err2, err1.Error())
		return Result{}
	}
	require.NoError(t, err2)
	require.True(t, bytes.Equal(first.YAML, second.YAML), "not deterministic")
	require.Equal(t, first.Hash, second.Hash)
	require.Equal(t, first.Env, second.Env)
	checkInvariants(t, spec, first)
	// What the operator accepts, the line's model accepts, checked here
	// with the container's environment as the server would see it.
	_, err := stackconfig.Check(line, first.YAML, stackconfig.Options{Env: stackconfig.MapEnv(ContainerEnv(spec, first.OperatorEnv())), Home: HomeDir})
	require.NoError(t, err, "the operator accepted a config its line's model refuses:\n%s", first.YAML)
	return first
}

// FuzzFromOverride feeds run configs to the override path: the generated
// goldens of both lines, the override inputs, and each of them with one
// top-level key and one store removed (then whatever the fuzzer makes of
// them). The override is returned byte for byte with the hash of exactly
// those bytes, the input is never changed, a second run agrees, and the
// verdict is the line's model's: accepted only if the model accepts it with
// the container's environment, refused when the model refuses it.
func FuzzFromOverride(f *testing.F) {
	seeds, err := filepath.Glob(filepath.Join("testdata", "*", "golden", "*", "run.yaml"))
	require.NoError(f, err)
	overrides, err := filepath.Glob(filepath.Join("testdata", "*", "in", "override*.yaml"))
	require.NoError(f, err)
	seeds = append(seeds, overrides...)
	require.GreaterOrEqual(f, len(seeds), 26)
	for _, path := range seeds {
		data, err := os.ReadFile(path)
		require.NoError(f, err)
		f.Add(data)
		for _, m := range mutations(data) {
			f.Add(m)
		}
	}
	stack := readStack(f, filepath.Join("testdata", "override", "in", "stack.yaml"))
	dump := os.Getenv("FUZZ_SPEC_DUMP")
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, l := range lines {
			input := bytes.Clone(data)
			first, err1 := FromOverride(stack.Name, stack.Spec, l.operand, input)
			second, err2 := FromOverride(stack.Name, stack.Spec, l.operand, input)
			require.True(t, bytes.Equal(data, input), "FromOverride changed its input")
			require.Equal(t, fmt.Sprint(err1), fmt.Sprint(err2), "not deterministic")
			require.Equal(t, first, second)
			server, err := ServerEnv(l.operand)
			require.NoError(t, err)
			env := newEnvSet(server)
			if cacheEnabled(stack.Spec) {
				cacheEnv(stack.Name, env)
			}
			_, modelErr := stackconfig.Check(l.line, data, stackconfig.Options{Env: stackconfig.MapEnv(ContainerEnv(stack.Spec, env.operator())), Home: HomeDir})
			if err1 != nil {
				if modelErr == nil {
					require.ErrorContains(t, err1, "read-only root filesystem", "refused although the model accepts it")
				}
				continue
			}
			require.NoError(t, modelErr, "accepted although the %s model refuses it", l.line)
			require.True(t, bytes.Equal(data, first.YAML), "the override is not returned byte for byte")
			sum := sha256.Sum256(data)
			require.Equal(t, hex.EncodeToString(sum[:]), first.Hash)
			dumpAccepted(t, dump, l.line, dataName("override", data), data, ContainerEnv(stack.Spec, env.operator()))
		}
	})
}

// mutations are a run config with one top-level key removed, and with one
// of its 0.3 stores removed, each in turn.
func mutations(data []byte) [][]byte {
	var doc map[string]any
	if yaml.Unmarshal(data, &doc) != nil {
		return nil
	}
	var out [][]byte
	add := func(m map[string]any) {
		if b, err := yaml.Marshal(m); err == nil {
			out = append(out, b)
		}
	}
	for k := range doc {
		m := map[string]any{}
		for k2, v := range doc {
			if k2 != k {
				m[k2] = v
			}
		}
		add(m)
	}
	if s, ok := doc["storage"].(map[string]any); ok {
		if stores, ok := s["stores"].(map[string]any); ok {
			for k := range stores {
				m := map[string]any{}
				for k2, v := range stores {
					if k2 != k {
						m[k2] = v
					}
				}
				cp := map[string]any{}
				for k2, v := range doc {
					cp[k2] = v
				}
				cp["storage"] = map[string]any{"backends": s["backends"], "stores": m}
				add(cp)
			}
		}
	}
	return out
}

// FuzzSpec fills InferenceStack specs from the API's types with
// testutil.SpecFiller (seeded by the fuzzer; its fill functions draw
// distributions, APIs, provider names from the lines' facts, models,
// storage) and holds the property the operator promises: a spec is either
// refused with an error (the CR's condition) or gives a config the line's
// model accepts; never one the model refuses. Unlike
// operator/internal/controller's TestAdmittedSpecs, which holds the same
// property over the specs the real API server admits, it also runs specs
// the CRD would refuse (the pipeline must not accept a config the model
// refuses whatever it is given); `go test -fuzz FuzzSpec` runs it longer.
// FUZZ_SPEC_SEEDS=N runs N seeds instead of 64.
// FUZZ_SPEC_DUMP=DIR writes each accepted config there (as FuzzGenerate
// and FuzzFromOverride do), for running upstream's own start-up over them
// (hack/llamastack/upstream-startup.sh).
func FuzzSpec(f *testing.F) {
	seeds := 64
	if n, err := strconv.Atoi(os.Getenv("FUZZ_SPEC_SEEDS")); err == nil && n > 0 {
		seeds = n // more seeds for a corpus of upstream's verdicts
	}
	for i := range seeds {
		f.Add(int64(i))
	}
	dump := os.Getenv("FUZZ_SPEC_DUMP")
	f.Fuzz(func(t *testing.T, seed int64) {
		spoke := v1alpha1.InferenceStack{}
		spoke.Name = fmt.Sprintf("s-%x", uint64(seed)%4096)
		testutil.SpecFiller(seed).Fill(&spoke.Spec)
		stack := *testutil.Hub(&spoke)
		for _, l := range lines {
			res := generateOne(t, stack, l.line, l.operand)
			dumpAccepted(t, dump, l.line, fmt.Sprintf("spec-%016x", uint64(seed)), res.YAML, ContainerEnv(stack.Spec, res.OperatorEnv()))
		}
	})
}

// dumpAccepted writes an accepted config and its container environment to
// DIR/<tag>/<name>.yaml and .env when DIR is set (FUZZ_SPEC_DUMP), the
// layout hack/llamastack/upstream-startup.sh reads.
func dumpAccepted(t *testing.T, dir string, line stackconfig.Line, name string, config []byte, env map[string]string) {
	if dir == "" || config == nil {
		return
	}
	dir = filepath.Join(dir, line.Tag())
	require.NoError(t, os.MkdirAll(dir, 0o755))
	envYAML, err := yaml.Marshal(env)
	require.NoError(t, err)
	base := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(base+".yaml", config, 0o644))
	require.NoError(t, os.WriteFile(base+".env", envYAML, 0o644))
}

// dataName names a fuzz input by its bytes.
func dataName(prefix string, data []byte) string {
	sum := sha256.Sum256(data)
	return prefix + "-" + hex.EncodeToString(sum[:8])
}
