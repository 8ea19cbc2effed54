package csv

import (
	"testing"

	"github.com/blang/semver/v4"
	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	"github.com/stretchr/testify/require"
)

func TestDisplayName(t *testing.T) {
	for in, want := range map[string]string{
		"InferenceStack": "Inference Stack",
		"HTTPRoute":      "HTTP Route",
		"Stack":          "Stack",
	} {
		require.Equal(t, want, displayName(in))
	}
}

func TestGenerateErrors(t *testing.T) {
	tests := []struct {
		name      string
		base      v1alpha1.ClusterServiceVersionSpec
		assertion require.ErrorAssertionFunc
	}{
		{name: "plain base", assertion: require.NoError},
		{name: "AllNamespaces unsupported", base: v1alpha1.ClusterServiceVersionSpec{InstallModes: []v1alpha1.InstallMode{
			{Type: v1alpha1.InstallModeTypeAllNamespaces, Supported: false}}},
			assertion: func(t require.TestingT, err error, _ ...any) {
				require.ErrorContains(t, err, "OLM v1 installs only in AllNamespaces")
			}},
		{name: "required CRDs", base: v1alpha1.ClusterServiceVersionSpec{CustomResourceDefinitions: v1alpha1.CustomResourceDefinitions{
			Required: []v1alpha1.CRDDescription{{Name: "inferencestacks.inferencestack.io"}}}},
			assertion: func(t require.TestingT, err error, _ ...any) { require.ErrorContains(t, err, "OLM v1 refuses") }},
		{name: "replaces", base: v1alpha1.ClusterServiceVersionSpec{Replaces: "x.v0.9.0"},
			assertion: func(t require.TestingT, err error, _ ...any) { require.ErrorContains(t, err, "semver template") }},
		{name: "owned CRD the bundle lacks", base: v1alpha1.ClusterServiceVersionSpec{CustomResourceDefinitions: v1alpha1.CustomResourceDefinitions{
			Owned: []v1alpha1.CRDDescription{{Name: "others.example.com", Version: "v1", Kind: "Other"}}}},
			assertion: func(t require.TestingT, err error, _ ...any) {
				require.ErrorContains(t, err, "fix or remove that entry")
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := Generator{Package: "p", Version: semver.MustParse("1.2.3"), CreatedAt: "2026-01-01T00:00:00Z"}
			out, err := g.Generate(&v1alpha1.ClusterServiceVersion{Spec: tc.base})
			tc.assertion(t, err)
			if err == nil {
				require.Equal(t, "p.v1.2.3", out.Name)
				require.Len(t, out.Spec.InstallModes, 4)
				require.Equal(t, "[]", out.Annotations[AnnotationALMExamples])
			}
		})
	}
}
