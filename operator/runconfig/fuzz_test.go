package runconfig

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/yaml"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	"github.com/inferencestack/inferencestack/operator/runconfig/stackconfig"
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
	f.Fuzz(func(t *testing.T, data []byte) {
		var stack v1alpha1.InferenceStack
		if err := yaml.Unmarshal(data, &stack); err != nil || stack.Spec.OverrideConfig != nil {
			return
		}
		for _, l := range lines {
			generateOne(t, stack, l.line, l.operand)
		}
	})
}

func generateOne(t *testing.T, stack v1alpha1.InferenceStack, line stackconfig.Line, operand Operand) Result {
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
	_, err := stackconfig.Check(line, first.YAML, stackconfig.Options{Env: stackconfig.MapEnv(ContainerEnv(spec, first.Env)), Home: HomeDir})
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
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, l := range lines {
			input := bytes.Clone(data)
			first, err1 := FromOverride(stack.Name, stack.Spec, l.operand, input)
			second, err2 := FromOverride(stack.Name, stack.Spec, l.operand, input)
			require.True(t, bytes.Equal(data, input), "FromOverride changed its input")
			require.Equal(t, fmt.Sprint(err1), fmt.Sprint(err2), "not deterministic")
			require.Equal(t, first, second)
			env := newEnvSet()
			if cacheEnabled(stack.Spec) {
				cacheEnv(stack.Name, env)
			}
			_, modelErr := stackconfig.Check(l.line, data, stackconfig.Options{Env: stackconfig.MapEnv(ContainerEnv(stack.Spec, env.list())), Home: HomeDir})
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

// FuzzSpec builds InferenceStack specs from the API's own values (each
// distribution, any set of disabled APIs, providers of each API by the
// provider types of the line's facts, models naming providers by id, by
// type or not at all, storage choices) and holds the property the operator
// promises: a spec is either refused with an error (the CR's condition) or
// gives a config the line's model accepts; never one the model refuses.
// FUZZ_SPEC_DUMP=DIR writes each accepted config there, for running
// upstream's own start-up over them (hack/llamastack/upstream-startup.sh).
func FuzzSpec(f *testing.F) {
	for i := range 64 {
		f.Add(uint64(i)*0x9e3779b97f4a7c15, uint64(i))
	}
	dump := os.Getenv("FUZZ_SPEC_DUMP")
	f.Fuzz(func(t *testing.T, a, b uint64) {
		stack := specFrom(a, b)
		for _, l := range lines {
			res := generateOne(t, stack, l.line, l.operand)
			if dump != "" && res.YAML != nil {
				dir := filepath.Join(dump, l.line.Tag())
				require.NoError(t, os.MkdirAll(dir, 0o755))
				env, err := yaml.Marshal(ContainerEnv(stack.Spec, res.Env))
				require.NoError(t, err)
				base := filepath.Join(dir, fmt.Sprintf("%016x-%016x", a, b))
				require.NoError(t, os.WriteFile(base+".yaml", res.YAML, 0o644))
				require.NoError(t, os.WriteFile(base+".env", env, 0o644))
			}
		}
	})
}

// specFrom draws a spec from two numbers.
func specFrom(a, b uint64) v1alpha1.InferenceStack {
	bits := func(n uint) uint64 { v := a & (1<<n - 1); a >>= n; return v }
	pick := func(list []string) string { v := list[b%uint64(len(list))]; b /= uint64(len(list)); return v }
	spec := v1alpha1.InferenceStackSpec{}
	dists := []string{"starter", "remote-vllm", "postgres-demo", "meta-reference-gpu"}
	spec.Distribution.Name = v1alpha1.DistributionName(pick(dists))
	apis := []v1alpha1.APIName{v1alpha1.APIAgents, v1alpha1.APIBatches, v1alpha1.APIDatasetIO, v1alpha1.APIEval,
		v1alpha1.APIFiles, v1alpha1.APIInference, v1alpha1.APIPostTraining, v1alpha1.APISafety, v1alpha1.APIScoring,
		v1alpha1.APITelemetry, v1alpha1.APIToolRuntime, v1alpha1.APIVectorIO}
	mask := bits(12)
	if bits(2) != 0 { // most draws disable nothing or little
		mask &= bits(12)
	}
	for i, api := range apis {
		if mask&(1<<i) != 0 {
			spec.Disabled = append(spec.Disabled, api)
		}
	}
	inference := []string{"vllm", "ollama", "openai", "tgi", "fireworks", "together"}
	var provs v1alpha1.ProvidersSpec
	for i := range int(bits(2)) {
		p := v1alpha1.ProviderSpec{Provider: pick(inference)}
		if bits(1) == 1 {
			p.ID = fmt.Sprintf("%s-%d", p.Provider, i)
		}
		if bits(1) == 1 || p.Provider == "vllm" || p.Provider == "ollama" || p.Provider == "tgi" {
			p.Endpoint = "http://" + p.Provider + ".models.svc:8000"
		}
		provs.Inference = append(provs.Inference, p)
	}
	if len(provs.Inference) > 0 {
		spec.Providers = &provs
	}
	if spec.Distribution.Name == v1alpha1.DistributionRemoteVLLM && bits(1) == 1 {
		spec.Providers = &v1alpha1.ProvidersSpec{Inference: append(provs.Inference, v1alpha1.ProviderSpec{Provider: "vllm", Endpoint: "http://vllm:8000"})}
	}
	var models []v1alpha1.ModelSpec
	for i := range int(bits(2)) {
		ref := pick([]string{"", "vllm", "ollama", "openai", "sentence-transformers", "vllm-0", "nope"})
		models = append(models, v1alpha1.ModelSpec{Name: fmt.Sprintf("m%d", i), Provider: ref, ProviderModelID: "x/y"})
	}
	if len(models) > 0 {
		spec.Resources = &v1alpha1.ResourcesSpec{Models: models}
	}
	switch bits(2) {
	case 1:
		spec.Cache = &v1alpha1.CacheSpec{Enabled: true}
	case 2:
		spec.Storage = &v1alpha1.StorageSpec{}
		if bits(1) == 1 {
			spec.Storage.KV = &v1alpha1.KVStoreSpec{Type: v1alpha1.KVStoreRedis, Endpoint: "redis.cache.svc:6379"}
		}
	}
	name := strings.ReplaceAll(fmt.Sprintf("s-%x", b%4096), "_", "-")
	stack := v1alpha1.InferenceStack{Spec: spec}
	stack.Name = name
	return stack
}
