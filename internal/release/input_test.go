package release

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const goodInput = `version: 2.0.0
releaseDate: "2027-01-01T00:00:00Z"
minKubeVersion: 1.30.0
llamaStackVersion: 0.3.0
operatorImage: quay.io/inferencestack/inferencestack-operator:v2.0.0
cacheImage: docker.io/library/postgres:16.4
operands:
  starter: docker.io/llamastack/distribution-starter:0.3.0
  postgres-demo: docker.io/llamastack/distribution-postgres-demo:0.3.0
api:
  reads: v1alpha1
  served: [v1alpha1, v1alpha2]
  storage: v1alpha1
`

// TestLoadInput: the bad release inputs tried, each refused naming the file
// and the field.
func TestLoadInput(t *testing.T) {
	digest := "sha256:" + strings.Repeat("a", 64)
	tests := []struct {
		name      string
		old, new  string // replaced in goodInput
		want      []string
		assertion require.ErrorAssertionFunc
	}{
		{name: "upstream images", assertion: require.NoError},
		{name: "a mirror with the same tag", old: "docker.io/llamastack/distribution-starter:0.3.0",
			new: "registry.example.com:5000/mirror/llama/starter:0.3.0", assertion: require.NoError},
		{name: "a digest, no tag", old: "docker.io/llamastack/distribution-starter:0.3.0",
			new: "docker.io/llamastack/distribution-starter@" + digest, assertion: require.NoError},
		{name: "tag and digest", old: "docker.io/llamastack/distribution-starter:0.3.0",
			new: "docker.io/llamastack/distribution-starter:0.3.0@" + digest, assertion: require.NoError},
		{name: "api missing", old: "api:\n  reads: v1alpha1\n  served: [v1alpha1, v1alpha2]\n  storage: v1alpha1\n", new: "",
			want: []string{"field api: missing", "docs/api-versions.md"}, assertion: require.Error},
		{name: "api.reads not served", old: "reads: v1alpha1", new: "reads: v1beta1",
			want: []string{"field api.reads: v1beta1 is not served by the release's own CRD package"}, assertion: require.Error},
		{name: "api.storage not served", old: "storage: v1alpha1", new: "storage: v2",
			want: []string{"field api.storage: v2 is not served"}, assertion: require.Error},
		{name: "api.served twice", old: "[v1alpha1, v1alpha2]", new: "[v1alpha1, v1alpha1]",
			want: []string{"field api.served[1]: v1alpha1 is listed twice"}, assertion: require.Error},
		{name: "api.served empty", old: "[v1alpha1, v1alpha2]", new: "[]",
			want: []string{"field api.served: empty", "field api.storage: v1alpha1 is not served"}, assertion: require.Error},
		{name: "api version typo", old: "served: [v1alpha1, v1alpha2]", new: "served: [v1alpha1, V1alpha2]",
			want: []string{`field api.served[1]: "V1alpha2" is not a Kubernetes API version such as v1alpha1`}, assertion: require.Error},
		{name: "api field typo", old: "  storage: v1alpha1", new: "  storage: v1alpha1\n  store: v1alpha1",
			want: []string{`unknown field "store"`}, assertion: require.Error},
		{name: "llamaStackVersion missing", old: "llamaStackVersion: 0.3.0\n", new: "",
			want: []string{"field llamaStackVersion", "missing"}, assertion: require.Error},
		{name: "llamaStackVersion with a v", old: "llamaStackVersion: 0.3.0", new: "llamaStackVersion: v0.3.0",
			want: []string{"field llamaStackVersion", `"v0.3.0" is not a semantic version`}, assertion: require.Error},
		{name: "llamaStackVersion not strict", old: "llamaStackVersion: 0.3.0", new: "llamaStackVersion: \"0.3\"",
			want: []string{"field llamaStackVersion", `"0.3" is not a semantic version`}, assertion: require.Error},
		{name: "operand tag differs", old: "distribution-starter:0.3.0", new: "distribution-starter:0.2.23",
			want:      []string{"field operands.starter", `the tag of docker.io/llamastack/distribution-starter:0.2.23 is "0.2.23", but llamaStackVersion is "0.3.0"`},
			assertion: require.Error},
		{name: "OGX repository, tag differs: the way out is upstream's repository at the line", old: "docker.io/llamastack/distribution-starter:0.3.0", new: "docker.io/ogx/distribution-starter:0.8.0",
			want: []string{"field operands.starter", `is "0.8.0"`, "use upstream's docker.io/llamastack/distribution-starter:0.3.0, or docker.io/ogx/distribution-starter:0.3.0 where"}, assertion: require.Error},
		{name: "tag and digest, the way out names the repository", old: "docker.io/llamastack/distribution-starter:0.3.0",
			new:  "docker.io/llamastack/distribution-starter:0.8.0@" + digest,
			want: []string{"field operands.starter", "use docker.io/llamastack/distribution-starter:0.3.0 (the same repository at that release)"}, assertion: require.Error},
		{name: "a line the operator does not know", old: "llamaStackVersion: 0.3.0", new: "llamaStackVersion: 0.3.1",
			want: []string{"field llamaStackVersion", "Llama Stack version 0.3.1 has no known run-config layout", "the operator would deploy nothing"}, assertion: require.Error},
		{name: "mirror with another tag", old: "docker.io/llamastack/distribution-starter:0.3.0", new: "mirror.example.com/starter:latest",
			want: []string{"field operands.starter", `is "latest"`}, assertion: require.Error},
		{name: "tag and digest, tag differs", old: "docker.io/llamastack/distribution-starter:0.3.0",
			new: "docker.io/llamastack/distribution-starter:0.3.1@" + digest, want: []string{"field operands.starter", `is "0.3.1"`}, assertion: require.Error},
		{name: "operand without tag or digest", old: "docker.io/llamastack/distribution-starter:0.3.0", new: "docker.io/llamastack/distribution-starter",
			want: []string{"field operands.starter", "does not parse", "registry/repository:tag"}, assertion: require.Error},
		{name: "registry port is not a tag", old: "docker.io/llamastack/distribution-starter:0.3.0", new: "localhost:5000/distribution-starter",
			want: []string{"field operands.starter", "does not parse", "registry/repository:tag"}, assertion: require.Error},
		{name: "unknown distribution", old: "  starter:", new: "  startr:",
			want: []string{"field operands.startr", `unknown distribution "startr"`}, assertion: require.Error},
		{name: "unknown field", old: "llamaStackVersion:", new: "llamaStackVer:",
			want: []string{`unknown field "llamaStackVer"`, "fields: version"}, assertion: require.Error},
		{name: "sourceCommit", old: "version: 2.0.0\n", new: "version: 2.0.0\nsourceCommit: " + strings.Repeat("0a", 20) + "\n", assertion: require.NoError},
		{name: "sourceCommit not a full commit", old: "version: 2.0.0\n", new: "version: 2.0.0\nsourceCommit: v2.0.0\n",
			want: []string{"field sourceCommit", `"v2.0.0" is not a full lowercase hexadecimal git commit`}, assertion: require.Error},
		{name: "published not a bool", old: "version: 2.0.0\n", new: "version: 2.0.0\npublished: yes please\n",
			want: []string{"2.0.0.yaml"}, assertion: require.Error},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data := goodInput
			if tc.old != "" {
				require.Contains(t, data, tc.old)
				data = strings.Replace(data, tc.old, tc.new, 1)
			}
			path := filepath.Join(t.TempDir(), "2.0.0.yaml")
			require.NoError(t, os.WriteFile(path, []byte(data), 0o644))
			in, err := LoadInput(path)
			tc.assertion(t, err)
			for _, w := range append(tc.want, path) {
				if err != nil {
					require.ErrorContains(t, err, w)
				}
			}
			if err == nil {
				require.Equal(t, "0.3.0", in.LlamaStackVersion)
			}
		})
	}
}

// TestLoadLock: the lock holds digests or "unresolved", nothing else.
func TestLoadLock(t *testing.T) {
	digest := "sha256:" + strings.Repeat("b", 64)
	tests := []struct {
		name      string
		lock      string
		want      string
		assertion require.ErrorAssertionFunc
	}{
		{name: "digest and unresolved", lock: "images:\n  quay.io/a/b:1: " + digest + "\n  quay.io/a/c:1: unresolved\n", assertion: require.NoError},
		{name: "made-up short digest", lock: "images:\n  quay.io/a/b:1: sha256:abc\n", want: `images[quay.io/a/b:1]: digest "sha256:abc"`, assertion: require.Error},
		{name: "empty value", lock: "images:\n  quay.io/a/b:1: \"\"\n", want: `or "unresolved"`, assertion: require.Error},
		{name: "typo of unresolved", lock: "images:\n  quay.io/a/b:1: unresolvd\n", want: `or "unresolved"`, assertion: require.Error},
		{name: "key by digest", lock: "images:\n  quay.io/a/b@" + digest + ": " + digest + "\n", want: "already names a digest", assertion: require.Error},
		{name: "key that does not parse", lock: "images:\n  Quay.io/A B:1: unresolved\n", want: "images key", assertion: require.Error},
		{name: "unknown field", lock: "image:\n  quay.io/a/b:1: unresolved\n", want: `unknown field "image"`, assertion: require.Error},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "images.lock")
			require.NoError(t, os.WriteFile(path, []byte(tc.lock), 0o644))
			_, err := LoadLock(path)
			tc.assertion(t, err)
			if err != nil {
				require.ErrorContains(t, err, tc.want)
				require.ErrorContains(t, err, path)
			}
		})
	}
}

// TestLockPin: a digest pins, unresolved keeps the tag with a warning, a
// missing entry fails unless tags are allowed.
func TestLockPin(t *testing.T) {
	digest := "sha256:" + strings.Repeat("c", 64)
	l := Lock{Images: map[string]string{"quay.io/a/b:1": digest, "quay.io/a/c:1": Unresolved}}
	p, err := l.Pin("quay.io/a/b:1", false)
	require.NoError(t, err)
	require.Equal(t, Pinned{Ref: "quay.io/a/b@" + digest}, p)
	p, err = l.Pin("quay.io/a/c:1", false)
	require.NoError(t, err)
	require.Equal(t, "quay.io/a/c:1", p.Ref)
	require.Contains(t, p.Warning, "unresolved")
	_, err = l.Pin("quay.io/a/d:1", false)
	require.ErrorContains(t, err, "`  quay.io/a/d:1: unresolved`")
	p, err = l.Pin("quay.io/a/d:1", true)
	require.NoError(t, err)
	require.Contains(t, p.Warning, "--allow-tags")
}

// TestPublishedNeedsDigests: a published release refuses every image
// without a digest, naming file and field.
func TestPublishedNeedsDigests(t *testing.T) {
	path := filepath.Join(t.TempDir(), "2.0.0.yaml")
	require.NoError(t, os.WriteFile(path, []byte("published: true\n"+goodInput), 0o644))
	in, err := LoadInput(path)
	require.NoError(t, err)
	l := Lock{Images: map[string]string{}}
	for _, img := range in.Images() {
		l.Images[img] = Unresolved
	}
	_, err = PinImages(in, l, true)
	require.ErrorContains(t, err, path+": field operatorImage: the release is published")
}

// TestLoadSum: the published sum is bundlegen's own file; anything else is refused.
func TestLoadSum(t *testing.T) {
	h := "sha256:" + strings.Repeat("d", 64)
	tests := []struct {
		name      string
		sum       string
		want      string
		assertion require.ErrorAssertionFunc
	}{
		{name: "good", sum: "# c\n1.0.0 input " + h + "\n1.0.0 p/a.yaml " + h + "\n", assertion: require.NoError},
		{name: "two fields", sum: "1.0.0 input\n", want: ":1: want <version> <name> sha256:<hex>", assertion: require.Error},
		{name: "bad version", sum: "v1 input " + h + "\n", want: `version "v1"`, assertion: require.Error},
		{name: "bad hash", sum: "1.0.0 input sha256:xyz\n", want: `hash "sha256:xyz"`, assertion: require.Error},
		{name: "duplicate", sum: "1.0.0 input " + h + "\n1.0.0 input " + h + "\n", want: "listed twice", assertion: require.Error},
		{name: "no input line", sum: "1.0.0 p/a.yaml " + h + "\n", want: "has no input line", assertion: require.Error},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "published.sum")
			require.NoError(t, os.WriteFile(path, []byte(tc.sum), 0o644))
			s, err := LoadSum(path)
			tc.assertion(t, err)
			if err != nil {
				require.ErrorContains(t, err, tc.want)
				return
			}
			require.True(t, s.Frozen("1.0.0"))
			again, err := os.ReadFile(path)
			require.NoError(t, err)
			require.Contains(t, string(s.Marshal()), strings.TrimPrefix(string(again), "# c\n"))
		})
	}
}

// TestLoadInputNewerLines: from 0.7.1 on the line's facts name what
// upstream publishes (starter alone) and where (docker.io/ogx from 0.8.0).
func TestLoadInputNewerLines(t *testing.T) {
	input := func(lsv string, operands ...string) string {
		return "version: 4.0.0\nreleaseDate: \"2027-01-01T00:00:00Z\"\nminKubeVersion: 1.30.0\nllamaStackVersion: " + lsv +
			"\noperatorImage: quay.io/inferencestack/inferencestack-operator:v4.0.0\noperands:\n" + strings.Join(operands, "") +
			"api:\n  reads: v1alpha2\n  served: [v1alpha1, v1alpha2]\n  storage: v1alpha2\n"
	}
	tests := []struct {
		name      string
		data      string
		want      []string
		assertion require.ErrorAssertionFunc
	}{
		{name: "0.7.1 starter", data: input("0.7.1", "  starter: docker.io/llamastack/distribution-starter:0.7.1\n"), assertion: require.NoError},
		{name: "OGX 0.8.0 starter", data: input("0.8.0", "  starter: docker.io/ogx/distribution-starter:0.8.0\n"), assertion: require.NoError},
		{name: "a mirror of OGX 0.8.0", data: input("0.8.0", "  starter: mirror.example.com/ogx/starter:0.8.0\n"), assertion: require.NoError},
		{name: "0.7.1 postgres-demo: no such image upstream", assertion: require.Error,
			data: input("0.7.1", "  starter: docker.io/llamastack/distribution-starter:0.7.1\n", "  postgres-demo: docker.io/llamastack/distribution-postgres-demo:0.7.1\n"),
			want: []string{"field operands.postgres-demo", "upstream publishes no image of postgres-demo at v0.7.1 (.github/workflows/build-distributions.yml builds starter): remove it"}},
		{name: "OGX 0.8.0 with the old repository and tag", assertion: require.Error,
			data: input("0.8.0", "  starter: docker.io/llamastack/distribution-starter:0.7.1\n"),
			want: []string{"field operands.starter", "use upstream's docker.io/ogx/distribution-starter:0.8.0, or docker.io/llamastack/distribution-starter:0.8.0 where"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "4.0.0.yaml")
			require.NoError(t, os.WriteFile(path, []byte(tc.data), 0o644))
			_, err := LoadInput(path)
			tc.assertion(t, err)
			for _, w := range tc.want {
				require.ErrorContains(t, err, w)
			}
		})
	}
}
