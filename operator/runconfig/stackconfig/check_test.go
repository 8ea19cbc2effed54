package stackconfig

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// upstreamEnv is what upstream's own run.yaml files need set to start:
// meta-reference-gpu and postgres-demo register ${env.INFERENCE_MODEL}.
var upstreamEnv = MapEnv(map[string]string{"INFERENCE_MODEL": "meta-llama/Llama-3.2-3B-Instruct"})

// TestUpstreamRunConfigs: the model of each line accepts upstream's own
// run.yaml of every distribution at that line's tag, and refuses the other
// line's.
func TestUpstreamRunConfigs(t *testing.T) {
	for _, line := range []Line{Line02, Line03} {
		files, err := filepath.Glob(filepath.Join("..", "distributions", line.Tag(), "*.yaml"))
		require.NoError(t, err)
		require.Len(t, files, 3, "starter, meta-reference-gpu, postgres-demo at %s", line.Tag())
		for _, f := range files {
			data, err := os.ReadFile(f)
			require.NoError(t, err)
			t.Run(line.Tag()+"/"+filepath.Base(f), func(t *testing.T) {
				res, err := Check(line, data, Options{Env: upstreamEnv, Home: "/root"})
				require.NoError(t, err)
				require.NotEmpty(t, res.Providers["inference"])
				other := Line03
				if line == Line03 {
					other = Line02
				}
				_, err = Check(other, data, Options{Env: upstreamEnv, Home: "/root"})
				require.Error(t, err, "the %s model must refuse a %s file", other, line)
			})
		}
	}
}

// TestRefuses: what the server of each line would refuse at start, the
// model refuses too, naming the field.
func TestRefuses(t *testing.T) {
	base03 := "version: 2\nimage_name: t\nstorage:\n  backends:\n    kv_default: {type: kv_sqlite, db_path: /d/kv.db}\n    sql_default: {type: sql_sqlite, db_path: /d/sql.db}\n"
	base02 := "version: 2\nimage_name: t\n"
	tests := []struct {
		name string
		line Line
		doc  string
		want string
	}{
		{"chromadb without persistence", Line03, base03 + "providers:\n  vector_io:\n  - {provider_id: c, provider_type: remote::chromadb, config: {url: http://c}}\n",
			"providers.vector_io[0].config.persistence: required by remote::chromadb"},
		{"reference to a missing backend", Line03, base03 + "providers:\n  vector_io:\n  - {provider_id: f, provider_type: inline::faiss, config: {persistence: {namespace: f, backend: nope}}}\n",
			`providers.vector_io[0].config.persistence.backend: "nope" is not one of storage.backends`},
		{"sql store on a kv backend", Line03, base03 + "  stores:\n    inference: {table_name: i, backend: kv_default}\nproviders: {}\n",
			`storage.stores.inference.backend: "kv_default" is of type kv_sqlite, but a backend of type sql_* is required`},
		{"inline store on 0.3", Line03, base03 + "providers:\n  vector_io:\n  - {provider_id: f, provider_type: inline::faiss, config: {persistence: {type: sqlite, db_path: /d/f.db}}}\n",
			"is an inline store (type sqlite), the 0.2 layout"},
		{"reference on 0.2", Line02, base02 + "providers:\n  vector_io:\n  - {provider_id: f, provider_type: inline::faiss, config: {kvstore: {namespace: f, backend: kv_default}}}\n",
			"refers to a storage backend by name, the 0.3 layout"},
		{"port below 1024", Line02, base02 + "providers: {}\nserver: {port: 80}\n", "server.port: 80 is outside 1024-65535"},
		{"unknown server key", Line03, base03 + "providers: {}\nserver: {port: 8321, tls: true}\n", `unknown field "tls"`},
		{"access rule with both permit and forbid", Line03, base03 + "providers: {}\nserver:\n  auth:\n    provider_config: {type: kubernetes}\n    access_policy:\n    - {permit: {actions: [read]}, forbid: {actions: [read]}}\n",
			"needs exactly one of permit or forbid"},
		{"unset variable", Line03, base03 + "providers: {}\nserver: {port: '${env.PORT}'}\n", "environment variable PORT is not set"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Check(tc.line, []byte(tc.doc), Options{})
			require.ErrorContains(t, err, tc.want)
		})
	}
}
