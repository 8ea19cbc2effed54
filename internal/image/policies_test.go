package image_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/inferencestack/inferencestack/internal/image"
	"github.com/inferencestack/inferencestack/test/cosignverify"
)

// placeholder stands for the release's public key in docs/policies.
const placeholder = "REPLACE-WITH-THE-RELEASE-COSIGN.PUB"

// requirement is one field an admission policy requires of a statement of
// a cosign attestation type: its path in the statement, and its value.
type requirement struct {
	cosignType string
	path       []string
	value      string
}

func (r requirement) String() string {
	return fmt.Sprintf("%s: %s = %q", r.cosignType, strings.Join(r.path, "."), r.value)
}

// holds checks r on a statement (JSON), as printed by `cosign
// verify-attestation --type`.
func (r requirement) holds(statement []byte) error {
	var v any
	if err := json.Unmarshal(statement, &v); err != nil {
		return err
	}
	for _, k := range r.path {
		m, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: no %s", r, k)
		}
		v = m[k]
	}
	if v != r.value {
		return fmt.Errorf("%s: the statement has %v", r, v)
	}
	return nil
}

// yamlDocs reads the YAML documents of a policy file, and checks that each
// public key in it is the placeholder.
func yamlDocs(t *testing.T, file string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	keys := regexp.MustCompile(`-----BEGIN PUBLIC KEY-----\s*\n\s*(\S+)\s*\n`).FindAllStringSubmatch(string(b), -1)
	require.NotEmpty(t, keys, "%s names no public key", file)
	for _, k := range keys {
		require.Equal(t, placeholder, k[1], "%s: a key, not the placeholder, is committed", file)
	}
	var out []map[string]any
	for _, doc := range strings.Split(string(b), "\n---\n") {
		var m map[string]any
		require.NoError(t, yaml.Unmarshal([]byte(doc), &m), file)
		out = append(out, m)
	}
	return out
}

// get walks a YAML tree by map keys and list indexes.
func get(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			l, _ := v.([]any)
			if k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

func list(v any) []any { l, _ := v.([]any); return l }

// cueFields reads the `a: b: "value"` lines of a CUE check.
var cueField = regexp.MustCompile(`^([A-Za-z_][\w]*(?:: [A-Za-z_][\w]*)*): "([^"]*)"$`)

// policyRequirements reads what docs/policies/*.yaml require of the
// attestations: policy-controller's CUE checks (per cosign type) and
// Kyverno's conditions (per predicate type, on the predicate).
func policyRequirements(t *testing.T) []requirement {
	t.Helper()
	var out []requirement
	for _, doc := range yamlDocs(t, "../../docs/policies/policy-controller.yaml") {
		require.Equal(t, "quay.io/inferencestack/**", get(doc, "spec", "images", 0, "glob"))
		for _, a := range list(get(doc, "spec", "authorities")) {
			for _, att := range list(get(a, "attestations")) {
				typ, _ := get(att, "predicateType").(string)
				require.Contains(t, cosignverify.Types, typ)
				require.Equal(t, "cue", get(att, "policy", "type"))
				data, _ := get(att, "policy", "data").(string)
				for _, line := range strings.Split(strings.TrimSpace(data), "\n") {
					m := cueField.FindStringSubmatch(line)
					require.NotNil(t, m, "policy-controller.yaml: a CUE line this test cannot read: %q", line)
					out = append(out, requirement{cosignType: typ, path: strings.Split(m[1], ": "), value: m[2]})
				}
			}
		}
	}
	kyverno := yamlDocs(t, "../../docs/policies/kyverno.yaml")
	require.Len(t, kyverno, 1)
	vi := get(kyverno[0], "spec", "rules", 0, "verifyImages", 0)
	require.Equal(t, "quay.io/inferencestack/*", get(vi, "imageReferences", 0))
	require.Equal(t, true, get(vi, "attestors", 0, "entries", 0, "keys", "rekor", "ignoreTlog"))
	for _, att := range list(get(vi, "attestations")) {
		typ := image.CosignTypes[get(att, "type").(string)]
		require.NotEmpty(t, typ, "kyverno.yaml: attestation type %v is not one bundlegen attests with", get(att, "type"))
		for _, c := range list(get(att, "conditions", 0, "all")) {
			key := strings.TrimSuffix(strings.TrimPrefix(get(c, "key").(string), "{{ "), " }}")
			require.Equal(t, "Equals", get(c, "operator"))
			// Kyverno evaluates conditions on the predicate.
			out = append(out, requirement{cosignType: typ, path: append([]string{"predicate"}, strings.Split(key, ".")...), value: get(c, "value").(string)})
		}
	}
	return out
}

// TestPoliciesAdmitWhatIsSigned: what docs/policies require of the
// attestations holds on what cosign's library verifies of an image
// `bundlegen sign` attested, for each attestation type; the policies keep
// the placeholder rather than a key; and a requirement can fail.
func TestPoliciesAdmitWhatIsSigned(t *testing.T) {
	reqs := policyRequirements(t)
	host := testRegistry(t, true)
	priv, pub := keyPair(t)
	_, ref := signed(t, host, bundleDir(t), priv)
	got, err := cosignverify.Verify(context.Background(), ref, pub, cosignverify.Types...)
	require.NoError(t, err)
	types := map[string]bool{}
	for _, r := range reqs {
		require.Len(t, got.Attestations[r.cosignType], 1, "%s", r)
		require.NoError(t, r.holds(got.Attestations[r.cosignType][0]))
		types[r.cosignType] = true
	}
	require.Len(t, types, len(cosignverify.Types), "every attestation type is checked by the policies: %v", reqs)
	require.GreaterOrEqual(t, len(reqs), 8, "the policies' requirements: %v", reqs)

	// The same requirement on a statement of someone else's build fails.
	for _, r := range reqs {
		if r.path[len(r.path)-1] == "buildType" {
			other := strings.Replace(string(got.Attestations[r.cosignType][0]), image.BuildType, "https://example.com/another-build", 1)
			require.ErrorContains(t, r.holds([]byte(other)), "the statement has https://example.com/another-build")
		}
	}
}
