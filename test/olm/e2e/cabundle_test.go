//go:build e2e

package e2e_test

import (
	"context"
	"encoding/base64"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/inferencestack/inferencestack/internal/bundle"
	"github.com/inferencestack/inferencestack/internal/release"
	"github.com/inferencestack/inferencestack/operator/conversion"
	"github.com/inferencestack/inferencestack/test/olm"
	"github.com/inferencestack/inferencestack/test/testenv"
)

// TestCABundleSurvivesOLM is the question the conversion webhook's design
// rests on (docs/api-versions.md): OLM v1 (operator-controller v1.5.1)
// manages the CRD of the inferencestack-crds package; does a field of the
// CRD that the bundle does not set, written by someone else (the webhook's
// caBundle), survive OLM's reconciles and an upgrade of the package, while a
// field the bundle sets is OLM's? The CRD gets a webhook conversion with a
// caBundle as the webhook would write it; the package is then upgraded
// (1.0.0 -> 2.0.0, a helm upgrade in operator-controller).
func TestCABundleSurvivesOLM(t *testing.T) {
	dumpLogsOnFailure(t)
	ctx := context.Background()
	testRelease(t)
	const ns = "e2e-cabundle"
	apply(t, installer(t, ns, "cabundle")...)
	ce := extension(t, bundle.PackageCRDs, "cabundle", ns, "1.0.0", "e2e")
	apply(t, ce)
	_, err := cluster.WaitCondition(ctx, ce, olm.TypeInstalled, installTimeout)
	require.NoError(t, err)

	// What the conversion webhook writes (the strategy and Service would come
	// from the bundle; here they are written too, as the 1.x bundle has none).
	cert, err := testenv.NewServingCert("inferencestack-conversion-ca", []string{"inferencestack-conversion." + ns + ".svc"})
	require.NoError(t, err)
	caBundle := base64.StdEncoding.EncodeToString(cert.CA)
	patch := `{"spec":{"conversion":{"strategy":"Webhook","webhook":{"conversionReviewVersions":["v1"],` +
		`"clientConfig":{"caBundle":"` + caBundle + `","service":{"namespace":"` + ns + `","name":"inferencestack-conversion","path":"/convert","port":443}}}}}}`
	crd := &unstructured.Unstructured{}
	crd.SetAPIVersion("apiextensions.k8s.io/v1")
	crd.SetKind("CustomResourceDefinition")
	crd.SetName(crdName)
	require.NoError(t, cluster.Client.Patch(ctx, crd, client.RawPatch(types.MergePatchType, []byte(patch)), client.FieldOwner("inferencestack-conversion")))
	// A field the bundle sets, changed by someone else.
	require.NoError(t, cluster.Client.Patch(ctx, crd, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"names":{"shortNames":["changed"]}}}`))))

	caBundleOf := func() (string, []any) {
		got := &unstructured.Unstructured{}
		got.SetAPIVersion("apiextensions.k8s.io/v1")
		got.SetKind("CustomResourceDefinition")
		require.NoError(t, cluster.Client.Get(ctx, client.ObjectKey{Name: crdName}, got))
		ca, _, _ := unstructured.NestedString(got.Object, "spec", "conversion", "webhook", "clientConfig", "caBundle")
		short, _, _ := unstructured.NestedSlice(got.Object, "spec", "names", "shortNames")
		return ca, short
	}

	// The upgrade: operator-controller renders and applies the 2.0.0 bundle.
	require.NoError(t, cluster.Client.Get(ctx, client.ObjectKeyFromObject(ce), ce))
	require.NoError(t, unstructured.SetNestedField(ce.Object, "2.0.0", "spec", "source", "catalog", "version"))
	require.NoError(t, cluster.Client.Update(ctx, ce))
	deadline := time.Now().Add(installTimeout)
	for installedVersionOf(ce) != "2.0.0" {
		require.True(t, time.Now().Before(deadline), "the upgrade to 2.0.0")
		time.Sleep(200 * time.Millisecond)
		require.NoError(t, cluster.Client.Get(ctx, client.ObjectKeyFromObject(ce), ce))
	}
	ca, short := caBundleOf()
	t.Logf("after the upgrade: caBundle kept: %v; shortNames: %v", ca == caBundle, short)
	require.Equal(t, caBundle, ca, "the caBundle the bundle does not set survives OLM's upgrade")
	require.Equal(t, []any{"istack"}, short, "a field the bundle sets is OLM's: put back")
}

// TestCRDPackageWithConversionInstalls: a CRD package release that serves
// v1alpha1 and v1alpha2 (a test release 2.0.0 whose input says so) installs
// on the real OLM v1 as bundlegen packages it: the CRD serves both and
// converts through the webhook's Service in ConversionNamespace, the
// webhook's Deployment and Service are installed beside it, and the
// caBundle the webhook then writes (here the webhook runs out of cluster:
// no kubelet) is kept by OLM.
func TestCRDPackageWithConversionInstalls(t *testing.T) {
	dumpLogsOnFailure(t)
	ctx := context.Background()
	dir := t.TempDir()
	catalogDir, err := olm.Release{
		Root: root,
		Dir:  dir,
		Versions: map[string][]string{
			bundle.PackageCRDs:     {"1.0.0", "2.0.0"},
			bundle.PackageOperator: {"1.0.0"},
		},
		Edit: func(in *release.Input) {
			if in.Version == "2.0.0" {
				in.API = release.APIVersions{Reads: "v1alpha1", Served: []string{"v1alpha1", "v1alpha2"}, Storage: "v1alpha1"}
			}
		},
	}.Run(ctx)
	require.NoError(t, err)
	serveCatalog(t, "conversion", "conversion-catalog", filepath.Join(dir, "bundle"), catalogDir)

	ns := bundle.ConversionNamespace
	apply(t, installer(t, ns, "crds-conversion")...)
	ce := extension(t, bundle.PackageCRDs, "crds-conversion", ns, "1.0.0", "conversion")
	apply(t, ce)
	_, err = cluster.WaitCondition(ctx, ce, olm.TypeInstalled, installTimeout)
	require.NoError(t, err)

	require.NoError(t, cluster.Client.Get(ctx, client.ObjectKeyFromObject(ce), ce))
	require.NoError(t, unstructured.SetNestedField(ce.Object, "2.0.0", "spec", "source", "catalog", "version"))
	require.NoError(t, cluster.Client.Update(ctx, ce))
	deadline := time.Now().Add(installTimeout)
	for installedVersionOf(ce) != "2.0.0" {
		require.True(t, time.Now().Before(deadline), "the upgrade to 2.0.0: %v", mustConditions(t, ce))
		time.Sleep(200 * time.Millisecond)
		require.NoError(t, cluster.Client.Get(ctx, client.ObjectKeyFromObject(ce), ce))
	}

	ext, err := apiextensionsclient.NewForConfig(cluster.Config)
	require.NoError(t, err)
	crd, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crdName, metav1.GetOptions{})
	require.NoError(t, err)
	served := map[string]bool{}
	for _, v := range crd.Spec.Versions {
		served[v.Name] = v.Served
	}
	require.Equal(t, map[string]bool{"v1alpha1": true, "v1alpha2": true}, served)
	require.Equal(t, apiextensionsv1.WebhookConverter, crd.Spec.Conversion.Strategy)
	require.Equal(t, ns, crd.Spec.Conversion.Webhook.ClientConfig.Service.Namespace)
	for _, obj := range []client.Object{&appsv1.Deployment{}, &corev1.Service{}} {
		require.NoError(t, cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: bundle.ConversionName}, obj), "%T installed", obj)
	}

	// The webhook (out of cluster, as the namespace's ServiceAccount would
	// run it in) makes its certificate and writes the CRD's caBundle.
	core, err := kubernetes.NewForConfig(cluster.Config)
	require.NoError(t, err)
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s := &conversion.Server{Core: core, Extensions: ext, Namespace: ns, Service: bundle.ConversionName, SecretName: "inferencestack-conversion-tls",
		CRDName: crdName, Addr: "127.0.0.1:0", Validity: time.Hour, CheckInterval: 200 * time.Millisecond, Log: testr.New(t)}
	done := make(chan error, 1)
	go func() { done <- s.Run(sctx) }()
	var ca []byte
	deadline = time.Now().Add(time.Minute)
	for len(ca) == 0 {
		require.True(t, time.Now().Before(deadline), "the webhook writes the caBundle")
		time.Sleep(100 * time.Millisecond)
		crd, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crdName, metav1.GetOptions{})
		require.NoError(t, err)
		ca = crd.Spec.Conversion.Webhook.ClientConfig.CABundle
	}
	cancel()
	require.NoError(t, <-done)

	// OLM reconciles its extension again (a label on the ClusterExtension is
	// a new generation of nothing; the watch on the CRD fired already): the
	// caBundle stays.
	require.NoError(t, cluster.Client.Get(ctx, client.ObjectKeyFromObject(ce), ce))
	ce.SetAnnotations(map[string]string{"e2e/touch": "1"})
	require.NoError(t, cluster.Client.Update(ctx, ce))
	_, err = cluster.WaitCondition(ctx, ce, olm.TypeInstalled, installTimeout)
	require.NoError(t, err)
	crd, err = ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crdName, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, ca, crd.Spec.Conversion.Webhook.ClientConfig.CABundle, "OLM keeps the caBundle the webhook wrote")
	require.Equal(t, apiextensionsv1.WebhookConverter, crd.Spec.Conversion.Strategy)
}
