//go:build e2e

package e2e_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/inferencestack/inferencestack/internal/bundle"
	"github.com/inferencestack/inferencestack/internal/release"
	"github.com/inferencestack/inferencestack/operator/conversion"
	"github.com/inferencestack/inferencestack/test/olm"
)

// TestStoredVersionRemovalRefusedOnTheCluster is step 4 of the storage move
// (docs/api-versions.md) on the real OLM v1, with a catalog of the CRD
// package alone: 1.0.0 serving and storing v1alpha1, 2.1.0 serving both and
// storing v1alpha2, 2.2.0 serving v1alpha2 only. bundlegen accepts it: the
// one edge, 2.1.0 -> 2.2.0, leads from a release storing v1alpha2 to one
// serving it (an edge from a release storing v1alpha1 to 2.2.0 bundlegen
// refuses, as OLM's preflight would). But it cannot know the cluster: the
// cluster moved from 1.0.0 to 2.1.0 (an admin's self-certified hop), and an
// InferenceStack written under 1.0.0 and never migrated leaves v1alpha1 in
// the CRD's status.storedVersions, so the upgrade to 2.2.0 must be refused
// on the cluster (OLM's CRD upgrade-safety preflight: storedVersionRemoval)
// and the CRD keep serving v1alpha1; once the migration trimmed
// storedVersions, the same upgrade installs.
func TestStoredVersionRemovalRefusedOnTheCluster(t *testing.T) {
	dumpLogsOnFailure(t)
	ctx := context.Background()
	dir := t.TempDir()
	catalogDir, err := olm.Release{
		Root: root,
		Dir:  dir,
		Versions: map[string][]string{
			// No operator package: no operator reads what both heads serve.
			bundle.PackageCRDs: {"1.0.0", "2.1.0", "2.2.0"},
		},
		NoBridges: true, // the repository's bridge names 2.0.0, which this catalog has not
		Edit: func(in *release.Input) {
			switch in.Version {
			case "1.0.0":
				in.API = release.APIVersions{Reads: "v1alpha1", Served: []string{"v1alpha1"}, Storage: "v1alpha1"}
			case "2.1.0":
				in.API = release.APIVersions{Reads: "v1alpha1", Served: []string{"v1alpha1", "v1alpha2"}, Storage: "v1alpha2"}
			case "2.2.0":
				in.API = release.APIVersions{Reads: "v1alpha2", Served: []string{"v1alpha2"}, Storage: "v1alpha2"}
			}
		},
	}.Run(ctx)
	require.NoError(t, err, "bundlegen accepts the catalog: each edge's target serves what its source stores")
	serveCatalog(t, "storedversions", "storedversions-catalog", filepath.Join(dir, "bundle"), catalogDir)

	ns := bundle.ConversionNamespace
	apply(t, installer(t, ns, "crds-storedversions")...)
	ce := extension(t, bundle.PackageCRDs, "crds-storedversions", ns, "1.0.0", "storedversions")
	apply(t, ce)
	_, err = cluster.WaitCondition(ctx, ce, olm.TypeInstalled, installTimeout)
	require.NoError(t, err)

	// A stack written while v1alpha1 is stored, then deleted: the CRD's
	// status.storedVersions keeps v1alpha1 (only a migration trims it; the
	// API server cannot tell that no object is stored so any more).
	// Deleted before the storage moves, because deleting an object stored
	// in another version needs the conversion webhook, which does not run
	// here (no kubelet; test/node/e2e/conversion_test.go runs it).
	stackNS := "storedversions-stacks"
	nsObj := &unstructured.Unstructured{}
	nsObj.SetAPIVersion("v1")
	nsObj.SetKind("Namespace")
	nsObj.SetName(stackNS)
	apply(t, nsObj)
	stack := starterSample(t)
	stack.SetNamespace(stackNS)
	require.NoError(t, cluster.Client.Create(ctx, stack))
	require.NoError(t, cluster.Client.Delete(ctx, stack))
	deadline := time.Now().Add(time.Minute)
	for cluster.Client.Get(ctx, client.ObjectKeyFromObject(stack), stack.DeepCopy()) == nil {
		require.True(t, time.Now().Before(deadline), "the stack deleted")
		time.Sleep(100 * time.Millisecond)
	}

	upgrade := func(version string) {
		t.Helper()
		require.NoError(t, cluster.Client.Get(ctx, client.ObjectKeyFromObject(ce), ce))
		require.NoError(t, unstructured.SetNestedField(ce.Object, version, "spec", "source", "catalog", "version"))
		// Across majors without a bridge: the admin vouches for the hop.
		require.NoError(t, unstructured.SetNestedField(ce.Object, "SelfCertified", "spec", "source", "catalog", "upgradeConstraintPolicy"))
		require.NoError(t, cluster.Client.Update(ctx, ce))
	}
	upgrade("2.1.0")
	deadline = time.Now().Add(installTimeout)
	for installedVersionOf(ce) != "2.1.0" {
		require.True(t, time.Now().Before(deadline), "the upgrade to 2.1.0: %v", mustConditions(t, ce))
		time.Sleep(200 * time.Millisecond)
		require.NoError(t, cluster.Client.Get(ctx, client.ObjectKeyFromObject(ce), ce))
	}
	ext, err := apiextensionsclient.NewForConfig(cluster.Config)
	require.NoError(t, err)
	crd, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crdName, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, []string{"v1alpha1", "v1alpha2"}, crd.Status.StoredVersions, "2.1.0 stores v1alpha2; nothing migrated, v1alpha1 is still listed")

	// Too early: nothing migrated the stack (SelfCertified skips the
	// catalog's edges, not OLM's CRD upgrade-safety preflight). OLM v1 does not install 2.2.0.
	upgrade("2.2.0")
	var refusal string
	deadline = time.Now().Add(installTimeout)
	for refusal == "" {
		require.True(t, time.Now().Before(deadline), "OLM reports the refused upgrade: %v", mustConditions(t, ce))
		time.Sleep(200 * time.Millisecond)
		require.NoError(t, cluster.Client.Get(ctx, client.ObjectKeyFromObject(ce), ce))
		for _, c := range mustConditions(t, ce) {
			if c.Type == olm.TypeProgressing && c.ObservedGeneration == ce.GetGeneration() && strings.Contains(c.Message, "v1alpha1") {
				refusal = c.Message
			}
		}
	}
	t.Logf("OLM v1 refuses the upgrade to 2.2.0: %s", refusal)
	require.Equal(t, "2.1.0", installedVersionOf(ce), "2.2.0 is not installed")
	crd, err = ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crdName, metav1.GetOptions{})
	require.NoError(t, err)
	served := map[string]bool{}
	for _, v := range crd.Spec.Versions {
		served[v.Name] = v.Served
	}
	require.Equal(t, map[string]bool{"v1alpha1": true, "v1alpha2": true}, served, "the CRD still serves v1alpha1")
	require.Equal(t, []string{"v1alpha1", "v1alpha2"}, crd.Status.StoredVersions)

	// Step 3, the migration (the webhook's --migrate; nothing to rewrite
	// here), trims storedVersions; then OLM installs 2.2.0.
	dyn, err := dynamic.NewForConfig(cluster.Config)
	require.NoError(t, err)
	m, err := conversion.Migrate(ctx, dyn, ext, crdName)
	require.NoError(t, err)
	require.Equal(t, "v1alpha2", m.Storage)
	require.NoError(t, cluster.Client.Get(ctx, client.ObjectKeyFromObject(ce), ce))
	ce.SetAnnotations(map[string]string{"e2e/migrated": "1"}) // OLM reconciles the extension again
	require.NoError(t, cluster.Client.Update(ctx, ce))
	deadline = time.Now().Add(installTimeout)
	for installedVersionOf(ce) != "2.2.0" {
		require.True(t, time.Now().Before(deadline), "the upgrade to 2.2.0 after the migration: %v", mustConditions(t, ce))
		time.Sleep(200 * time.Millisecond)
		require.NoError(t, cluster.Client.Get(ctx, client.ObjectKeyFromObject(ce), ce))
	}
	crd, err = ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crdName, metav1.GetOptions{})
	require.NoError(t, err)
	require.Len(t, crd.Spec.Versions, 1, "2.2.0 serves v1alpha2 alone")
	require.Equal(t, []string{"v1alpha2"}, crd.Status.StoredVersions)
}
