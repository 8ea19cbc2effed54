package stackconfig

import (
	"encoding/json"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/inferencestack/inferencestack/operator/runconfig/distributions"
)

// verdicts is testdata/upstream/<tag>/verdicts.json: what upstream's own
// start-up code said of each of its distributions' run.yaml at the tag
// (hack/llamastack/regenerate.sh).
type verdicts struct {
	Tag      string   `json:"tag"`
	Env      []string `json:"env"`
	Home     string   `json:"home"`
	Verdicts map[string]struct {
		Accepted bool     `json:"accepted"`
		Error    string   `json:"error"`
		Writes   []string `json:"writes"`
	} `json:"verdicts"`
}

// TestUpstreamVerdicts: over every run.yaml under llama_stack/distributions
// at each line's tag, the model gives upstream's own start-up verdict,
// including upstream's mistakes, with upstream's reason, and knows every
// folder upstream's server wrote to. A model that accepts everything
// fails (upstream refuses four files of each tag); so does one that refuses
// everything.
func TestUpstreamVerdicts(t *testing.T) {
	for _, line := range lines() {
		dir := filepath.Join("testdata", "upstream", line.Tag())
		data, err := os.ReadFile(filepath.Join(dir, "verdicts.json"))
		require.NoError(t, err)
		var v verdicts
		require.NoError(t, json.Unmarshal(data, &v))
		require.Equal(t, line.Tag(), v.Tag)
		files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
		require.NoError(t, err)
		require.Len(t, files, len(v.Verdicts), "a verdict for every upstream run.yaml")
		require.GreaterOrEqual(t, len(files), 7, "every distribution of %s", line.Tag())
		env := map[string]string{}
		for _, e := range v.Env {
			k, val, _ := strings.Cut(e, "=")
			env[k] = val
		}
		refused := 0
		for _, f := range files {
			verdict, ok := v.Verdicts[filepath.Base(f)]
			require.True(t, ok, "no verdict for %s", f)
			doc, err := os.ReadFile(f)
			require.NoError(t, err)
			t.Run(line.Tag()+"/"+filepath.Base(f), func(t *testing.T) {
				res, err := Check(line, doc, Options{Env: MapEnv(env), Home: v.Home})
				if verdict.Accepted {
					require.NoError(t, err)
					require.NotEmpty(t, res.Providers["inference"])
					for _, w := range verdict.Writes {
						require.Contains(t, res.WritableDirs, w, "upstream's server wrote to %s", w)
					}
					want := []string{"prompts", "registry"}
					if line != Line02 {
						want = []string{"conversations", "prompts", "registry"}
					}
					require.ElementsMatch(t, want, slices.Collect(maps.Keys(res.Stores)), "the server's own stores")
					for name, s := range res.Stores {
						if s.Path != "" {
							require.Contains(t, verdict.Writes, path.Dir(s.Path), "the %s store's folder: upstream's server wrote there", name)
						}
					}
					return
				}
				refused++
				require.Error(t, err, "upstream refuses it: %s", verdict.Error)
				require.Contains(t, err.Error(), upstreamReason(verdict.Error))
			})
		}
		if line == Line02 || line == Line03 {
			require.Equal(t, 4, refused, "upstream refuses dell (a variable unset), meta-reference-gpu, open-benchmark and postgres-demo (no files provider) at %s", line.Tag())
		} else {
			require.Equal(t, 3, refused, "upstream refuses oci (OCIConfig: a variable unset), open-benchmark and postgres-demo (no files provider) at %s", line.Tag())
		}
	}
}

// upstreamReason is the part of upstream's error the model must say: the
// first sentence, without the exception's class; for a variable that is not
// set, its name.
func upstreamReason(e string) string {
	class, msg, _ := strings.Cut(e, ": ")
	if class == "EnvVarError" {
		name := strings.Split(msg, "'")[1]
		return "environment variable " + name + " is not set"
	}
	// pydantic's "N validation error(s) for <Model>": the model names the
	// field as <Model>.<field>
	if _, model, ok := strings.Cut(msg, " for "); ok && class == "ValidationError" {
		return "(upstream: " + model + "."
	}
	if i := strings.Index(msg, ". "); i > 0 {
		msg = msg[:i]
	}
	return msg
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
		{"port below 1024", Line02, base02 + "providers: {}\nserver: {port: 80}\n", "server.port: minimum: got 80, want 1,024 (upstream: ServerConfig.port)"},
		{"unknown server key", Line03, base03 + "providers: {}\nserver: {port: 8321, tls: true}\n", `server.tls: unknown field: upstream's ServerConfig has no field tls`},
		{"access rule with both permit and forbid", Line03, base03 + "providers: {}\nserver:\n  auth:\n    provider_config: {type: kubernetes}\n    access_policy:\n    - {permit: {actions: [read]}, forbid: {actions: [read]}}\n",
			"needs exactly one of permit or forbid"},
		// the semantic rules upstream applies in code, each by its function
		{"parse_and_maybe_upgrade_config: version 3", Line03, strings.Replace(base03, "version: 2", "version: 3", 1) + "providers: {}\n", "version: 3 is not 2"},
		{"validate_table_name", Line03, "version: 2\nimage_name: t\nproviders: {}\nstorage:\n  backends:\n    kv_default: {type: kv_postgres, user: u, table_name: 'a-b'}\n",
			`storage.backends.kv_default.table_name: "a-b" is not a PostgreSQL identifier`},
		{"validate_api_server_url", Line03, base03 + "providers: {}\nserver:\n  auth:\n    provider_config: {type: kubernetes, api_server_url: 'ftp://k'}\n",
			`server.auth.provider_config.api_server_url: "ftp://k" must be an http or https URL with a host`},
		{"validate_claims_mapping", Line02, base02 + "providers: {}\nserver:\n  auth:\n    provider_config: {type: kubernetes, claims_mapping: {sub: ''}}\n",
			"server.auth.provider_config.claims_mapping.sub: cannot be empty"},
		{"tls files as a pair", Line02, base02 + "providers: {}\nserver: {tls_certfile: /c}\n", "server: tls_certfile and tls_keyfile go together"},
		{"validate_server_stores: unknown backend", Line03, base03 + "  stores:\n    metadata: {namespace: r, backend: nope}\nproviders: {}\n",
			`storage.stores.metadata.backend: "nope" is not one of storage.backends`},
		{"agents persistence on the wrong kind", Line03, base03 + "providers:\n  agents:\n  - {provider_id: a, provider_type: inline::meta-reference, config: {persistence: {agent_state: {namespace: a, backend: sql_default}, responses: {table_name: r, backend: sql_default}}}}\n",
			`providers.agents[0].config.persistence.agent_state.backend: "sql_default" is of type sql_sqlite, but a backend of type kv_* is required`},
		// what the hand mirrors checked before, now upstream's schema
		{"a model without model_id", Line03, base03 + "providers: {}\nregistered_resources:\n  models:\n  - {provider_id: x}\n", "registered_resources.models[0]"},
		{"a key an inline store does not have", Line02, base02 + "providers: {}\nmetadata_store: {type: sqlite, db_path: /d/r.db, bogus: 1}\n", "metadata_store"},
		{"an sqlite store without db_path", Line02, base02 + "providers: {}\nmetadata_store: {type: sqlite}\n", "metadata_store.db_path: required: the operator keeps the server's files"},
		{"unset variable", Line03, base03 + "providers: {}\nserver: {port: '${env.PORT}'}\n", "environment variable PORT is not set"},
		// Found by running upstream's start-up over the configs of fuzzed specs:
		// MetaReferenceInferenceConfig's validator admits only upstream's models.
		{"meta-reference model upstream does not know", Line02, base02 + "providers:\n  inference:\n  - {provider_id: m, provider_type: inline::meta-reference, config: {model: main}}\n",
			"providers.inference[0].config.model: Unknown model: `main`"},
		// and validate_vector_stores_config finds no embedding model on a
		// provider of another type that took the base's provider id.
		{"default embedding model nobody serves", Line03, base03 + "providers:\n  inference:\n  - {provider_id: sentence-transformers, provider_type: remote::fireworks, config: {url: 'http://f'}}\n" +
			"vector_stores:\n  default_embedding_model: {provider_id: sentence-transformers, model_id: nomic-ai/nomic-embed-text-v1.5}\n",
			"Embedding model 'sentence-transformers/nomic-ai/nomic-embed-text-v1.5' not found. Available embedding models"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Check(tc.line, []byte(tc.doc), Options{})
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// TestAdmitsWhatUpstreamAdmits: the counterparts of the refusals above
// that upstream accepts raise no problem at those fields.
func TestAdmitsWhatUpstreamAdmits(t *testing.T) {
	base03 := "version: 2\nimage_name: t\nstorage:\n  backends:\n    kv_default: {type: kv_sqlite, db_path: /d/kv.db}\n    sql_default: {type: sql_sqlite, db_path: /d/sql.db}\n"
	tests := []struct {
		name, doc, field string
		line             Line
	}{
		{"a meta-reference model by its Hugging Face repo", "version: 2\nimage_name: t\nproviders:\n  inference:\n  - {provider_id: m, provider_type: inline::meta-reference, config: {model: meta-llama/Llama-3.2-3B-Instruct}}\n",
			"config.model", Line02},
		{"a meta-reference model by its descriptor", "version: 2\nimage_name: t\nproviders:\n  inference:\n  - {provider_id: m, provider_type: inline::meta-reference, config: {model: Llama3.2-3B-Instruct}}\n",
			"config.model", Line02},
		{"the embedding model sentence-transformers lists", base03 + "providers:\n  inference:\n  - {provider_id: st, provider_type: inline::sentence-transformers, config: {}}\n" +
			"vector_stores:\n  default_embedding_model: {provider_id: st, model_id: nomic-ai/nomic-embed-text-v1.5}\n", "vector_stores", Line03},
		{"a registered embedding model", base03 + "providers:\n  inference:\n  - {provider_id: f, provider_type: remote::fireworks, config: {url: 'http://f'}}\n" +
			"registered_resources:\n  models:\n  - {model_id: e, provider_id: f, provider_model_id: nomic-ai/nomic-embed-text-v1.5, model_type: embedding, metadata: {embedding_dimension: 768}}\n" +
			"vector_stores:\n  default_embedding_model: {provider_id: f, model_id: nomic-ai/nomic-embed-text-v1.5}\n", "vector_stores", Line03},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Check(tc.line, []byte(tc.doc), Options{})
			if err != nil {
				require.NotContains(t, err.Error(), tc.field)
			}
		})
	}
}

// TestServerStores: the server's own stores are where the config places
// them, or where upstream's defaults do (0.2: under
// $LLAMA_STACK_CONFIG_DIR, else ~/.llama), the environment expanded.
func TestServerStores(t *testing.T) {
	const v03 = "version: 2\nimage_name: t\nproviders: {}\nstorage:\n  backends:\n" +
		"    kv_default: {type: kv_sqlite, db_path: '${env.STATE:=/s}/kv.db'}\n    sql_default: {type: sql_postgres, user: u}\n" +
		"  stores:\n    metadata: {namespace: registry, backend: kv_default}\n" +
		"    conversations: {table_name: convs, backend: sql_default}\n    inference: {table_name: i, backend: sql_default}\n"
	tests := []struct {
		name string
		line Line
		doc  string
		env  map[string]string
		want map[string]Store
	}{
		{"0.2 without metadata_store: both under ~/.llama", Line02, "version: 2\nimage_name: t\nproviders: {}\n", nil, map[string]Store{
			"registry": {Kind: "kv", Type: "sqlite", Path: "/home/u/.llama/distributions/t/kvstore.db"},
			"prompts":  {Kind: "kv", Type: "sqlite", Path: "/home/u/.llama/distributions/t/prompts.db"},
		}},
		{"0.2 with LLAMA_STACK_CONFIG_DIR and a metadata_store", Line02,
			"version: 2\nimage_name: t\nproviders: {}\nmetadata_store: {type: sqlite, db_path: '${env.STATE:=/s}/registry.db'}\n",
			map[string]string{"LLAMA_STACK_CONFIG_DIR": "/data/.llama", "STATE": "/data"}, map[string]Store{
				"registry": {Kind: "kv", Type: "sqlite", Path: "/data/registry.db"},
				"prompts":  {Kind: "kv", Type: "sqlite", Path: "/data/.llama/distributions/t/prompts.db"},
			}},
		{"0.2 registry in PostgreSQL", Line02, "version: 2\nimage_name: t\nproviders: {}\nmetadata_store: {type: postgres, user: u}\n", nil, map[string]Store{
			"registry": {Kind: "kv", Type: "postgres"},
			"prompts":  {Kind: "kv", Type: "sqlite", Path: "/home/u/.llama/distributions/t/prompts.db"},
		}},
		{"0.3: the metadata backend holds the registry and the prompts", Line03, v03, map[string]string{"STATE": "/data"}, map[string]Store{
			"registry":      {Kind: "kv", Type: "kv_sqlite", Path: "/data/kv.db", Namespace: "registry"},
			"prompts":       {Kind: "kv", Type: "kv_sqlite", Path: "/data/kv.db", Namespace: "prompts"},
			"conversations": {Kind: "sql", Type: "sql_postgres", Table: "openai_conversations"},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Check(tc.line, []byte(tc.doc), Options{Env: MapEnv(tc.env), Home: "/home/u"})
			require.NoError(t, err)
			require.Equal(t, tc.want, res.Stores)
		})
	}
}

// TestEmptyUnknownTopLevelKey: a top-level key the line's model lacks is
// refused when it carries a setting (upstream would drop it) and accepted
// when it carries none (models: [] on 0.8: upstream drops nothing that
// had an effect).
func TestEmptyUnknownTopLevelKey(t *testing.T) {
	doc, err := distributions.FS.ReadFile(Line08.Tag() + "/starter.yaml")
	require.NoError(t, err)
	opts := Options{Env: MapEnv(map[string]string{"INFERENCE_MODEL": "m"}), Home: "/tmp"}
	_, err = Check(Line08, append(slices.Clone(doc), "models: []\n"...), opts)
	require.NoError(t, err)
	_, err = Check(Line08, append(slices.Clone(doc), "models:\n- {model_id: m, provider_id: openai}\n"...), opts)
	require.ErrorContains(t, err, "models: unknown field: this is the other line's layout; Llama Stack 0.8 has registered_resources.models instead")
}

// TestDefaultShieldRule: safety.default_shield_id is checked as
// validate_safety_config does at start (core/stack.py at v0.7.1 and
// v0.8.0): the shields and safety APIs served, and the shield among those
// registered at start unless none is.
func TestDefaultShieldRule(t *testing.T) {
	for _, line := range []Line{Line07, Line08} {
		doc, err := distributions.FS.ReadFile(line.Tag() + "/starter.yaml")
		require.NoError(t, err)
		env := func(kv ...string) Options {
			m := map[string]string{"INFERENCE_MODEL": "m"}
			for i := 0; i < len(kv); i += 2 {
				m[kv[i]] = kv[i+1]
			}
			return Options{Env: MapEnv(m), Home: "/tmp"}
		}
		// upstream's starter: no shield registered without SAFETY_MODEL, so
		// the default is not checked; with it, llama-guard is registered
		_, err = Check(line, doc, env())
		require.NoError(t, err, line)
		_, err = Check(line, doc, env("SAFETY_MODEL", "llama-guard-3"))
		require.NoError(t, err, line)
		// only code-scanner registered: the default names no registered shield
		_, err = Check(line, doc, env("CODE_SCANNER_MODEL", "cs"))
		require.ErrorContains(t, err, "Configured default_shield_id 'llama-guard' not found among registered shields. Available shields: [code-scanner]", line)
		// the safety API off: the safety router is not served
		noSafety := strings.Replace(string(doc), "\n- safety\n", "\n", 1)
		require.NotEqual(t, string(doc), noSafety)
		_, err = Check(line, []byte(noSafety), env())
		require.ErrorContains(t, err, "Safety configuration requires the", line)
	}
}
