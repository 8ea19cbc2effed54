package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inferencestack/inferencestack/operator/runconfig/stackconfig"
)

// config writes a run config of the given layout to a temp file.
func config(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "run.yaml")
	require.NoError(t, os.WriteFile(path, []byte(body), 0o600))
	return path
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

const v03 = `version: 2
image_name: t
providers: {}
storage:
  backends:
    kv_default:
      type: kv_sqlite
      db_path: %[1]s/kv.db
    sql_default:
      type: sql_sqlite
      db_path: %[1]s/sql.db
  stores:
    metadata: {namespace: registry, backend: kv_default}
    inference: {table_name: inference_store, backend: sql_default}
    conversations: {table_name: openai_conversations, backend: sql_default}
server:
  port: %[2]d
%[3]s
external_providers_dir: %[1]s/providers.d
`

const v02 = `version: 2
image_name: t
providers: {}
metadata_store:
  type: sqlite
  db_path: %[1]s/registry.db
server:
  port: %[2]d
%[3]s
external_providers_dir: %[1]s/providers.d
`

const kubeAuth = `  auth:
    provider_config: {type: kubernetes}`

// TestStartContract: the stand-in exits before serving where the real
// server would, and answers /v1/health as the line's auth middleware does.
func TestStartContract(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, version, body, want string
	}{
		{"0.2 config on 0.3", "0.3.0", fmt.Sprintf(v02, dir, 8321, ""), "other line's layout"},
		{"0.3 config on 0.2", "0.2.23", fmt.Sprintf(v03, dir, 8321, ""), "unknown field"},
		{"no conversations store on 0.3 (upstream's start-up refuses it)", "0.3.0",
			strings.Replace(fmt.Sprintf(v03, dir, 8321, ""), "    conversations: {table_name: openai_conversations, backend: sql_default}\n", "", 1),
			"storage.stores.conversations must be configured in run config"},
		{"remote::otel telemetry on 0.2 (not a provider of v0.2.23)", "0.2.23",
			strings.Replace(fmt.Sprintf(v02, dir, 8321, ""), "providers: {}", "providers:\n  telemetry:\n  - {provider_id: otel, provider_type: remote::otel, config: {}}", 1),
			"Provider `remote::otel` is not available for API `Api.telemetry`"},
		{"unset variable", "0.3.0", fmt.Sprintf(v03, "${env.STATE_DIR}", 8321, ""), "STATE_DIR is not set"},
		{"unwritable folder", "0.3.0", fmt.Sprintf(v03, "/proc/no-such", 8321, ""), "/proc/no-such"},
		{"unknown version", "0.3.9", fmt.Sprintf(v03, dir, 8321, ""), "no known run-config layout"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("LLAMA_STACK_STANDIN_VERSION", tc.version)
			require.ErrorContains(t, run([]string{"llama", "stack", "run", config(t, tc.body)}), tc.want)
		})
	}
	for _, tc := range []struct {
		version string
		want    int
	}{{"0.2.23", http.StatusUnauthorized}, {"0.3.0", http.StatusOK}} {
		t.Run("health with kubernetes auth on "+tc.version, func(t *testing.T) {
			t.Setenv("LLAMA_STACK_STANDIN_VERSION", tc.version)
			port := freePort(t)
			body := fmt.Sprintf(v03, dir, port, kubeAuth)
			if tc.version == "0.2.23" {
				body = fmt.Sprintf(v02, dir, port, kubeAuth)
			}
			go func() { _ = run([]string{"llama", "stack", "run", config(t, body), "--port", fmt.Sprint(port)}) }()
			var resp *http.Response
			require.Eventually(t, func() bool {
				var err error
				resp, err = http.Get(fmt.Sprintf("http://127.0.0.1:%d/v1/health", port))
				return err == nil
			}, 10*time.Second, 20*time.Millisecond)
			resp.Body.Close()
			require.Equal(t, tc.want, resp.StatusCode)
		})
	}
}

// stateConfigs are configs of each line whose stores are SQLite files
// under %[1]s; on 0.2 the prompts store is where upstream puts it, under
// $LLAMA_STACK_CONFIG_DIR.
var stateConfigs = map[string]string{
	"0.2.23": `version: 2
image_name: state
providers:
  inference:
  - {provider_id: ollama, provider_type: remote::ollama, config: {url: http://ollama:11434}}
metadata_store: {type: sqlite, db_path: '${env.STATE_DIR}/registry.db'}
models:
- {model_id: 'llama3.2:3b', provider_id: ollama}
external_providers_dir: ${env.STATE_DIR}/providers.d
`,
	"0.3.0": `version: 2
image_name: state
providers:
  inference:
  - {provider_id: ollama, provider_type: remote::ollama, config: {url: http://ollama:11434}}
storage:
  backends:
    kv_default: {type: kv_sqlite, db_path: '${env.STATE_DIR}/kv.db'}
    sql_default: {type: sql_sqlite, db_path: '${env.STATE_DIR}/sql.db'}
  stores:
    metadata: {namespace: registry, backend: kv_default}
    inference: {table_name: inference_store, backend: sql_default}
    conversations: {table_name: openai_conversations, backend: sql_default}
registered_resources:
  models:
  - {model_id: 'llama3.2:3b', provider_id: ollama}
external_providers_dir: ${env.STATE_DIR}/providers.d
`,
}

// call sends a JSON request to h and decodes the JSON answer into out.
func call(t *testing.T, h http.Handler, method, url, body string, out any) int {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, url, strings.NewReader(body)))
	if out != nil && rec.Code == http.StatusOK {
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), out), rec.Body.String())
	}
	return rec.Code
}

// TestStateReadBack: what is written through the API lands in the files
// the config (and upstream's defaults) name, and a server started again on
// the same config reads it back: registered models, prompts, 0.3's
// conversations and chat completions history.
func TestStateReadBack(t *testing.T) {
	for _, version := range []string{"0.2.23", "0.3.0"} {
		t.Run(version, func(t *testing.T) {
			dir := t.TempDir()
			t.Setenv("LLAMA_STACK_STANDIN_VERSION", version)
			t.Setenv("STATE_DIR", dir)
			t.Setenv("LLAMA_STACK_CONFIG_DIR", filepath.Join(dir, ".llama"))
			cfg := config(t, stateConfigs[version])
			first, err := start([]string{"llama", "stack", "run", cfg})
			require.NoError(t, err)
			var m model
			require.Equal(t, http.StatusOK, call(t, first.handler, "POST", "/v1/models", `{"model_id":"added","provider_id":"ollama"}`, &m))
			require.Equal(t, "ollama/added", m.Identifier)
			require.Equal(t, http.StatusBadRequest, call(t, first.handler, "POST", "/v1/models", `{"model_id":"x","provider_id":"vllm"}`, nil),
				"a provider that is not on")
			var p prompt
			require.Equal(t, http.StatusOK, call(t, first.handler, "POST", "/v1/prompts", `{"prompt":"Hello {{ name }}","variables":["name"]}`, &p))
			require.Regexp(t, `^pmpt_[0-9a-f]{48}$`, p.PromptID)
			var conv conversation
			var chat chatCompletion
			if version != "0.2.23" {
				require.Equal(t, http.StatusOK, call(t, first.handler, "POST", "/v1/conversations", `{"metadata":{"topic":"state"}}`, &conv))
				require.Equal(t, http.StatusOK, call(t, first.handler, "POST", "/v1/chat/completions",
					`{"model":"ollama/llama3.2:3b","messages":[{"role":"user","content":"hi"}]}`, &chat))
			}

			// The files are where upstream's server keeps its SQLite stores.
			want := map[string][]string{
				"0.2.23": {"registry.db", ".llama/distributions/state/prompts.db"},
				"0.3.0":  {"kv.db", "sql.db"},
			}[version]
			for _, f := range want {
				require.FileExists(t, filepath.Join(dir, f))
			}

			again, err := start([]string{"llama", "stack", "run", cfg})
			require.NoError(t, err)
			var models struct{ Data []model }
			require.Equal(t, http.StatusOK, call(t, again.handler, "GET", "/v1/models", "", &models))
			var ids []string
			for _, m := range models.Data {
				ids = append(ids, m.Identifier)
			}
			require.ElementsMatch(t, []string{"ollama/added", "ollama/llama3.2:3b"}, ids)
			var prompts struct{ Data []prompt }
			require.Equal(t, http.StatusOK, call(t, again.handler, "GET", "/v1/prompts", "", &prompts))
			require.Equal(t, []prompt{p}, prompts.Data)
			if version != "0.2.23" {
				var got conversation
				require.Equal(t, http.StatusOK, call(t, again.handler, "GET", "/v1/conversations/"+conv.ID, "", &got))
				require.Equal(t, conv, got)
				require.Equal(t, []chatCompletion{chat}, completions(t, again))
			}
			var stores []storeStatus
			require.Equal(t, http.StatusOK, call(t, again.handler, "GET", "/standin/v1/stores", "", &stores))
			for _, s := range stores {
				require.True(t, s.Persisted, "%+v", s)
				require.Positive(t, s.LoadedAtStart, "the %s store read back nothing at start", s.Store)
			}
		})
	}
}

// TestStoreNotWritable: a store the server cannot write stops it at start,
// naming the store, as upstream's SQLite store does (os.makedirs, connect).
func TestStoreNotWritable(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("LLAMA_STACK_STANDIN_VERSION", "0.2.23")
	t.Setenv("STATE_DIR", dir)
	blocked := filepath.Join(dir, "blocked")
	require.NoError(t, os.WriteFile(blocked, nil, 0o600))
	t.Setenv("LLAMA_STACK_CONFIG_DIR", blocked) // a file: nothing can be made under it
	_, err := start([]string{"llama", "stack", "run", config(t, stateConfigs["0.2.23"])})
	require.ErrorContains(t, err, blocked+"/distributions/state")

	// The folder exists but the store file cannot be replaced: a folder is there.
	t.Setenv("LLAMA_STACK_CONFIG_DIR", filepath.Join(dir, ".llama"))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "registry.db"), 0o755))
	_, err = start([]string{"llama", "stack", "run", config(t, stateConfigs["0.2.23"])})
	require.ErrorContains(t, err, "the registry store")
}

// TestServerAPI: the stand-in serves version and providers where the
// line's facts put them, demands a token where its auth middleware does
// (0.2: every path; 0.3: all but health and version), lists the config's
// enabled providers with upstream's default health, and reports the
// health a test sets.
func TestServerAPI(t *testing.T) {
	for version, openVersion := range map[string]bool{"0.2.23": false, "0.3.0": true} {
		t.Run(version, func(t *testing.T) {
			dir := t.TempDir()
			t.Setenv("LLAMA_STACK_STANDIN_VERSION", version)
			t.Setenv("STATE_DIR", dir)
			t.Setenv("LLAMA_STACK_CONFIG_DIR", filepath.Join(dir, ".llama"))
			body := stateConfigs[version] + "server:\n" + kubeAuth + "\n"
			s, err := start([]string{"llama", "stack", "run", config(t, body)})
			require.NoError(t, err)
			code := func(method, path, token, body string) int {
				rec := httptest.NewRecorder()
				req := httptest.NewRequest(method, path, strings.NewReader(body))
				if token != "" {
					req.Header.Set("Authorization", "Bearer "+token)
				}
				s.handler.ServeHTTP(rec, req)
				return rec.Code
			}
			want := http.StatusUnauthorized
			if openVersion {
				want = http.StatusOK
			}
			require.Equal(t, want, code("GET", "/v1/version", "", ""), "version without a token")
			require.Equal(t, http.StatusUnauthorized, code("GET", "/v1/providers", "", ""), "providers without a token")

			var list stackconfig.ListProvidersResponse
			get := func() {
				rec := httptest.NewRecorder()
				req := httptest.NewRequest("GET", "/v1/providers", nil)
				req.Header.Set("Authorization", "Bearer t")
				s.handler.ServeHTTP(rec, req)
				require.Equal(t, http.StatusOK, rec.Code)
				require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &list))
			}
			get()
			require.Len(t, list.Data, 1)
			p := list.Data[0]
			require.Equal(t, []string{"inference", "ollama", "remote::ollama"}, []string{p.API, p.ProviderID, p.ProviderType})
			require.Equal(t, stackconfig.HealthResponse{Status: "Not Implemented", Message: "Provider does not implement health check"}, p.Health)
			require.Equal(t, http.StatusOK, code("PUT", "/standin/v1/health/ollama", "", `{"status":"Error","message":"down"}`))
			get()
			require.Equal(t, stackconfig.HealthResponse{Status: "Error", Message: "down"}, list.Data[0].Health)
		})
	}
}

// TestUvicornForm: called as uvicorn with upstream's app factory, the
// stand-in reads the config from LLAMA_STACK_CONFIG, listens where the
// options say and tells its form and workers; the forms the image would
// not run are refused.
func TestUvicornForm(t *testing.T) {
	t.Setenv("LLAMA_STACK_STANDIN_VERSION", "0.3.0")
	dir := t.TempDir()
	cfg := config(t, fmt.Sprintf(v03, dir, 8321, ""))
	app := "llama_stack.core.server.server:create_app"
	require.ErrorContains(t, run([]string{"uvicorn", app, "--factory"}), "needs LLAMA_STACK_CONFIG")
	t.Setenv("LLAMA_STACK_CONFIG", cfg)
	require.ErrorContains(t, run([]string{"uvicorn", app, "--workers", "2"}), "pass --factory")
	require.ErrorContains(t, run([]string{"llama", "stack", "run", cfg, "--workers", "2"}), "has no option --workers")
	require.ErrorContains(t, run([]string{"python", "-m", "llama_stack.core.server.server", cfg}), "the server image runs")

	// Only `llama stack run` creates external_providers_dir.
	require.ErrorContains(t, run([]string{"uvicorn", app, "--factory"}), "External providers directory not found: "+dir+"/providers.d")
	require.NoError(t, os.Mkdir(dir+"/providers.d", 0o755))

	port := freePort(t)
	go func() {
		err := run([]string{"uvicorn", app, "--factory", "--host", "127.0.0.1", "--port", fmt.Sprint(port), "--workers", "3", "--lifespan", "on"})
		t.Log(err)
	}()
	var resp *http.Response
	require.Eventually(t, func() bool {
		var err error
		resp, err = http.Get(fmt.Sprintf("http://127.0.0.1:%d/standin/v1/process", port))
		return err == nil
	}, 10*time.Second, 20*time.Millisecond)
	defer resp.Body.Close()
	var got struct {
		Form    string `json:"form"`
		Workers int    `json:"workers"`
		Config  string `json:"config"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&got))
	require.Equal(t, "uvicorn", got.Form)
	require.Equal(t, 3, got.Workers)
	require.Equal(t, cfg, got.Config)
}
