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
	require.Equal(t, []Line{Line02, Line03}, lines())
}

// TestUnknownLineIsAnError: a line the registry lacks never takes another
// line's behaviour.
func TestUnknownLineIsAnError(t *testing.T) {
	unknown := Line("0.7")
	require.False(t, unknown.Known())
	require.Equal(t, UnknownLayout, unknown.Layout())
	require.Nil(t, unknown.RunConfigFields())
	require.True(t, unknown.HealthNeedsToken(), "an unknown line takes the safe side")
	_, err := Check(unknown, []byte("version: 2\nimage_name: x\nproviders: {}\n"), Options{})
	var uv *UnknownVersionError
	require.ErrorAs(t, err, &uv)
	_, err = LineOf("0.7.1")
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
