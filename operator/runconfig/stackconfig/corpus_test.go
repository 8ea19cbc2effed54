package stackconfig

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// corpus is testdata/corpus/<tag>.json: run configs (the operator's,
// from the golden and random specs; their wrong-type and unknown-key
// copies; those the operator generated before issue 32) with upstream's
// own start-up verdict at the tag (hack/llamastack/corpus.sh).
type corpus struct {
	Tag     string `json:"tag"`
	Home    string `json:"home"`
	Configs []struct {
		Name     string            `json:"name"`
		Config   string            `json:"config"`
		Env      map[string]string `json:"env"`
		Accepted bool              `json:"accepted"`
		Error    string            `json:"error"`
		Dropped  []string          `json:"dropped"`
	} `json:"configs"`
}

// TestCorpusVerdicts holds the model to upstream's verdicts, not to its
// own: a config upstream accepts with every key taking effect is
// accepted; one upstream refuses is refused; one upstream accepts while
// silently dropping keys the user wrote is refused (the strictness rule,
// strict). A model that accepts everything fails (upstream refuses
// configs of the corpus, and drops keys in others); so does one that
// refuses everything.
func TestCorpusVerdicts(t *testing.T) {
	for _, line := range lines() {
		data, err := os.ReadFile(filepath.Join("testdata", "corpus", line.Tag()+".json"))
		require.NoError(t, err)
		var c corpus
		require.NoError(t, json.Unmarshal(data, &c))
		require.Equal(t, line.Tag(), c.Tag)
		var accepted, refused, dropping, mismatches int
		var report []string
		for _, cfg := range c.Configs {
			want := cfg.Accepted && len(cfg.Dropped) == 0
			switch {
			case !cfg.Accepted:
				refused++
			case len(cfg.Dropped) > 0:
				dropping++
			default:
				accepted++
			}
			_, err := Check(line, []byte(cfg.Config), Options{Env: MapEnv(cfg.Env), Home: c.Home})
			if got := err == nil; got != want {
				mismatches++
				report = append(report, fmt.Sprintf("%s: upstream accepted=%v dropped=%v error=%q; the model: %v",
					cfg.Name, cfg.Accepted, cfg.Dropped, cfg.Error, err))
			}
		}
		t.Logf("%s: %d configs: upstream accepts %d with every key in effect, accepts %d dropping keys, refuses %d; the model disagrees on %d",
			line.Tag(), len(c.Configs), accepted, dropping, refused, mismatches)
		require.Positive(t, accepted, line)
		require.Positive(t, dropping+refused, line)
		require.Empty(t, report, "the model disagrees with upstream at %s:\n%s", line.Tag(), strings.Join(report, "\n"))
	}
}
