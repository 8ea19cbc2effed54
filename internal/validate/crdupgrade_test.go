package validate_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/operator-framework/operator-registry/alpha/declcfg"
	"github.com/operator-framework/operator-registry/alpha/property"

	"github.com/inferencestack/inferencestack/internal/validate"
)

// crdOpt edits the spec schema of the v1alpha1 version of the test CRD.
type crdOpt func(spec *apiextensionsv1.JSONSchemaProps)

func withoutField(name string) crdOpt {
	return func(spec *apiextensionsv1.JSONSchemaProps) { delete(spec.Properties, name) }
}

func withField(name, typ string, required bool) crdOpt {
	return func(spec *apiextensionsv1.JSONSchemaProps) {
		spec.Properties[name] = apiextensionsv1.JSONSchemaProps{Type: typ}
		if required {
			spec.Required = append(spec.Required, name)
		}
	}
}

func withEnum(field string, values ...string) crdOpt {
	return func(spec *apiextensionsv1.JSONSchemaProps) {
		p := spec.Properties[field]
		p.Enum = nil
		for _, v := range values {
			p.Enum = append(p.Enum, apiextensionsv1.JSON{Raw: []byte(`"` + v + `"`)})
		}
		spec.Properties[field] = p
	}
}

func withDescription(field, text string) crdOpt {
	return func(spec *apiextensionsv1.JSONSchemaProps) {
		p := spec.Properties[field]
		p.Description = text
		spec.Properties[field] = p
	}
}

// testCRD is demos.example.com with spec.size (integer) and spec.mode
// (string, one of a, b, c), edited by opts.
func testCRD(opts ...crdOpt) apiextensionsv1.CustomResourceDefinition {
	spec := apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
		"size": {Type: "integer"},
		"mode": {Type: "string"},
	}}
	withEnum("mode", "a", "b", "c")(&spec)
	for _, o := range opts {
		o(&spec)
	}
	return apiextensionsv1.CustomResourceDefinition{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{Name: "demos.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: "Demo", ListKind: "DemoList", Plural: "demos", Singular: "demo"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1alpha1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type:       "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": spec},
				}},
			}},
		},
	}
}

// crdBundle is bundle v of package demo shipping crd, as `bundlegen catalog`
// renders it: olm.package, olm.gvk and the CRD as an olm.bundle.object.
func crdBundle(t *testing.T, v string, crd *apiextensionsv1.CustomResourceDefinition) declcfg.Bundle {
	t.Helper()
	props := []property.Property{property.MustBuildPackage(pkg, v)}
	if crd != nil {
		data, err := json.Marshal(crd)
		require.NoError(t, err)
		props = append(props, property.MustBuildGVK("example.com", "v1alpha1", "Demo"), property.MustBuildBundleObject(data))
	}
	return declcfg.Bundle{Schema: declcfg.SchemaBundle, Package: pkg, Name: name(v), Image: "quay.io/demo/bundle:v" + v, Properties: props}
}

func TestCRDUpgradeSafety(t *testing.T) {
	old := testCRD()
	tests := []struct {
		name string
		new  apiextensionsv1.CustomResourceDefinition
		// want are fragments of the one finding expected per broken change,
		// each on the edge demo.v1.0.0 -> demo.v1.1.0; none means safe.
		want []validate.CatalogFinding
	}{
		{name: "unchanged", new: old},
		{
			name: "compatible: an optional field, an added enum value, a new description",
			new:  testCRD(withField("replicas", "integer", false), withEnum("mode", "a", "b", "c", "d"), withDescription("size", "How many.")),
		},
		{
			name: "removed field",
			new:  testCRD(withoutField("size")),
			// crdify also sees the removed property's type go from integer to none.
			want: []validate.CatalogFinding{
				{CRD: "demos.example.com", Message: "existingFieldRemoval: removed field : v1alpha1.^.spec.size"},
				{CRD: "demos.example.com", Field: "^.spec.size", Message: `v1alpha1: ^.spec.size: type: type changed : "integer" -> ""`},
			},
		},
		{
			name: "new required field",
			new:  testCRD(withField("owner", "string", true)),
			want: []validate.CatalogFinding{{CRD: "demos.example.com", Field: "^.spec", Message: "v1alpha1: ^.spec: required: new required fields: [owner]"}},
		},
		{
			name: "narrowed enum",
			new:  testCRD(withEnum("mode", "a", "b")),
			want: []validate.CatalogFinding{{CRD: "demos.example.com", Field: "^.spec.mode", Message: `v1alpha1: ^.spec.mode: enum: allowed enum values removed : ["c"]`}},
		},
		{
			name: "type changed",
			new: testCRD(func(spec *apiextensionsv1.JSONSchemaProps) {
				spec.Properties["size"] = apiextensionsv1.JSONSchemaProps{Type: "string"}
			}),
			want: []validate.CatalogFinding{{CRD: "demos.example.com", Field: "^.spec.size", Message: "v1alpha1: ^.spec.size: type:"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := declcfg.DeclarativeConfig{
				Packages: []declcfg.Package{{Schema: declcfg.SchemaPackage, Name: pkg, DefaultChannel: "stable-v1"}},
				Channels: []declcfg.Channel{channel("stable-v1", entry("1.0.0"), entry("1.1.0", replaces("1.0.0")))},
				Bundles:  []declcfg.Bundle{crdBundle(t, "1.0.0", &old), crdBundle(t, "1.1.0", &tc.new)},
			}
			got := validate.CatalogConfig(cfg, false)
			require.Len(t, got, len(tc.want), "findings: %v", got)
			for i, w := range tc.want {
				g := got[i]
				require.Equal(t, validate.RuleCRDUpgradeSafety, g.Rule, "%s", g)
				require.Equal(t, "stable-v1", g.Channel, "%s", g)
				require.Equal(t, name("1.1.0"), g.Bundle, "%s", g)
				require.Equal(t, name("1.0.0"), g.From, "%s", g)
				require.Equal(t, w.CRD, g.CRD, "%s", g)
				require.Equal(t, w.Field, g.Field, "%s", g)
				require.Contains(t, g.Message, "upgrade demo.v1.0.0 -> demo.v1.1.0 (replaces in stable-v1) breaks CRD demos.example.com", "%s", g)
				require.Contains(t, g.Message, w.Message, "%s", g)
				require.Contains(t, g.Message, "OLM v1 refuses this upgrade", "%s", g)
			}
		})
	}
}

// TestCRDUpgradeEdges: every edge OLM v1 may take is checked, from any
// channel: replaces, skips and each bundle a skipRange holds; a bundle
// without the CRD has nothing to break; a bundle that provides an API
// without its CRD cannot be checked and says so.
func TestCRDUpgradeEdges(t *testing.T) {
	old, narrowed := testCRD(), testCRD(withEnum("mode", "a"))
	cfg := declcfg.DeclarativeConfig{
		Packages: []declcfg.Package{{Schema: declcfg.SchemaPackage, Name: pkg, DefaultChannel: "stable-v2"}},
		Channels: []declcfg.Channel{
			channel("stable-v1", entry("1.0.0"), entry("1.0.1", skips("1.0.0")), entry("1.1.0", replaces("1.0.1"), skips("1.0.0"))),
			channel("stable-v2", entry("2.0.0", skipRange(">=1.0.0 <2.0.0"))),
		},
		Bundles: []declcfg.Bundle{
			crdBundle(t, "1.0.0", &old), crdBundle(t, "1.0.1", &old), crdBundle(t, "1.1.0", &old), crdBundle(t, "2.0.0", &narrowed),
		},
	}
	var edges []string
	for _, f := range validate.CatalogConfig(cfg, false) {
		require.Equal(t, validate.RuleCRDUpgradeSafety, f.Rule, "%s", f)
		edges = append(edges, f.From+" -> "+f.Bundle+" in "+f.Channel)
	}
	require.Equal(t, []string{
		"demo.v1.0.0 -> demo.v2.0.0 in stable-v2",
		"demo.v1.0.1 -> demo.v2.0.0 in stable-v2",
		"demo.v1.1.0 -> demo.v2.0.0 in stable-v2",
	}, edges)

	// 1.1.0 without any object (as opm renders bundles, with
	// olm.csv.metadata): its edges are skipped, and named once as skipped.
	skipped := cfg
	skipped.Bundles = slices.Clone(cfg.Bundles)
	skipped.Bundles[2].Properties = slicesWithout(cfg.Bundles[2].Properties, property.TypeBundleObject)
	edges = nil
	for _, f := range validate.CatalogConfig(skipped, false) {
		edges = append(edges, f.From+" -> "+f.Bundle+" in "+f.Channel)
	}
	require.Equal(t, []string{"demo.v1.0.0 -> demo.v2.0.0 in stable-v2", "demo.v1.0.1 -> demo.v2.0.0 in stable-v2"}, edges)
	require.Equal(t, []string{name("1.1.0")}, validate.CRDCheckSkipped(skipped))
}

// TestCRDRemovedAcrossAnEdge: a new bundle that carries its objects but no
// longer the CRD the installed one ships breaks the upgrade (OLM v1 would
// delete the CRD and its objects); compared CRDs are not only those on both
// sides.
func TestCRDRemovedAcrossAnEdge(t *testing.T) {
	old := testCRD()
	cm, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "x"}})
	require.NoError(t, err)
	without := declcfg.Bundle{Schema: declcfg.SchemaBundle, Package: pkg, Name: name("1.1.0"), Image: "quay.io/demo/bundle:v1.1.0",
		Properties: []property.Property{property.MustBuildPackage(pkg, "1.1.0"), property.MustBuildBundleObject(cm)}}
	cfg := declcfg.DeclarativeConfig{
		Packages: []declcfg.Package{{Schema: declcfg.SchemaPackage, Name: pkg, DefaultChannel: "stable-v1"}},
		Channels: []declcfg.Channel{channel("stable-v1", entry("1.0.0"), entry("1.1.0", replaces("1.0.0")))},
		Bundles:  []declcfg.Bundle{crdBundle(t, "1.0.0", &old), without},
	}
	got := validate.CatalogConfig(cfg, false)
	require.Len(t, got, 1, "findings: %v", got)
	require.Equal(t, validate.RuleCRDUpgradeSafety, got[0].Rule)
	require.Equal(t, "demos.example.com", got[0].CRD)
	require.Equal(t, name("1.0.0"), got[0].From)
	require.Equal(t, name("1.1.0"), got[0].Bundle)
	require.Contains(t, got[0].Message, "upgrade demo.v1.0.0 -> demo.v1.1.0 (replaces in stable-v1) removes CRD demos.example.com")
	require.Contains(t, got[0].Message, "every Demo object")
	require.Empty(t, validate.CRDCheckSkipped(cfg))

	// Still providing the API (olm.gvk) while carrying no CRD is a finding of its own.
	cfg.Bundles[1].Properties = append(cfg.Bundles[1].Properties, property.MustBuildGVK("example.com", "v1alpha1", "Demo"))
	got = validate.CatalogConfig(cfg, false)
	require.Len(t, got, 2, "findings: %v", got)
	require.Contains(t, got[1].Message+got[0].Message, "provides APIs (olm.gvk) and carries its objects (olm.bundle.object), but none of them is a CRD")
}

func slicesWithout(props []property.Property, typ string) []property.Property {
	var out []property.Property
	for _, p := range props {
		if p.Type != typ {
			out = append(out, p)
		}
	}
	return out
}

// versioned is the test CRD serving served, storing storage.
func versioned(storage string, served ...string) apiextensionsv1.CustomResourceDefinition {
	crd := testCRD()
	v := crd.Spec.Versions[0]
	crd.Spec.Versions = nil
	for _, s := range served {
		v.Name, v.Storage = s, s == storage
		crd.Spec.Versions = append(crd.Spec.Versions, *v.DeepCopy())
	}
	return crd
}

// TestCRDStoredVersionAdvice: the safe path of docs/api-versions.md (store
// the new version, migrate, then stop serving the old one) within one
// major is refused for the skip edge the semver template adds, and the
// message says so and how to ship it; a replaces edge that drops the
// stored version is told to keep serving it. Neither is told to change
// its schema, which is not the cause.
func TestCRDStoredVersionAdvice(t *testing.T) {
	both, moved, only := versioned("v1alpha1", "v1alpha1", "v1alpha2"), versioned("v1alpha2", "v1alpha1", "v1alpha2"), versioned("v1alpha2", "v1alpha2")
	tests := []struct {
		name    string
		bundles []*apiextensionsv1.CustomResourceDefinition
		want    []string
	}{{
		name:    "safe path within a major: the template's skip",
		bundles: []*apiextensionsv1.CustomResourceDefinition{&both, &moved, &only},
		want: []string{"upgrade demo.v1.0.0 -> demo.v1.2.0 (skips in stable-v1) breaks CRD demos.example.com: storedVersionRemoval",
			"demo.v1.0.0 stores v1alpha1, which demo.v1.2.0 no longer serves, so OLM v1 refuses this upgrade on a cluster at demo.v1.0.0",
			"this edge is not one of them: the semver template makes the head of a channel skip every lower version of its major",
			"ship demo.v1.2.0 as the next major", "whose skipRange starts at the first release that stores v1alpha2"},
	}, {
		name:    "stops serving what its predecessor stores",
		bundles: []*apiextensionsv1.CustomResourceDefinition{&both, &both, &only},
		want: []string{"upgrade demo.v1.1.0 -> demo.v1.2.0 (replaces in stable-v1) breaks CRD demos.example.com: storedVersionRemoval",
			"keep serving v1alpha1 in demo.v1.2.0: a release that stores v1alpha2 comes first"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := declcfg.DeclarativeConfig{
				Packages: []declcfg.Package{{Schema: declcfg.SchemaPackage, Name: pkg, DefaultChannel: "stable-v1"}},
				Channels: []declcfg.Channel{channel("stable-v1", entry("1.0.0"), entry("1.1.0", replaces("1.0.0")), entry("1.2.0", replaces("1.1.0"), skips("1.0.0")))},
			}
			for i, crd := range tc.bundles {
				cfg.Bundles = append(cfg.Bundles, crdBundle(t, fmt.Sprintf("1.%d.0", i), crd))
			}
			var msgs []string
			for _, f := range validate.CatalogConfig(cfg, false) {
				require.Equal(t, validate.RuleCRDUpgradeSafety, f.Rule, "%s", f)
				msgs = append(msgs, f.Message)
			}
			require.NotEmpty(t, msgs)
			all := strings.Join(msgs, "\n")
			for _, w := range tc.want {
				require.Contains(t, all, w)
			}
			require.NotContains(t, all, "keep the old schema valid")
		})
	}
}
