package sign_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/require"

	"github.com/inferencestack/inferencestack/internal/image"
	"github.com/inferencestack/inferencestack/test/registry"
	"github.com/inferencestack/inferencestack/tools/bundlegen/root"
)

// keyFiles writes a new ECDSA P-256 key pair (PKCS#8 and PKIX PEM) and
// returns the private key's path, its PEM and the public key's path.
func keyFiles(t *testing.T) (keyFile, keyPEM, pubFile string) {
	t.Helper()
	priv, pub, err := image.GenerateKeyPair()
	require.NoError(t, err)
	dir := t.TempDir()
	keyPEM = string(priv)
	keyFile, pubFile = filepath.Join(dir, "release.key"), filepath.Join(dir, "cosign.pub")
	require.NoError(t, os.WriteFile(keyFile, priv, 0o600))
	require.NoError(t, os.WriteFile(pubFile, pub, 0o600))
	return keyFile, keyPEM, pubFile
}

func run(args ...string) (string, error) {
	cmd := root.NewCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

func TestSignAndVerifyCmd(t *testing.T) {
	host := registry.Registry(t)
	keyFile, keyPEM, pubFile := keyFiles(t)
	_, _, otherPub := keyFiles(t)
	// A committed bundle of the repository: its commit and time come from git.
	dir := filepath.Join("..", "..", "..", "bundle", "inferencestack-crds", "1.0.0")
	ref := host + "/acme/inferencestack-crds-bundle:v1.0.0"
	_, err := image.Build{Kind: image.KindBundle, Dir: dir, Push: ref}.Run(context.Background())
	require.NoError(t, err)
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	require.NoError(t, err)
	commit := strings.TrimSpace(string(head))

	out, err := run("sign", "bundle", dir, ref, "--key", keyFile)
	require.NoError(t, err, out)
	require.Contains(t, out, "signed: "+host+"/acme/inferencestack-crds-bundle@sha256:")
	require.Contains(t, out, "sbom: ")
	require.Contains(t, out, "provenance: ")
	require.Equal(t, 3, strings.Count(out, "signature: "), out)
	require.Contains(t, out, "attestations: "+host+"/acme/inferencestack-crds-bundle:sha256-")

	out, err = run("verify", ref, "--key", pubFile, "--commit", commit)
	require.NoError(t, err, out)
	require.Contains(t, out, "commit: "+commit)
	require.Contains(t, out, "attestations: https://spdx.dev/Document, https://slsa.dev/provenance/v1")

	// The commit from a release input's sourceCommit.
	releases := t.TempDir()
	in, err := os.ReadFile(filepath.Join("..", "..", "..", "channels", "releases", "1.0.0.yaml"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(releases, "1.0.0.yaml"), append(in, []byte("sourceCommit: "+commit+"\n")...), 0o600))
	out, err = run("verify", ref, "--key", pubFile, "--releases", releases, "--release", "1.0.0")
	require.NoError(t, err, out)
	require.Contains(t, out, "commit: "+commit)

	// The key from the environment; an explicit commit (another one whose
	// content of dir is the same) and time.
	t.Setenv(image.SigningKeyEnv, keyPEM)
	other, changed := otherCommits(t, dir)
	out, err = run("sign", "bundle", dir, ref, "--commit", other, "--commit-time", "2026-11-25T12:00:00Z", "-o", "json")
	require.NoError(t, err, out)
	require.Contains(t, out, `"sbom": "`)

	tests := []struct {
		name string
		args []string
		want []string
	}{
		{name: "another key", args: []string{"verify", ref, "--key", otherPub, "--commit", commit},
			want: []string{"is not verified", "image signature: no valid signature by the key"}},
		{name: "another commit", args: []string{"verify", ref, "--key", pubFile, "--commit", strings.Repeat("e", 40)},
			want: []string{"provenance: no attached one is valid", "but the release names " + strings.Repeat("e", 40),
				"provenance attestation (what `cosign verify-attestation --type slsaprovenance1` reads): no valid https://slsa.dev/provenance/v1 attestation"}},
		{name: "no commit", args: []string{"verify", ref, "--key", pubFile}, want: []string{"give the release's commit: --release X.Y.Z"}},
		{name: "a release input without sourceCommit", args: []string{"verify", ref, "--key", pubFile, "--release", "1.0.0"},
			want: []string{"channels/releases/1.0.0.yaml names no sourceCommit"}},
		{name: "a release input naming another commit", args: []string{"verify", ref, "--key", pubFile, "--releases", releases, "--release", "1.0.0", "--commit", other},
			want: []string{"--commit " + other + " differs from the sourceCommit " + commit}},
		{name: "a release with no input", args: []string{"verify", ref, "--key", pubFile, "--release", "9.9.9"}, want: []string{"channels/releases/9.9.9.yaml"}},
		{name: "no public key", args: []string{"verify", ref, "--commit", commit}, want: []string{"no public key: give --key FILE"}},
		{name: "a private key to verify", args: []string{"verify", ref, "--key", keyFile, "--commit", commit}, want: []string{"public key " + keyFile}},
		{name: "missing key file", args: []string{"sign", "bundle", dir, ref, "--key", "nope.pem"}, want: []string{"--key nope.pem"}},
		{name: "a public key to sign", args: []string{"sign", "bundle", dir, ref, "--key", pubFile}, want: []string{"signing key " + pubFile}},
		{name: "bad commit", args: []string{"sign", "bundle", dir, ref, "--commit", "HEAD", "--commit-time", "0"},
			want: []string{`commit "HEAD" is not a full hexadecimal git commit`}},
		{name: "bad time", args: []string{"sign", "bundle", dir, ref, "--commit", other, "--commit-time", "yesterday"},
			want: []string{`--commit-time "yesterday": want RFC 3339`}},
		{name: "another input", args: []string{"sign", "bundle", filepath.Join("..", "..", "..", "bundle", "inferencestack-crds", "2.0.0"), ref},
			want: []string{"but ../../../bundle/inferencestack-crds/2.0.0 builds sha256:"}},
		{name: "not pushed", args: []string{"sign", "bundle", dir, host + "/acme/nothing:v1"}, want: []string{"does not exist: push it first"}},
		{name: "a commit whose content differs", args: []string{"sign", "bundle", dir, ref, "--commit", changed, "--commit-time", "0"},
			want: []string{"is not commit " + changed + "'s content"}},
		{name: "a commit the checkout does not have", args: []string{"sign", "bundle", dir, ref, "--commit", strings.Repeat("0f", 20), "--commit-time", "0"},
			want: []string{"is not a commit of the checkout"}},
		{name: "unsigned image", args: []string{"verify", host + "/acme/nothing:v1", "--key", pubFile, "--commit", commit}, want: []string{"reading " + host + "/acme/nothing:v1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := run(tc.args...)
			require.Error(t, err, out)
			for _, w := range tc.want {
				require.ErrorContains(t, err, w)
			}
		})
	}

	// The commit whose provenance was signed last still verifies, and so
	// does the first: each signing adds its documents.
	out, err = run("verify", ref, "--key", pubFile, "--commit", other)
	require.NoError(t, err, out)
	out, err = run("verify", ref, "--key", pubFile, "--commit", commit)
	require.NoError(t, err, out)

	t.Setenv(image.SigningKeyEnv, "")
	_, err = run("sign", "bundle", dir, ref)
	require.ErrorContains(t, err, "no signing key: give --key FILE")
}

// otherCommits returns a commit other than HEAD with the same content of
// dir, and one where dir differs (the parent of the commit that added it).
func otherCommits(t *testing.T, dir string) (same, changed string) {
	t.Helper()
	git := func(args ...string) (string, error) {
		out, err := exec.Command("git", args...).Output()
		return strings.TrimSpace(string(out)), err
	}
	list, err := git("log", "--format=%H", "-n", "50", "HEAD~1")
	if err != nil {
		t.Skipf("no history beyond HEAD (a shallow checkout?): %v", err)
	}
	for _, c := range strings.Fields(list) {
		if _, err := git("diff", "--quiet", c, "HEAD", "--", dir); err == nil {
			same = c
			break
		}
	}
	added, err := git("log", "--format=%H", "-n", "1", "--diff-filter=A", "--", dir)
	require.NoError(t, err)
	changed, err = git("rev-parse", added+"^")
	if same == "" || err != nil {
		t.Skipf("no commit in the last 50 with the same %s, or none before it was added", dir)
	}
	return same, changed
}

// TestSignSourceFromGit: the commit and its time come from the git checkout
// holding the input; an input with uncommitted changes is refused.
func TestSignSourceFromGit(t *testing.T) {
	host := registry.Registry(t)
	keyFile, _, pubFile := keyFiles(t)
	checkout := t.TempDir()
	dir := filepath.Join(checkout, "bundle", "demo", "1.0.0")
	for name, content := range map[string]string{
		"go.mod":         "module example.com/demo\n",
		"channels/.keep": "",
		"bundle/demo/1.0.0/manifests/demo.crd.yaml": "kind: CustomResourceDefinition\n",
		"bundle/demo/1.0.0/metadata/annotations.yaml": "annotations:\n  operators.operatorframework.io.bundle.mediatype.v1: registry+v1\n" +
			"  operators.operatorframework.io.bundle.package.v1: demo\n",
	} {
		p := filepath.Join(checkout, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	}
	git := func(args ...string) string {
		cmd := exec.Command("git", append([]string{"-C", checkout, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_COMMITTER_DATE=2026-11-20T10:00:00Z", "GIT_AUTHOR_DATE=2026-11-20T10:00:00Z")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		return strings.TrimSpace(string(out))
	}
	git("init", "-q")
	git("add", "-A")
	git("commit", "-q", "-m", "demo")
	commit := git("rev-parse", "HEAD")
	ref := host + "/acme/demo-bundle:v1.0.0"
	_, err := image.Build{Kind: image.KindBundle, Dir: dir, Push: ref}.Run(context.Background())
	require.NoError(t, err)

	out, err := run("sign", "bundle", dir, ref, "--key", keyFile)
	require.NoError(t, err, out)
	out, err = run("verify", ref, "--key", pubFile, "--commit", commit)
	require.NoError(t, err, out)

	// The same documents whatever the spelling of the input or the working
	// folder, and no local path in them.
	var docs []string
	for i, spell := range []struct{ wd, input string }{
		{"", dir}, {"", dir + "/"}, {"", filepath.Join(dir, "..", "1.0.0")},
		{checkout, "bundle/demo/1.0.0"}, {checkout, "./bundle/demo/1.0.0"}, {filepath.Join(checkout, "bundle"), "demo/1.0.0"},
	} {
		out := filepath.Join(t.TempDir(), "docs")
		func() {
			if spell.wd != "" {
				wd, err := os.Getwd()
				require.NoError(t, err)
				require.NoError(t, os.Chdir(spell.wd))
				defer func() { require.NoError(t, os.Chdir(wd)) }()
			}
			o, err := run("documents", "bundle", spell.input, "--image", host+"/acme/demo-bundle", "--output", out)
			require.NoError(t, err, "spelling %d: %s", i, o)
		}()
		prov, err := os.ReadFile(filepath.Join(out, image.ProvenanceFile))
		require.NoError(t, err)
		require.NotContains(t, string(prov), checkout, "a local path in the provenance")
		sbom, err := os.ReadFile(filepath.Join(out, image.SBOMFile))
		require.NoError(t, err)
		docs = append(docs, string(prov)+string(sbom))
		require.Equal(t, docs[0], docs[i], "spelling %d (%s from %q) gives other documents", i, spell.input, spell.wd)
	}

	// Content that is not the commit's is refused, with or without --commit:
	// an edited file, an untracked one, an ignored one.
	crd := filepath.Join(dir, "manifests", "demo.crd.yaml")
	require.NoError(t, os.WriteFile(crd, []byte("kind: CustomResourceDefinition\n# edited\n"), 0o600))
	for _, args := range [][]string{
		{"sign", "bundle", dir, ref, "--key", keyFile},
		{"sign", "bundle", dir, ref, "--key", keyFile, "--commit", commit},
		{"sign", "bundle", dir, ref, "--key", keyFile, "--commit", commit, "--commit-time", "0"},
		{"documents", "bundle", dir, "--image", host + "/acme/demo-bundle", "--output", filepath.Join(t.TempDir(), "d"), "--commit", commit, "--commit-time", "0"},
	} {
		_, err = run(args...)
		require.ErrorContains(t, err, dir+" holds files that are not commit "+commit+"'s (git status: M bundle/demo/1.0.0/manifests/demo.crd.yaml)", "%v", args)
	}
	git("checkout", "--", ".")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "manifests", "extra.yaml"), []byte("kind: ConfigMap\n"), 0o600))
	_, err = run("sign", "bundle", dir, ref, "--key", keyFile, "--commit", commit, "--commit-time", "0")
	require.ErrorContains(t, err, "(git status: ?? bundle/demo/1.0.0/manifests/extra.yaml)")
	require.NoError(t, os.Remove(filepath.Join(dir, "manifests", "extra.yaml")))
	require.NoError(t, os.WriteFile(filepath.Join(checkout, ".git", "info", "exclude"), []byte("*.secret\nbin/\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "manifests", "key.secret"), []byte("kind: Secret\n"), 0o600))
	_, err = run("sign", "bundle", dir, ref, "--key", keyFile)
	require.ErrorContains(t, err, "(git status: !! bundle/demo/1.0.0/manifests/key.secret)")
	require.NoError(t, os.Remove(filepath.Join(dir, "manifests", "key.secret")))

	// The operator binary (ignored by git) is HEAD's only in a clean checkout.
	require.NoError(t, os.MkdirAll(filepath.Join(checkout, "bin"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(checkout, "bin", "manager"), []byte("not really\n"), 0o600))
	require.NoError(t, os.WriteFile(crd, []byte("kind: CustomResourceDefinition\n# edited\n"), 0o600))
	_, err = run("documents", "operator", filepath.Join(checkout, "bin", "manager"), "--image", host+"/acme/op", "--output", filepath.Join(t.TempDir(), "d"))
	require.ErrorContains(t, err, "has changes not committed (git status: M bundle/demo/1.0.0/manifests/demo.crd.yaml), so the operator binary")
	git("checkout", "--", ".")
	_, err = run("documents", "operator", filepath.Join(checkout, "bin", "manager"), "--image", host+"/acme/op", "--output", filepath.Join(t.TempDir(), "d"),
		"--commit", strings.Repeat("0f", 20), "--commit-time", "0")
	require.ErrorContains(t, err, "is not a commit of the checkout")
}

// TestDocumentsCmd: `bundlegen documents` writes, offline, the same bytes
// `bundlegen sign` attaches; twice the same; never into a folder of others.
func TestDocumentsCmd(t *testing.T) {
	host := registry.Registry(t)
	keyFile, _, _ := keyFiles(t)
	dir := filepath.Join("..", "..", "..", "bundle", "inferencestack-operator", "1.0.0")
	repo := host + "/acme/inferencestack-operator-bundle"
	_, err := image.Build{Kind: image.KindBundle, Dir: dir, Push: repo + ":v1.0.0"}.Run(context.Background())
	require.NoError(t, err)
	out, err := run("sign", "bundle", dir, repo+":v1.0.0", "--key", keyFile, "-o", "json")
	require.NoError(t, err, out)
	var signed image.Signed
	require.NoError(t, json.Unmarshal([]byte(out), &signed))

	docs := filepath.Join(t.TempDir(), "docs")
	out, err = run("documents", "bundle", dir, "--image", repo, "--output", docs)
	require.NoError(t, err, out)
	require.Contains(t, out, "image: "+signed.Image)
	for file, attached := range map[string]string{image.SBOMFile: signed.SBOM, image.ProvenanceFile: signed.Provenance} {
		written, err := os.ReadFile(filepath.Join(docs, file))
		require.NoError(t, err)
		require.Equal(t, string(written), string(artifactLayer(t, attached)), "%s differs from what sign attached", file)
	}
	before, err := os.ReadFile(filepath.Join(docs, image.SBOMFile))
	require.NoError(t, err)
	_, err = run("documents", "bundle", dir, "--image", repo, "--output", docs)
	require.NoError(t, err)
	after, err := os.ReadFile(filepath.Join(docs, image.SBOMFile))
	require.NoError(t, err)
	require.Equal(t, string(before), string(after))

	require.NoError(t, os.WriteFile(filepath.Join(docs, "notes.md"), []byte("mine\n"), 0o600))
	_, err = run("documents", "bundle", dir, "--image", repo, "--output", docs)
	require.ErrorContains(t, err, "--output "+docs+" holds notes.md")
	_, err = run("documents", "bundle", dir, "--image", repo+":v1", "--output", t.TempDir())
	require.ErrorContains(t, err, "want an image repository without tag or digest")
	_, err = run("documents", "bundle", dir, "--image", repo, "--output", dir)
	require.ErrorContains(t, err, "refusing to write to the input")
}

// artifactLayer reads the only layer of the artifact ref (by digest).
func artifactLayer(t *testing.T, ref string) []byte {
	t.Helper()
	d, err := name.NewDigest(ref, name.Insecure)
	require.NoError(t, err)
	img, err := remote.Image(d)
	require.NoError(t, err)
	layers, err := img.Layers()
	require.NoError(t, err)
	require.Len(t, layers, 1)
	rc, err := layers[0].Compressed()
	require.NoError(t, err)
	defer rc.Close()
	b, err := io.ReadAll(rc)
	require.NoError(t, err)
	return b
}
