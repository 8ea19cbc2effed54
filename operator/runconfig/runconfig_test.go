package runconfig

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
)

var update = flag.Bool("update", false, "rewrite golden files")

// run feeds testdata/<name>/in to the pipeline: stack.yaml is the
// InferenceStack, override.yaml the override ConfigMap's run config.
func run(t testing.TB, name string) (Result, error) {
	t.Helper()
	stack := readStack(t, filepath.Join("testdata", name, "in", "stack.yaml"))
	if stack.Spec.OverrideConfig != nil {
		data, err := os.ReadFile(filepath.Join("testdata", name, "in", "override.yaml"))
		require.NoError(t, err)
		return FromOverride(stack.Name, stack.Spec, data)
	}
	return Generate(stack.Name, stack.Spec)
}

func readStack(t testing.TB, path string) v1alpha1.InferenceStack {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var stack v1alpha1.InferenceStack
	require.NoError(t, yaml.UnmarshalStrict(data, &stack), path)
	return stack
}

// rendered is what a case's golden directory holds.
func rendered(t testing.TB, res Result, err error) map[string]string {
	t.Helper()
	if err != nil {
		return map[string]string{"error.txt": err.Error() + "\n"}
	}
	env, merr := yaml.Marshal(res.Env)
	require.NoError(t, merr)
	return map[string]string{"run.yaml": string(res.YAML), "env.yaml": string(env), "hash.txt": res.Hash + "\n"}
}

func TestGolden(t *testing.T) {
	tests := []struct {
		name      string
		assertion require.ErrorAssertionFunc
	}{
		{name: "starter", assertion: require.NoError},
		{name: "remote-vllm", assertion: require.NoError},
		{name: "postgres-demo", assertion: require.NoError},
		{name: "meta-reference-gpu", assertion: require.NoError},
		{name: "overlay", assertion: require.NoError},
		{name: "disabled", assertion: require.NoError},
		{name: "dedup", assertion: require.NoError},
		{name: "secrets", assertion: require.NoError},
		{name: "override", assertion: require.NoError},
		{name: "custom-image", assertion: require.NoError},
		{name: "external-postgres", assertion: require.NoError},
		{name: "auth-tls", assertion: require.NoError},
		{name: "error-unknown-model-provider", assertion: require.Error},
		{name: "error-ambiguous-model-provider", assertion: require.Error},
		{name: "error-custom-image-no-providers", assertion: require.Error},
		{name: "error-unknown-distribution", assertion: require.Error},
		{name: "error-env-clash", assertion: require.Error},
		{name: "error-postgres-demo-without-postgres", assertion: require.Error},
		{name: "error-override-not-a-run-config", assertion: require.Error},
		{name: "error-disabled-dependency", assertion: require.Error},
	}
	dirs, err := os.ReadDir("testdata")
	require.NoError(t, err)
	for _, d := range dirs {
		if d.IsDir() && !slices.ContainsFunc(tests, func(tc struct {
			name      string
			assertion require.ErrorAssertionFunc
		}) bool {
			return tc.name == d.Name()
		}) {
			t.Errorf("testdata/%s has no test case", d.Name())
		}
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, genErr := run(t, tc.name)
			tc.assertion(t, genErr)
			got := rendered(t, res, genErr)
			golden := filepath.Join("testdata", tc.name, "golden")
			if *update {
				require.NoError(t, os.RemoveAll(golden))
				require.NoError(t, os.MkdirAll(golden, 0o755))
				for name, content := range got {
					require.NoError(t, os.WriteFile(filepath.Join(golden, name), []byte(content), 0o644))
				}
				return
			}
			want := map[string]string{}
			entries, err := os.ReadDir(golden)
			require.NoError(t, err, "no golden files: run go test -update and review them")
			for _, e := range entries {
				data, err := os.ReadFile(filepath.Join(golden, e.Name()))
				require.NoError(t, err)
				want[e.Name()] = string(data)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s differs from the golden files (-want +got); run go test -update if intended:\n%s", tc.name, diff)
			}
			if genErr == nil {
				checkInvariants(t, readStack(t, filepath.Join("testdata", tc.name, "in", "stack.yaml")).Spec, res)
			}
		})
	}
}

var placeholderRE = regexp.MustCompile(`\$\{env\.([A-Za-z0-9_]+)(:[=+][^}]*)?\}`)

// checkInvariants holds for every generated config: every placeholder
// without a default has its variable in Env (or comes from the user's own
// settings), Env is sorted and unique, and the hash is the config's.
func checkInvariants(t testing.TB, spec v1alpha1.InferenceStackSpec, res Result) {
	t.Helper()
	var userText strings.Builder
	for _, l := range apiProviders(spec.Providers) {
		for _, p := range l.list {
			if p.Settings != nil {
				userText.Write(p.Settings.Raw)
			}
		}
	}
	names := map[string]bool{}
	for i, v := range res.Env {
		require.False(t, names[v.Name], "duplicate env %s", v.Name)
		names[v.Name] = true
		if i > 0 {
			require.Less(t, res.Env[i-1].Name, v.Name, "env is not sorted")
		}
	}
	for _, m := range placeholderRE.FindAllStringSubmatch(string(res.YAML), -1) {
		if m[2] == "" && !strings.Contains(userText.String(), m[0]) {
			require.True(t, names[m[1]], "the config refers to ${env.%s} but Env does not set it", m[1])
		}
	}
	require.Equal(t, hash(res.YAML), res.Hash)
}

func TestSecretsNeverInConfig(t *testing.T) {
	res, err := run(t, "secrets")
	require.NoError(t, err)
	refs := 0
	for _, v := range res.Env {
		if v.ValueFrom == nil || v.ValueFrom.SecretKeyRef == nil {
			continue
		}
		refs++
		require.Empty(t, v.Value, v.Name)
		require.Contains(t, string(res.YAML), "${env."+v.Name+"}", "the secret %s must reach the config as a placeholder", v.Name)
	}
	require.Equal(t, 4, refs, "vllm token, openai key, tavily key, redis password")
	for _, secretName := range []string{"vllm-credentials", "openai", "search-keys"} {
		require.NotContains(t, string(res.YAML), "name: "+secretName)
	}
}

func TestDeterministicAndBaseUntouched(t *testing.T) {
	before := map[string][]byte{}
	for _, d := range Distributions() {
		b, err := Base(d)
		require.NoError(t, err)
		before[d] = slices.Clone(b)
	}
	for _, name := range []string{"overlay", "secrets", "disabled", "dedup", "auth-tls"} {
		first, err := run(t, name)
		require.NoError(t, err)
		for range 3 {
			again, err := run(t, name)
			require.NoError(t, err)
			require.Equal(t, string(first.YAML), string(again.YAML))
			require.Equal(t, first.Hash, again.Hash)
			require.Equal(t, first.Env, again.Env)
		}
	}
	for _, d := range Distributions() {
		b, err := Base(d)
		require.NoError(t, err)
		require.Equal(t, string(before[d]), string(b), "base %s changed", d)
	}
}

func TestDistributionsMatchAPIEnum(t *testing.T) {
	var enum []string
	for _, d := range v1alpha1.DistributionNames {
		enum = append(enum, string(d))
	}
	slices.Sort(enum)
	require.Equal(t, enum, Distributions(), "every distribution of the CRD enum needs an embedded base, and no other")
}

// TestBasesAreConsistent: the registered resources of every base point at
// providers of the base, and every provider's API is served.
func TestBasesAreConsistent(t *testing.T) {
	for _, d := range Distributions() {
		t.Run(d, func(t *testing.T) {
			cfg, err := load(v1alpha1.InferenceStackSpec{Distribution: v1alpha1.DistributionSpec{Name: v1alpha1.DistributionName(d)}})
			require.NoError(t, err)
			pruned := cfg
			pruned.Models = slices.Clone(cfg.Models)
			pruned.Shields = slices.Clone(cfg.Shields)
			pruned.ToolGroups = slices.Clone(cfg.ToolGroups)
			pruneResources(&pruned)
			require.Equal(t, cfg.Models, pruned.Models)
			require.Equal(t, cfg.Shields, pruned.Shields)
			require.Equal(t, cfg.ToolGroups, pruned.ToolGroups)
			for api := range cfg.Providers {
				require.Contains(t, cfg.APIs, api)
			}
			require.Equal(t, d, cfg.ImageName)
		})
	}
}

func TestPostgresSecretData(t *testing.T) {
	tests := []struct {
		name      string
		uri       string
		want      map[string]string
		assertion require.ErrorAssertionFunc
	}{
		{
			name:      "full",
			uri:       "postgresql://llama:s3cr%40t@db.example.com:6543/stack?sslmode=require",
			want:      map[string]string{"host": "db.example.com", "port": "6543", "db": "stack", "user": "llama", "password": "s3cr@t"},
			assertion: require.NoError,
		},
		{
			name:      "default port",
			uri:       "postgres://llama@db/stack",
			want:      map[string]string{"host": "db", "port": "5432", "db": "stack", "user": "llama", "password": ""},
			assertion: require.NoError,
		},
		{name: "wrong scheme", uri: "mysql://a@b/c", assertion: require.Error},
		{name: "no database", uri: "postgresql://a@b:5432/", assertion: require.Error},
		{name: "no user", uri: "postgresql://b:5432/c", assertion: require.Error},
		{name: "no host", uri: "postgresql:///c", assertion: require.Error},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := PostgresSecretData(tc.uri)
			tc.assertion(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestGenerateRefusesOverride(t *testing.T) {
	_, err := Generate("a", v1alpha1.InferenceStackSpec{
		Distribution:   v1alpha1.DistributionSpec{Name: v1alpha1.DistributionStarter},
		OverrideConfig: &v1alpha1.OverrideConfigSpec{ConfigMapName: "x"},
	})
	require.ErrorContains(t, err, "spec.overrideConfig")
}

func TestEnvName(t *testing.T) {
	require.Equal(t, "VECTOR_IO_MY_PGVECTOR_PASSWORD", envName("vector_io", "my-pgvector", "password"))
	require.Equal(t, "INFERENCE_OPENAI_API_KEY", envName("inference", "openai", "api_key"))
}

func TestProviderSecretEnv(t *testing.T) {
	// Two ids that map to the same variable name are refused, naming both.
	spec := v1alpha1.InferenceStackSpec{
		Distribution: v1alpha1.DistributionSpec{Name: v1alpha1.DistributionStarter},
		Providers: &v1alpha1.ProvidersSpec{Inference: v1alpha1.ProviderList{
			{ID: "a-b", Provider: "openai", APIKey: &corev1.SecretKeySelector{Key: "k"}},
			{ID: "a_b", Provider: "openai", APIKey: &corev1.SecretKeySelector{Key: "k"}},
		}},
	}
	_, err := Generate("a", spec)
	require.ErrorContains(t, err, "spec.providers.inference[1].apiKey")
	require.ErrorContains(t, err, "spec.providers.inference[0].apiKey")
	require.True(t, strings.Contains(err.Error(), "INFERENCE_A_B_API_KEY"))
}

// TestSamplesGenerate: every sample InferenceStack gives a run config (the
// override sample needs its ConfigMap and is only checked for shape).
func TestSamplesGenerate(t *testing.T) {
	samples, err := filepath.Glob(filepath.Join("..", "config", "samples", "inferencestack_*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, samples)
	for _, path := range samples {
		t.Run(filepath.Base(path), func(t *testing.T) {
			stack := readStack(t, path)
			if stack.Spec.OverrideConfig != nil {
				return
			}
			res, err := Generate(stack.Name, stack.Spec)
			require.NoError(t, err)
			checkInvariants(t, stack.Spec, res)
		})
	}
}
