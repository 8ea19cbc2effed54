package release

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func rel(version, reads, storage string, served ...string) Input {
	return Input{Version: version, Path: "releases/" + version + ".yaml", API: APIVersions{Reads: reads, Served: served, Storage: storage}}
}

// TestMatrixCheck: the catalogs a cluster admin could be handed, and which
// of them break a supported operator or strand stored objects.
func TestMatrixCheck(t *testing.T) {
	v1 := rel("1.0.0", "v1alpha1", "v1alpha1", "v1alpha1")
	v2 := rel("2.0.0", "v1alpha1", "v1alpha1", "v1alpha1")
	both := rel("3.0.0", "v1alpha2", "v1alpha1", "v1alpha1", "v1alpha2")
	stores2 := rel("4.0.0", "v1alpha2", "v1alpha2", "v1alpha1", "v1alpha2")
	only2 := rel("5.0.0", "v1alpha2", "v1alpha2", "v1alpha2")
	// The repository's releases (channels/releases).
	v21 := rel("2.1.0", "v1alpha1", "v1alpha1", "v1alpha1", "v1alpha2")
	v3op := rel("3.0.0", "v1alpha2", "v1alpha2", "v1alpha1", "v1alpha2")
	v4op := rel("4.0.0", "v1alpha2", "v1alpha2", "v1alpha1", "v1alpha2")
	repo := []Input{v1, v2, v21, v3op, v4op}
	tests := []struct {
		name     string
		releases []Input
		op, crd  map[string][]string
		edges    [][2]string
		want     []string // error fragments; none: valid
	}{{
		name:     "today: two majors, one version",
		releases: []Input{v1, v2},
		op:       map[string][]string{"1.0.0": {"stable-v1"}, "2.0.0": {"stable-v2"}},
		crd:      map[string][]string{"1.0.0": {"stable-v1"}, "2.0.0": {"stable-v2"}},
		edges:    [][2]string{{"1.0.0", "2.0.0"}},
	}, {
		name:     "a CRD package serving both, then storing the new one",
		releases: []Input{v1, both, stores2},
		op:       map[string][]string{"1.0.0": {"stable-v1"}, "3.0.0": {"stable-v3"}},
		crd:      map[string][]string{"4.0.0": {"stable-v4"}},
		edges:    [][2]string{{"1.0.0", "3.0.0"}, {"3.0.0", "4.0.0"}},
	}, {
		name:     "the newest CRD package drops the version a supported operator reads",
		releases: []Input{v1, stores2, only2},
		op:       map[string][]string{"1.0.0": {"stable-v1"}, "4.0.0": {"stable-v4"}},
		crd:      map[string][]string{"5.0.0": {"stable-v5"}},
		edges:    [][2]string{{"4.0.0", "5.0.0"}},
		want: []string{"operator 1.0.0 (head of stable-v1) reads InferenceStack v1alpha1 (releases/1.0.0.yaml: api.reads), but CRD package 5.0.0 (head of stable-v5) serves only v1alpha2 (releases/5.0.0.yaml: api.served), " +
			"and no upgrade edge of the CRD package leads from 5.0.0 to a release that serves v1alpha1 and v1alpha2"},
	}, {
		// The repository's releases: operators 3.0.0 and 4.0.0 read
		// v1alpha2, CRD packages 1.0.0 and 2.0.0 do not serve it ("no"
		// cells) but upgrade to 2.1.0, 3.0.0 and 4.0.0, which do.
		name:     "v1alpha2 operators beside CRD heads that do not serve it but upgrade to one that does",
		releases: repo,
		op:       map[string][]string{"1.0.0": {"stable-v1"}, "2.1.0": {"stable-v2"}, "3.0.0": {"stable-v3"}, "4.0.0": {"stable-v4"}},
		crd:      map[string][]string{"1.0.0": {"stable-v1"}, "2.1.0": {"stable-v2"}, "3.0.0": {"stable-v3"}, "4.0.0": {"stable-v4"}},
		edges:    [][2]string{{"1.0.0", "2.0.0"}, {"2.0.0", "2.1.0"}, {"2.1.0", "3.0.0"}, {"3.0.0", "4.0.0"}},
	}, {
		name:     "a v1alpha2 operator whose CRD channel head has no way to a release serving v1alpha2",
		releases: repo,
		op:       map[string][]string{"1.0.0": {"stable-v1"}, "3.0.0": {"candidate-v3", "stable-v3"}},
		crd:      map[string][]string{"1.0.0": {"candidate-v1", "stable-v1"}, "3.0.0": {"stable-v3"}},
		edges:    [][2]string{{"2.1.0", "3.0.0"}}, // no bridge from 1.x
		want: []string{"operator 3.0.0 (head of candidate-v3, stable-v3) reads InferenceStack v1alpha2 (releases/3.0.0.yaml: api.reads), " +
			"but CRD package 1.0.0 (head of candidate-v1, stable-v1) serves only v1alpha1 (releases/1.0.0.yaml: api.served), " +
			"and no upgrade edge of the CRD package leads from 1.0.0 to a release that serves v1alpha1 and v1alpha2: a cluster installed from that CRD channel strands the operator. " +
			"Way out: add a bridge from 1.0.0 to a CRD package release that serves v1alpha1 and v1alpha2 (bridges in channels/inferencestack-crds.release.yaml"},
	}, {
		name:     "a v1alpha2 operator and no CRD package release serving v1alpha2",
		releases: []Input{v1, v2, v3op},
		op:       map[string][]string{"3.0.0": {"stable-v3"}},
		crd:      map[string][]string{"2.0.0": {"stable-v2"}},
		edges:    [][2]string{{"1.0.0", "2.0.0"}},
		want:     []string{"operator 3.0.0 (head of stable-v3) reads InferenceStack v1alpha2 (releases/3.0.0.yaml: api.reads), but CRD package 2.0.0 (head of stable-v2) serves only v1alpha1"},
	}, {
		name:     "an upgrade that leads to v1alpha2 but no longer serves what the other head operator reads",
		releases: []Input{v1, v3op, only2},
		op:       map[string][]string{"1.0.0": {"stable-v1"}, "3.0.0": {"stable-v3"}},
		crd:      map[string][]string{"1.0.0": {"stable-v1"}, "5.0.0": {"stable-v5"}},
		edges:    [][2]string{{"1.0.0", "5.0.0"}},
		want: []string{"operator 3.0.0 (head of stable-v3) reads InferenceStack v1alpha2 (releases/3.0.0.yaml: api.reads), but CRD package 1.0.0 (head of stable-v1) serves only v1alpha1",
			"operator 1.0.0 (head of stable-v1) reads InferenceStack v1alpha1 (releases/1.0.0.yaml: api.reads), but CRD package 5.0.0 (head of stable-v5) serves only v1alpha2"},
	}, {
		name:     "an upgrade edge to a CRD package that no longer serves the stored version",
		releases: []Input{v1, only2},
		op:       map[string][]string{"5.0.0": {"stable-v5"}},
		crd:      map[string][]string{"5.0.0": {"stable-v5"}},
		edges:    [][2]string{{"1.0.0", "5.0.0"}},
		want:     []string{"CRD package upgrade 1.0.0 -> 5.0.0: 1.0.0 stores InferenceStack v1alpha1, which 5.0.0 does not serve"},
	}, {
		name:     "a head without a release input",
		releases: []Input{v1},
		op:       map[string][]string{"9.0.0": {"stable-v9"}},
		crd:      map[string][]string{"1.0.0": {"stable-v1"}},
		want:     []string{"operator 9.0.0 heads channels stable-v9 but has no release input"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Matrix{Releases: tt.releases, OperatorHeads: tt.op, CRDHeads: tt.crd, CRDEdges: tt.edges}.Check()
			if len(tt.want) == 0 {
				require.NoError(t, err)
				return
			}
			for _, w := range tt.want {
				require.ErrorContains(t, err, w)
			}
		})
	}
}

// TestMatrixMarkdown: a row per operator, a column per CRD package, the
// stored version in bold, heads named.
func TestMatrixMarkdown(t *testing.T) {
	m := Matrix{
		Releases:      []Input{rel("1.0.0", "v1alpha1", "v1alpha1", "v1alpha1"), rel("2.0.0", "v1alpha2", "v1alpha2", "v1alpha1", "v1alpha2")},
		OperatorHeads: map[string][]string{"2.0.0": {"stable"}},
		CRDHeads:      map[string][]string{"2.0.0": {"stable"}},
	}
	got := string(m.Markdown())
	require.Contains(t, got, "| operator \\ CRD package | 1.0.0: **v1alpha1** | 2.0.0: v1alpha1, **v1alpha2** (head of stable) |\n")
	require.Contains(t, got, "| 1.0.0 reads v1alpha1 | yes | yes |\n")
	require.Contains(t, got, "| 2.0.0 reads v1alpha2 (head of stable) | no | yes |\n")
}

// TestMatrixOperands: a row per operator release with its Llama Stack
// release, linked to the line's page, its operand images and the stacks it
// takes.
func TestMatrixOperands(t *testing.T) {
	v1 := rel("1.0.0", "v1alpha1", "v1alpha1", "v1alpha1")
	v1.LlamaStackVersion = "0.3.0"
	v1.Operands = map[string]string{"starter": "docker.io/llamastack/distribution-starter:0.3.0", "postgres-demo": "docker.io/llamastack/distribution-postgres-demo:0.3.0"}
	v4 := rel("4.0.0", "v1alpha2", "v1alpha2", "v1alpha1", "v1alpha2")
	v4.LlamaStackVersion = "0.8.0"
	v4.Operands = map[string]string{"starter": "docker.io/ogx/distribution-starter:0.8.0"}
	v4.TakesUnlabeledStacks = new(bool)
	got := string(Matrix{Releases: []Input{v1, v4}}.Markdown())
	require.Contains(t, got, "| 1.0.0 | [0.3.0](lines/0.3.0.md) | postgres-demo: `docker.io/llamastack/distribution-postgres-demo:0.3.0`<br>starter: `docker.io/llamastack/distribution-starter:0.3.0` | labelled \"1\" and unlabelled |\n")
	require.Contains(t, got, "| 4.0.0 | [0.8.0](lines/0.8.0.md) | starter: `docker.io/ogx/distribution-starter:0.8.0` | labelled \"4\" |\n")
}
