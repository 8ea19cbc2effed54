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
		want:     []string{"operator 1.0.0 (head of stable-v1) reads InferenceStack v1alpha1 (releases/1.0.0.yaml: api.reads), but CRD package 5.0.0 (head of stable-v5) serves only v1alpha2"},
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
