package validate_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/inferencestack/inferencestack/internal/fbc"
	"github.com/inferencestack/inferencestack/internal/validate"
)

// repoRoot is the repository root, from this package's folder.
const repoRoot = "../.."

// committedBundles is the glob of the bundle directories committed under
// bundle/ (bundle/<package>/<version>).
var committedBundles = filepath.Join(repoRoot, "bundle", "*", "*")

// TestCommittedBundles: every bundle committed under bundle/ validates, and
// they include every bundle a package's channels/<package>.semver.yaml
// lists. A glob that finds nothing, or misses a listed bundle, fails rather
// than check nothing.
func TestCommittedBundles(t *testing.T) {
	dirs, err := filepath.Glob(committedBundles)
	require.NoError(t, err)
	require.NotEmpty(t, dirs, "%s matches no bundle directory, so no bundle would be checked", committedBundles)

	templates, err := filepath.Glob(filepath.Join(repoRoot, "channels", "*"+fbc.TemplateSuffix))
	require.NoError(t, err)
	require.NotEmpty(t, templates, "no channels/*%s template names the released bundles", fbc.TemplateSuffix)
	for _, path := range templates {
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		tmpl, err := fbc.ParseTemplate(data)
		require.NoError(t, err, path)
		refs := tmpl.Refs()
		require.NotEmpty(t, refs, "%s lists no bundle", path)
		for _, ref := range refs {
			require.Contains(t, dirs, filepath.Join(repoRoot, ref), "%s lists bundle %s, which %s does not find", path, ref, committedBundles)
		}
	}

	for _, dir := range dirs {
		t.Run(strings.TrimPrefix(filepath.ToSlash(dir), repoRoot+"/"), func(t *testing.T) {
			r, err := validate.Bundle{Dir: dir}.Run(context.Background())
			require.NoError(t, err)
			var b strings.Builder
			r.Print(&b)
			require.False(t, r.HasErrors(), b.String())
		})
	}
	t.Logf("validated %d bundles: %s", len(dirs), strings.Join(dirs, ", "))
}
