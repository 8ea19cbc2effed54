package stackconfig

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/inferencestack/inferencestack/operator/runconfig/distributions"
)

// TestSchemasCoverTheRegistry: every provider type of the line's facts has
// its config class's schema, each compiles, and names its upstream file.
func TestSchemasCoverTheRegistry(t *testing.T) {
	for _, line := range lines() {
		s := line.Schemas()
		require.NotNil(t, s, line)
		// StackRunConfig up to 0.3, StackConfig from 0.7 (config.yaml)
		require.Contains(t, []string{"StackRunConfig", "StackConfig"}, s.RunConfig.Class)
		require.NoError(t, compile(s.Tag+"/run_config", s.RunConfig).err)
		n := 0
		for api, types := range line.Facts().Providers {
			for typ, f := range types {
				ps, ok := s.Provider(api, typ)
				require.True(t, ok, "%s %s %s has no schema", line, api, typ)
				require.Equal(t, f.ConfigClass, ps.ConfigClass)
				require.NotEmpty(t, ps.Source)
				require.NotEmpty(t, ps.Extra[ps.Class], "%s's extra behaviour", ps.Class)
				c := compile(s.Tag+"/"+api+"/"+typ, ps.ModelSchema)
				require.NoError(t, c.err, "%s %s", api, typ)
				n++
			}
		}
		require.Greater(t, n, 50, line) // 59 at 0.8.0, which dropped datasetio, scoring and eval
	}
}

// TestValidateProviderConfig: unknown keys and values of the wrong type
// are refused with the upstream field named; what pydantic's lax mode
// converts (a string that reads as an integer) and fields whose
// validators run before pydantic's (0.2's telemetry sinks as a
// comma-separated string) pass.
func TestValidateProviderConfig(t *testing.T) {
	tests := []struct {
		name     string
		line     Line
		api, typ string
		config   map[string]any
		want     []string
	}{
		{name: "valid", line: Line03, api: "inference", typ: "remote::vllm",
			config: map[string]any{"url": "http://v:8000/v1", "api_token": "x", "max_tokens": 10, "tls_verify": false}},
		{name: "unknown key", line: Line03, api: "vector_io", typ: "remote::pgvector",
			config: map[string]any{"url": "http://pg:5432"},
			want:   []string{"url: unknown field: upstream's PGVectorVectorIOConfig has no field url and would ignore it (the setting would have no effect); it takes db, host, password, persistence, port, user"}},
		{name: "wrong type", line: Line03, api: "inference", typ: "remote::vllm",
			config: map[string]any{"url": 8000, "max_tokens": "many"},
			want: []string{"max_tokens: must be an integer, not a string (upstream: VLLMInferenceAdapterConfig.max_tokens)",
				"url: must be a string or null, not an integer (upstream: VLLMInferenceAdapterConfig.url)"}},
		{name: "uri", line: Line03, api: "inference", typ: "remote::azure",
			config: map[string]any{"api_base": "azure-host", "api_key": "k"},
			want:   []string{`api_base: must be a URI, not "azure-host" (upstream: AzureConfig.api_base)`}},
		{name: "env placeholder substituted first", line: Line03, api: "inference", typ: "remote::vllm",
			config: mustExpand(t, map[string]any{"max_tokens": "${env.MAX_TOKENS:=4096}", "tls_verify": "${env.TLS_VERIFY:=false}"})},
		{name: "lax integer", line: Line03, api: "inference", typ: "remote::vllm", config: map[string]any{"max_tokens": "12"}},
		{name: "nested", line: Line03, api: "vector_io", typ: "inline::faiss",
			config: map[string]any{"persistence": map[string]any{"namespace": "n", "backend": "kv_default", "db_path": "/x"}},
			want:   []string{"persistence.db_path: unknown field: upstream's KVStoreReference has no field db_path and would ignore it (the setting would have no effect); it takes backend, namespace"}},
		{name: "required", line: Line03, api: "vector_io", typ: "inline::faiss", config: map[string]any{},
			want: []string{"persistence: required (upstream: FaissVectorIOConfig.persistence)"}},
		{name: "before validator", line: Line02, api: "telemetry", typ: "inline::meta-reference",
			config: map[string]any{"sinks": "console,sqlite", "service_name": "s"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			errs, ok := tc.line.Schemas().ValidateProviderConfig(tc.api, tc.typ, tc.config)
			require.True(t, ok)
			var got []string
			for _, e := range errs {
				got = append(got, strings.TrimPrefix(e.At(""), "."))
			}
			require.Equal(t, tc.want, got)
		})
	}
}

// TestCheckAppliesTheRuleEverywhere: a whole run config (an override's)
// gets the same rule as a provider's settings: nested unknown keys with a
// value and values of the wrong type are refused at their run-config
// path; an empty unknown key (upstream's own vector_dbs: []) is not.
func TestCheckAppliesTheRuleEverywhere(t *testing.T) {
	base, err := distributions.FS.ReadFile(Line03.Tag() + "/starter.yaml")
	require.NoError(t, err)
	env := MapEnv(map[string]string{"INFERENCE_MODEL": "m"})
	_, err = Check(Line03, base, Options{Env: env, Home: "/tmp"})
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, yaml.Unmarshal(base, &doc))
	doc["server"] = map[string]any{"port": 8321, "tls_ca_file": "/ca.crt"}
	doc["registered_resources"].(map[string]any)["vector_dbs"] = []any{map[string]any{"vector_db_id": "x"}}
	inf := doc["providers"].(map[string]any)["inference"].([]any)
	for _, p := range inf {
		if m := p.(map[string]any); m["provider_type"] == "inline::sentence-transformers" {
			m["config"] = map[string]any{"trust_remote_code": "maybe"}
		}
	}
	data, err := yaml.Marshal(doc)
	require.NoError(t, err)
	_, err = Check(Line03, data, Options{Env: env, Home: "/tmp"})
	require.Error(t, err)
	for _, want := range []string{
		"registered_resources.vector_dbs: unknown field: upstream's RegisteredResources has no field vector_dbs",
		"server.tls_ca_file: unknown field: upstream's ServerConfig has no field tls_ca_file",
		"config.trust_remote_code: unknown field",
	} {
		require.Contains(t, err.Error(), want)
	}
}

// mustExpand substitutes the environment (empty) as upstream's
// replace_env_vars does before validation.
func mustExpand(t *testing.T, m map[string]any) map[string]any {
	v, err := expand(m, "", MapEnv(nil), "/tmp", EnvExpansionFact{})
	require.NoError(t, err)
	return v.(map[string]any)
}
