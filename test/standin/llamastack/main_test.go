package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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
			require.ErrorContains(t, run([]string{"stack", "run", config(t, tc.body)}), tc.want)
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
			go func() { _ = run([]string{"stack", "run", config(t, body)}) }()
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
