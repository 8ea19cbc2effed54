package runconfig

import (
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/runconfig/stackconfig"
)

// TestStateNames: a stack that moves to a newer line with its state gets
// a config naming the state as the line that wrote it did, explicitly,
// so the new line's defaults never point it at empty state. The names are
// the ones upstream's code used at the old tag, checked by hand against
// upstream: v0.3.0 hard-codes the tables chat_completions
// (providers/utils/inference/inference_store.py) and openai_responses
// (providers/utils/responses/responses_store.py); v0.7.1 honours
// table_name, which its starter config.yaml sets to inference_store and
// responses; OGX v0.8.0 keeps its config folder in OGX_CONFIG_DIR (default
// ~/.ogx, core/utils/config_dirs.py). The facts must say the same.
func TestStateNames(t *testing.T) {
	spec := v1alpha2.InferenceStackSpec{Distribution: v1alpha2.DistributionSpec{Name: v1alpha2.DistributionStarter}}
	tests := []struct {
		name                    string
		operand                 Operand
		inference, responses    string
		configDirEnv, configDir string
	}{
		{name: "0.3 state on 0.7.1", operand: Operand{LlamaStackVersion: "0.7.1", StateLine: stackconfig.Line03},
			inference: "chat_completions", responses: "openai_responses",
			configDirEnv: "LLAMA_STACK_CONFIG_DIR", configDir: DataDir + "/.llama"},
		{name: "0.7 state on 0.8.0", operand: Operand{LlamaStackVersion: "0.8.0", StateLine: stackconfig.Line07},
			inference: "inference_store", responses: "responses",
			configDirEnv: "OGX_CONFIG_DIR", configDir: DataDir + "/.llama"},
		{name: "new stack on 0.7.1", operand: Operand{LlamaStackVersion: "0.7.1"},
			inference: "inference_store", responses: "responses",
			configDirEnv: "LLAMA_STACK_CONFIG_DIR", configDir: DataDir + "/.llama"},
		{name: "new stack on 0.8.0", operand: Operand{LlamaStackVersion: "0.8.0"},
			inference: "inference_store", responses: "responses",
			configDirEnv: "OGX_CONFIG_DIR", configDir: DataDir + "/.ogx"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			state, err := tc.operand.stateLine()
			require.NoError(t, err)
			require.Equal(t, tc.inference, stateTable(state, "inference", "starter"), "the facts of %s", state)
			require.Equal(t, tc.responses, stateTable(state, "responses", "starter"), "the facts of %s", state)

			res, err := Generate("s", spec, tc.operand)
			require.NoError(t, err)
			var doc map[string]any
			require.NoError(t, yaml.Unmarshal(res.YAML, &doc))
			require.Equal(t, tc.inference, dig(doc, "storage", "stores", "inference", "table_name"), "storage.stores.inference.table_name")
			responses, _ := dig(doc, "providers", "responses").([]any)
			require.NotEmpty(t, responses)
			for _, p := range responses {
				require.Equal(t, tc.responses, dig(p, "config", "persistence", "responses", "table_name"),
					"providers.responses[].config.persistence.responses.table_name")
			}
			env := ContainerEnv(spec, res.OperatorEnv())
			require.Equal(t, tc.configDir, env[tc.configDirEnv])
		})
	}
}

// TestStateNamesRefusedWhereUnreadable: a line that fixes a table in code
// cannot read state another line kept under another name (0.7's
// inference_store on 0.3.0, which reads chat_completions): the config is
// refused rather than started on an empty table; a state line the
// operator does not know too.
func TestStateNamesRefusedWhereUnreadable(t *testing.T) {
	spec := v1alpha2.InferenceStackSpec{Distribution: v1alpha2.DistributionSpec{Name: v1alpha2.DistributionStarter}}
	_, err := Generate("s", spec, Operand{LlamaStackVersion: "0.3.0", StateLine: stackconfig.Line07})
	require.ErrorContains(t, err, "keeps its inference store in table inference_store; Llama Stack 0.3.0 reads only table chat_completions")
	_, err = Generate("s", spec, Operand{LlamaStackVersion: "0.3.0", StateLine: stackconfig.Line02})
	require.NoError(t, err, "0.2.23 and 0.3.0 fix the same tables")
	_, err = Generate("s", spec, Operand{LlamaStackVersion: "0.8.0", StateLine: "0.5"})
	require.ErrorContains(t, err, `line "0.5", which this operator does not know`)
}

// TestCacheDatabaseIsExplicit: the operator-managed PostgreSQL's database
// reaches the server by name at every line (POSTGRES_DB, which the config's
// sql_postgres backend reads), never through the line's default (llamastack
// up to 0.7.1, ogx at 0.8.0).
func TestCacheDatabaseIsExplicit(t *testing.T) {
	spec := v1alpha2.InferenceStackSpec{Distribution: v1alpha2.DistributionSpec{Name: v1alpha2.DistributionStarter},
		Cache: &v1alpha2.CacheSpec{Enabled: true}}
	for _, l := range lines {
		t.Run(l.line.Tag(), func(t *testing.T) {
			res, err := Generate("s", spec, l.operand)
			require.NoError(t, err)
			require.Equal(t, CacheDatabase, ContainerEnv(spec, res.OperatorEnv())[EnvPostgresDB])
			require.Contains(t, string(res.YAML), "db: ${env."+EnvPostgresDB+"}")
		})
	}
}

// dig is the value at keys of nested YAML mappings (nil when absent).
func dig(v any, keys ...string) any {
	for _, k := range keys {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	return v
}

// TestBasesRelocatedAtEveryLine: every embedded base keeps its state on
// the state volume, at the same paths at every line, whatever the line's
// config folder (~/.llama; ~/.ogx at 0.8.0, which relocating only
// ~/.llama left on the emptyDir of $HOME).
func TestBasesRelocatedAtEveryLine(t *testing.T) {
	for _, line := range stackconfig.Lines() {
		for _, d := range LineDistributions(line) {
			cfg, err := loadBase(line, d)
			require.NoError(t, err)
			lay, err := layoutOf(line)
			require.NoError(t, err)
			out, err := marshal(cfg, lay)
			require.NoError(t, err)
			require.NotContains(t, string(out), "~/", "%s at %s", d, line.Tag())
		}
	}
}
