package stackconfig

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRegistryReadsTheData pins what the registry reads of each line's
// data (schemas.json, facts.json) rather than declares: the layout, whether
// telemetry has providers, whether health needs a token with auth on, the
// registry's key version and how register_model names a model.
func TestRegistryReadsTheData(t *testing.T) {
	tests := []struct {
		line             Line
		layout           Layout
		telemetryAPI     bool
		healthNeedsToken bool
		registryKey      string
		modelAlias       bool
	}{
		{line: Line02, layout: InlineStores, telemetryAPI: true, healthNeedsToken: true, registryKey: "v9", modelAlias: true},
		{line: Line03, layout: StorageBackends, telemetryAPI: false, healthNeedsToken: false, registryKey: "v10", modelAlias: false},
		{line: Line07, layout: StorageBackends, telemetryAPI: false, healthNeedsToken: false, registryKey: "v10", modelAlias: false},
		{line: Line08, layout: StorageBackends, telemetryAPI: false, healthNeedsToken: false, registryKey: "v10", modelAlias: false},
	}
	for _, tc := range tests {
		t.Run(string(tc.line), func(t *testing.T) {
			require.True(t, tc.line.Known())
			require.Equal(t, tc.layout, tc.line.Layout())
			require.Equal(t, tc.telemetryAPI, tc.line.HasProviderAPI("telemetry"))
			require.Equal(t, tc.healthNeedsToken, tc.line.HealthNeedsToken())
			require.Equal(t, tc.registryKey, tc.line.Facts().RegistryKey.Version)
			require.Equal(t, tc.modelAlias, tc.line.Facts().ModelIdentifier.AliasWhenRenamed)
		})
	}
	require.Equal(t, []Line{Line02, Line03, Line07, Line08}, lines())
}

// TestUnknownLineIsAnError: a line the registry lacks never takes another
// line's behaviour.
func TestUnknownLineIsAnError(t *testing.T) {
	unknown := Line("0.9")
	require.False(t, unknown.Known())
	require.Equal(t, UnknownLayout, unknown.Layout())
	require.Nil(t, unknown.RunConfigFields())
	require.True(t, unknown.HealthNeedsToken(), "an unknown line takes the safe side")
	_, err := Check(unknown, []byte("version: 2\nimage_name: x\nproviders: {}\n"), Options{})
	var uv *UnknownVersionError
	require.ErrorAs(t, err, &uv)
	_, err = LineOf("0.9.0")
	require.ErrorAs(t, err, &uv)
}

// TestResourcesAreJudgedByTheSchema: a key of upstream's VectorStoreInput
// the hand mirror lacked (provider_vector_store_id) is accepted, as
// upstream accepts it.
func TestResourcesAreJudgedByTheSchema(t *testing.T) {
	doc := "version: 2\nimage_name: t\nstorage:\n  backends:\n    kv_default: {type: kv_sqlite, db_path: /d/kv.db}\n    sql_default: {type: sql_sqlite, db_path: /d/sql.db}\n" +
		"  stores:\n    metadata: {namespace: r, backend: kv_default}\n    conversations: {table_name: c, backend: sql_default}\n    inference: {table_name: i, backend: sql_default}\n" +
		"providers: {}\nregistered_resources:\n  vector_stores:\n  - {vector_store_id: v, embedding_model: e, embedding_dimension: 3, provider_vector_store_id: pv}\n"
	_, err := Check(Line03, []byte(doc), Options{})
	require.NoError(t, err)
}

// TestLineFacts pins what the operator reads of each line's facts.json
// through Line's accessors: the start command, the config folder and port
// variables, the client version header, the image repository, the APIs,
// the registry's resource types, the history tables and the PostgreSQL
// defaults, as upstream's source has them at each tag.
func TestLineFacts(t *testing.T) {
	tests := []struct {
		version                   string
		line                      Line
		command                   []string
		configDirEnv, configDir   string
		portEnv, header, image    string
		published                 []string
		apis, noAPIs              []string
		resourceTypes             int
		inferenceTable, responses string
		tableFromConfig           bool
		pgDB, pgKVTable           string
	}{
		{version: "0.2.23", line: Line02, command: []string{"llama", "stack", "run"},
			configDirEnv: "LLAMA_STACK_CONFIG_DIR", configDir: "~/.llama", portEnv: "LLAMA_STACK_PORT",
			header: "x-llamastack-client-version", image: "docker.io/llamastack/distribution-starter",
			apis: []string{"agents", "telemetry", "post_training", "eval"}, noAPIs: []string{"responses", "messages"},
			resourceTypes: 9, inferenceTable: "chat_completions", responses: "openai_responses",
			pgDB: "llamastack", pgKVTable: "llamastack_kvstore"},
		{version: "0.3.0", line: Line03, command: []string{"llama", "stack", "run"},
			configDirEnv: "LLAMA_STACK_CONFIG_DIR", configDir: "~/.llama", portEnv: "LLAMA_STACK_PORT",
			header: "x-llamastack-client-version", image: "docker.io/llamastack/distribution-starter",
			apis: []string{"agents", "telemetry", "post_training", "eval"}, noAPIs: []string{"responses", "admin"},
			resourceTypes: 9, inferenceTable: "chat_completions", responses: "openai_responses",
			pgDB: "llamastack", pgKVTable: "llamastack_kvstore"},
		{version: "0.7.1", line: Line07, command: []string{"llama", "stack", "run"},
			configDirEnv: "LLAMA_STACK_CONFIG_DIR", configDir: "~/.llama", portEnv: "LLAMA_STACK_PORT",
			header: "x-llamastack-client-version", image: "docker.io/llamastack/distribution-starter", published: []string{"starter"},
			apis:          []string{"responses", "file_processors", "connectors", "admin", "eval", "datasetio", "scoring"},
			noAPIs:        []string{"agents", "telemetry", "post_training", "messages", "interactions"},
			resourceTypes: 9, inferenceTable: "inference_store", responses: "openai_responses", tableFromConfig: true,
			pgDB: "llamastack", pgKVTable: "llamastack_kvstore"},
		{version: "0.8.0", line: Line08, command: []string{"ogx", "stack", "run"},
			configDirEnv: "OGX_CONFIG_DIR", configDir: "~/.ogx", portEnv: "OGX_PORT",
			header: "x-ogx-client-version", image: "docker.io/ogx/distribution-starter", published: []string{"starter"},
			apis:          []string{"responses", "messages", "interactions", "file_processors", "connectors", "admin"},
			noAPIs:        []string{"agents", "datasetio", "scoring", "eval", "benchmarks", "datasets", "scoring_functions"},
			resourceTypes: 6, inferenceTable: "inference_store", responses: "openai_responses", tableFromConfig: true,
			pgDB: "ogx", pgKVTable: "ogx_kvstore"},
	}
	for _, tc := range tests {
		t.Run(tc.version, func(t *testing.T) {
			l, err := LineOf(tc.version)
			require.NoError(t, err)
			require.Equal(t, tc.line, l)
			require.Equal(t, tc.command, l.Command())
			require.Equal(t, tc.configDirEnv, l.ConfigDirEnv())
			require.Equal(t, tc.configDir, l.ConfigDirDefault())
			if l == Line08 {
				require.Equal(t, "~/.llama", l.LegacyConfigDir(), "0.8.0 moves ~/.llama to ~/.ogx")
			} else {
				require.Empty(t, l.LegacyConfigDir())
			}
			require.Equal(t, tc.portEnv, l.PortEnv())
			require.EqualValues(t, 8321, l.DefaultPort())
			require.Equal(t, tc.header, l.ClientVersionHeader())
			require.Equal(t, tc.image, l.ImageRepository("starter"))
			require.Equal(t, tc.published, l.PublishedDistributions())
			for _, api := range tc.apis {
				require.True(t, l.HasAPI(api), api)
			}
			for _, api := range tc.noAPIs {
				require.False(t, l.HasAPI(api), api)
			}
			require.Len(t, l.ResourceTypes(), tc.resourceTypes)
			require.Contains(t, l.ResourceTypes(), "model")
			require.Equal(t, tc.inferenceTable, l.DefaultTable("inference"))
			require.Equal(t, tc.responses, l.DefaultTable("responses"))
			s, ok := l.ServerStore("inference")
			require.True(t, ok)
			require.Equal(t, tc.tableFromConfig, s.TableFromConfig)
			require.Equal(t, tc.pgDB, l.DefaultPostgresDatabase(KVBackend))
			require.Equal(t, tc.pgDB, l.DefaultPostgresDatabase(SQLBackend))
			require.Equal(t, tc.pgKVTable, l.DefaultPostgresKVTable())
			if l != Line02 { // conversations arrived in 0.3
				require.Equal(t, "openai_conversations", l.DefaultTable("conversations"))
			}
		})
	}
	var none Line = "0.9"
	require.Nil(t, none.Command())
	require.Empty(t, none.ImageRepository("starter"))
	require.False(t, none.HasAPI("inference"))
}
