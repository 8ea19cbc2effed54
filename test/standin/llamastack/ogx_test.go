package main

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// ogxConfig is a 0.8 run config keeping its stores where upstream's
// shipped configs do: under ~/.ogx unless SQLITE_STORE_DIR is set.
const ogxConfig = `version: 2
distro_name: t
providers:
  inference:
  - {provider_id: ollama, provider_type: remote::ollama, config: {base_url: 'http://ollama:11434/v1'}}
storage:
  backends:
    kv_default: {type: kv_sqlite, db_path: '${env.SQLITE_STORE_DIR:=~/.ogx/distributions/t}/kv.db'}
    sql_default: {type: sql_sqlite, db_path: '${env.SQLITE_STORE_DIR:=~/.ogx/distributions/t}/sql.db'}
  stores:
    metadata: {namespace: registry, backend: kv_default}
    prompts: {namespace: prompts, backend: kv_default}
    inference: {table_name: inference_store, backend: sql_default}
    conversations: {table_name: openai_conversations, backend: sql_default}
`

// TestOGXContract: OGX 0.8 starts as "ogx stack run" only, takes its port from
// OGX_PORT (LLAMA_STACK_PORT is not read), and reads no LLAMA_STACK_*
// variable: with LLAMA_STACK_CONFIG_DIR pointing at a volume and
// SQLITE_STORE_DIR unset, its state is in the home folder's .ogx, so a
// restart with a fresh home (a new pod) has lost it.
func TestOGXContract(t *testing.T) {
	t.Setenv("LLAMA_STACK_STANDIN_VERSION", "0.8.0")
	volume, home := t.TempDir(), t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("LLAMA_STACK_CONFIG_DIR", volume)
	t.Setenv("LLAMA_STACK_PORT", "7000")
	t.Setenv("OGX_PORT", "7001")
	cfg := config(t, ogxConfig)

	_, err := start([]string{"llama", "stack", "run", cfg})
	require.Error(t, err, "0.8 has no llama command")

	first, err := start([]string{"ogx", "stack", "run", cfg})
	require.NoError(t, err)
	require.EqualValues(t, 7001, first.cmd.Port, "the port comes from OGX_PORT")
	var m model
	require.Equal(t, http.StatusOK, call(t, first.handler, "POST", "/v1/models", `{"model_id":"added","provider_id":"ollama"}`, &m))
	var stores []storeStatus
	require.Equal(t, http.StatusOK, call(t, first.handler, "GET", "/standin/v1/stores", "", &stores))
	for _, s := range stores {
		require.True(t, strings.HasPrefix(s.Path, filepath.Join(home, ".ogx")+"/"), "the %s store is at %s, not under %s/.ogx", s.Store, s.Path, home)
	}

	again, err := start([]string{"ogx", "stack", "run", cfg})
	require.NoError(t, err)
	require.Contains(t, modelIDs(t, again), m.Identifier, "a restart with the same home reads the state back")

	t.Setenv("HOME", t.TempDir()) // a new pod: the image's home is not on the volume
	fresh, err := start([]string{"ogx", "stack", "run", cfg})
	require.NoError(t, err)
	require.NotContains(t, modelIDs(t, fresh), m.Identifier, "LLAMA_STACK_CONFIG_DIR kept nothing: the state went with the old home")

	t.Setenv("SQLITE_STORE_DIR", volume)
	onVolume, err := start([]string{"ogx", "stack", "run", cfg})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, call(t, onVolume.handler, "POST", "/v1/models", `{"model_id":"kept","provider_id":"ollama"}`, nil))
	t.Setenv("HOME", t.TempDir())
	later, err := start([]string{"ogx", "stack", "run", cfg})
	require.NoError(t, err)
	require.Contains(t, modelIDs(t, later), "ollama/kept", "state placed on the volume survives a new home")
}

// modelIDs lists the identifiers of the models srv's registry holds.
func modelIDs(t *testing.T, srv *server) []string {
	t.Helper()
	var models struct{ Data []model }
	require.Equal(t, http.StatusOK, call(t, srv.handler, "GET", "/v1/models", "", &models))
	var ids []string
	for _, m := range models.Data {
		ids = append(ids, m.Identifier)
	}
	return ids
}
