package config_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	"github.com/inferencestack/inferencestack/operator/components/config"
	"github.com/inferencestack/inferencestack/test/testutil"
)

func TestReferences(t *testing.T) {
	stack := testutil.Hub(testutil.Stack("s",
		testutil.WithProviders("inference",
			testutil.Provider("openai", testutil.WithID("a"), testutil.WithAPIKey("keys", "openai")),
			testutil.Provider("vllm", testutil.WithID("b"), testutil.WithAPIKey("keys", "vllm"), testutil.WithSecretRef("password", "pw", "p"))),
		testutil.WithTLS(v1alpha1.TLSSpec{Enabled: true, SecretName: "tls", CABundle: &v1alpha1.CABundleSource{ConfigMapName: "ca"}}),
	))
	got := config.References(stack.Spec)
	want := []config.Reference{
		{Kind: "ConfigMap", Name: "ca", Keys: []string{"ca.crt"}, Path: "spec.networking.tls.caBundle"},
		{Kind: "Secret", Name: "keys", Keys: []string{"openai", "vllm"}, Path: "spec.providers.inference[0].apiKey"},
		{Kind: "Secret", Name: "pw", Keys: []string{"p"}, Path: "spec.providers.inference[1].secretRefs[password]"},
		{Kind: "Secret", Name: "tls", Keys: []string{"tls.crt", "tls.key"}, Path: "spec.networking.tls.secretName"},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("References (-want +got):\n%s", d)
	}
}

func TestHashReferencesChangesWithUsedDataOnly(t *testing.T) {
	refs := []config.Reference{{Kind: "Secret", Name: "keys", Keys: []string{"a"}}}
	base := config.HashReferences(refs, map[string]map[string]string{"Secret/keys": {"a": "1", "b": "x"}})
	if h := config.HashReferences(refs, map[string]map[string]string{"Secret/keys": {"a": "1", "b": "y"}}); h != base {
		t.Error("a key the stack does not use changed the hash")
	}
	if h := config.HashReferences(refs, map[string]map[string]string{"Secret/keys": {"a": "2", "b": "x"}}); h == base {
		t.Error("a key the stack uses changed but the hash did not")
	}
}
