package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/pin"
	"github.com/inferencestack/inferencestack/operator/runconfig/stackconfig"
)

// TestDroppedTables: the routing tables a move drops come from the lines'
// facts: 0.2's vector_dbs is gone at 0.3 (upstream renamed them
// vector_store, apis/resource.py ResourceType), datasets, scoring
// functions and benchmarks at 0.8 (OGX dropped datasetio, scoring and
// eval); nothing is dropped moving
// within a line, or onto a line the operator does not know.
func TestDroppedTables(t *testing.T) {
	tests := []struct {
		name     string
		from, to stackconfig.Line
		want     []string
	}{
		{name: "0.2 to 0.3", from: stackconfig.Line02, to: stackconfig.Line03, want: []string{"vector_dbs"}},
		{name: "0.3 to 0.7", from: stackconfig.Line03, to: stackconfig.Line07},
		{name: "0.7 to 0.8", from: stackconfig.Line07, to: stackconfig.Line08, want: []string{"benchmarks", "datasets", "scoring_functions"}},
		{name: "0.3 to 0.8", from: stackconfig.Line03, to: stackconfig.Line08, want: []string{"benchmarks", "datasets", "scoring_functions"}},
		{name: "same line", from: stackconfig.Line03, to: stackconfig.Line03},
		{name: "unknown target", from: stackconfig.Line03, to: "9.9"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, droppedTables(tc.from, tc.to)); diff != "" {
				t.Errorf("droppedTables(%s, %s) (-want +got):\n%s", tc.from, tc.to, diff)
			}
		})
	}
}

// TestRegisteredLosses: the resources of the dropped tables a run config
// registers, in either layout, named <registry type>/<identifier>, and the
// tables whose router the config serves (what clients registered there
// through the API is listed on the server).
func TestRegisteredLosses(t *testing.T) {
	tests := []struct {
		name      string
		config    string
		tables    []string
		routers   map[string]string
		want      []string
		served    []string
		assertion require.ErrorAssertionFunc
	}{{
		name: "0.3 layout",
		config: `registered_resources:
  models: [{model_id: m}]
  datasets: [{dataset_id: evals}, {dataset_id: more}]
  scoring_fns: [{scoring_fn_id: "basic::equality"}]
  benchmarks: [{benchmark_id: mmlu}]
`,
		tables:    []string{"benchmarks", "datasets", "scoring_functions"},
		want:      []string{"benchmark/mmlu", "dataset/evals", "dataset/more", "scoring_function/basic::equality"},
		assertion: require.NoError,
	}, {
		name:      "0.2 layout",
		config:    "vector_dbs:\n- vector_db_id: docs\nmodels: []\n",
		tables:    []string{"vector_dbs"},
		want:      []string{"vector_db/docs"},
		assertion: require.NoError,
	}, {
		name:      "nothing of the dropped tables",
		config:    "registered_resources:\n  datasets: []\n",
		tables:    []string{"datasets"},
		assertion: require.NoError,
	}, {
		name:      "a table whose resources are not enumerated",
		config:    "{}",
		tables:    []string{"interactions"},
		want:      []string{"interactions/*"},
		assertion: require.NoError,
	}, {
		name: "what clients registered through the API, where the config serves its router",
		config: `apis: [datasetio, inference]
registered_resources:
  datasets: [{dataset_id: evals}]
`,
		tables:    []string{"benchmarks", "datasets"},
		routers:   map[string]string{"datasets": "datasetio", "benchmarks": "eval"},
		want:      []string{"dataset/evals"},
		served:    []string{"datasets"},
		assertion: require.NoError,
	}, {
		name:      "every router served when apis is unset",
		config:    "{}",
		tables:    []string{"benchmarks"},
		routers:   map[string]string{"benchmarks": "eval"},
		served:    []string{"benchmarks"},
		assertion: require.NoError,
	}, {
		name:      "not YAML",
		config:    "registered_resources: [",
		tables:    []string{"datasets"},
		assertion: require.Error,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, served, err := registeredLosses([]byte(tc.config), tc.tables, tc.routers)
			tc.assertion(t, err)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("registeredLosses (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.served, served); diff != "" {
				t.Errorf("registeredLosses' served tables (-want +got):\n%s", diff)
			}
		})
	}
}

// TestOperandStateLine: the config step renders with the line the
// stack's state was written by: status.stateLine once recorded (whatever
// the server runs now), else the line the deployed server runs (a stack
// deployed before the field existed, or moving right now), else the
// operator's own (a new stack).
func TestOperandStateLine(t *testing.T) {
	p := pin.Pin{LlamaStackVersion: "0.7.1"}
	tests := []struct {
		name   string
		status v1alpha2.InferenceStackStatus
		want   stackconfig.Line
	}{
		{name: "new stack", want: stackconfig.Line07},
		{name: "recorded", want: stackconfig.Line02, status: v1alpha2.InferenceStackStatus{StateLine: "0.2",
			ResolvedDistribution: &v1alpha2.ResolvedDistribution{OperandVersion: "0.3.0"}}},
		{name: "deployed before the field", want: stackconfig.Line03, status: v1alpha2.InferenceStackStatus{
			ResolvedDistribution: &v1alpha2.ResolvedDistribution{OperandVersion: "0.3.0"}}},
		{name: "custom image", want: stackconfig.Line07, status: v1alpha2.InferenceStackStatus{
			ResolvedDistribution: &v1alpha2.ResolvedDistribution{OperandVersion: v1alpha2.UnknownVersion}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &state{Pin: p, Stack: &v1alpha2.InferenceStack{Status: tc.status}}
			if got := operand(s).StateLine; got != tc.want {
				t.Errorf("operand(s).StateLine = %q, want %q", got, tc.want)
			}
		})
	}
}
