package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// historyConfig is a run config of the 0.3 and 0.7 layout whose SQL
// stores are in %[1]s/sql.db, naming %[2]s as the inference store's
// table_name; %[3]s is the line's own (0.7's ollama takes base_url, and
// it needs a prompts store).
const historyConfig = `version: 2
image_name: history
providers:
  inference:
  - {provider_id: ollama, provider_type: remote::ollama, config: {%[3]s}}
storage:
  backends:
    kv_default: {type: kv_sqlite, db_path: '%[1]s/kv.db'}
    sql_default: {type: sql_sqlite, db_path: '%[1]s/sql.db'}
  stores:
    metadata: {namespace: registry, backend: kv_default}%[4]s
    inference: {table_name: %[2]s, backend: sql_default}
    conversations: {table_name: openai_conversations, backend: sql_default}
registered_resources:
  models:
  - {model_id: 'llama3.2:3b', provider_id: ollama}
`

// startHistory starts the stand-in of version on dir's state with the
// inference store's table_name table.
func startHistory(t *testing.T, version, dir, table string) *server {
	t.Helper()
	t.Setenv("LLAMA_STACK_STANDIN_VERSION", version)
	own := map[string][2]string{
		"0.3.0": {"url: 'http://ollama:11434'", ""},
		"0.7.1": {"base_url: 'http://ollama:11434/v1'", "\n    prompts: {namespace: prompts, backend: kv_default}"},
	}[version]
	text := strings.NewReplacer("%[1]s", dir, "%[2]s", table, "%[3]s", own[0], "%[4]s", own[1]).Replace(historyConfig)
	srv, err := start([]string{"llama", "stack", "run", config(t, text)})
	require.NoError(t, err)
	return srv
}

// completions lists the chat completions srv's history holds.
func completions(t *testing.T, srv *server) []chatCompletion {
	t.Helper()
	var out struct{ Data []chatCompletion }
	require.Equal(t, http.StatusOK, call(t, srv.handler, "GET", "/v1/chat/completions", "", &out))
	return out.Data
}

// sqlTables are the tables of the SQL store file in dir that hold rows.
func sqlTables(t *testing.T, dir string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "sql.db"))
	require.NoError(t, err)
	var f file
	require.NoError(t, json.Unmarshal(data, &f))
	var out []string
	for name, rows := range f.Tables {
		if len(rows) > 0 {
			out = append(out, name)
		}
	}
	return out
}

// TestHistoryTables: the chat completions history is kept where each
// line's code keeps it. 0.3.0 hard-codes the table chat_completions
// whatever storage.stores.inference.table_name says; 0.7.1 honours
// table_name. So a 0.7.1 server on 0.3's state sees that history only
// when its config names 0.3's table, and none under upstream's starter
// name inference_store: the contract a moved stack's config must keep
// (Operand.StateLine).
func TestHistoryTables(t *testing.T) {
	dir := t.TempDir()
	old := startHistory(t, "0.3.0", dir, "inference_store")
	var c chatCompletion
	require.Equal(t, http.StatusOK, call(t, old.handler, "POST", "/v1/chat/completions",
		`{"model":"ollama/llama3.2:3b","messages":[{"role":"user","content":"hello"}]}`, &c))
	require.Regexp(t, `^chatcmpl-[0-9a-f]+$`, c.ID)
	require.Equal(t, http.StatusBadRequest, call(t, old.handler, "POST", "/v1/chat/completions",
		`{"model":"absent","messages":[]}`, nil), "a model the registry does not hold")
	require.Equal(t, []string{"chat_completions"}, sqlTables(t, dir),
		"0.3.0 keeps the history in chat_completions, whatever table_name says")

	again := startHistory(t, "0.3.0", dir, "inference_store")
	require.Equal(t, []chatCompletion{c}, completions(t, again), "0.3.0 reads its history back")

	wrong := startHistory(t, "0.7.1", dir, "inference_store")
	require.Empty(t, completions(t, wrong), "0.7.1 with the starter's table_name reads another table than 0.3 wrote")
	right := startHistory(t, "0.7.1", dir, "chat_completions")
	require.Equal(t, []chatCompletion{c}, completions(t, right), "0.7.1 with 0.3's table name reads 0.3's history")
	var one chatCompletion
	require.Equal(t, http.StatusOK, call(t, right.handler, "GET", "/v1/chat/completions/"+c.ID, "", &one))
	require.Equal(t, c, one)
	require.Equal(t, http.StatusNotFound, call(t, right.handler, "GET", "/v1/chat/completions/chatcmpl-absent", "", nil))
}
