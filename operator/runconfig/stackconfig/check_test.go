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
