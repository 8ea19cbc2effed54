package main_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"

	"github.com/inferencestack/inferencestack/test/local"
	"github.com/inferencestack/inferencestack/test/testenv"
)

// TestUnservedVersionIsReportedNotCrashed: on a cluster whose CRD package
// does not serve the InferenceStack version the operator reads (v1alpha1),
// the operator keeps running, says so in its log and in the metric
// inferencestack_operator_api_served, and starts reconciling once a CRD
// that serves it is installed.
func TestUnservedVersionIsReportedNotCrashed(t *testing.T) {
	ctx := context.Background()
	crds, err := apiextensionsclient.NewForConfig(env.Config)
	require.NoError(t, err)
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	require.NoError(t, err)
	serve := func(v1alpha1 bool) {
		t.Helper()
		crd, err := crds.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "inferencestacks.inferencestack.io", metav1.GetOptions{})
		require.NoError(t, err)
		for i := range crd.Spec.Versions {
			v := &crd.Spec.Versions[i]
			v.Served = (v.Name == "v1alpha1") == v1alpha1
		}
		_, err = crds.ApiextensionsV1().CustomResourceDefinitions().Update(ctx, crd, metav1.UpdateOptions{})
		require.NoError(t, err)
		waitFor(t, "discovery to follow the CRD", func() bool {
			_, err := dc.ServerResourcesForGroupVersion("inferencestack.io/v1alpha1")
			return (err == nil) == v1alpha1
		})
	}
	// A CRD package that serves only v1alpha2 (the conversion strategy is
	// None here: no object exists while it is so).
	serve(false)
	t.Cleanup(func() { serve(true) })

	const ns, sa = "api-check", "operator-9"
	createObject(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	kubeconfig := operatorAccount(t, ns, sa)
	op, err := local.StartOperator(buildOperator(t), kubeconfig, filepath.Join(t.TempDir(), "operator.log"), local.DemoPin("9.0.0"),
		"--api-check-interval=100ms", "--take-unlabeled-stacks=false")
	require.NoError(t, err)
	t.Cleanup(func() {
		op.Stop(10 * time.Second)
		if t.Failed() {
			t.Logf("---- operator log ----\n%s", testenv.LastLines(op.Log(), 40))
		}
	})

	const unserved = `inferencestack_operator_api_served{group_version="inferencestack.io/v1alpha1"} 0`
	waitFor(t, "the operator to report v1alpha1 unserved", func() bool {
		return strings.Contains(op.Log(), "the InferenceStack version this operator reads is not served") &&
			strings.Contains(op.Log(), "install or upgrade the inferencestack-crds package") &&
			strings.Contains(metricsText(t, op), unserved)
	})
	require.Equal(t, 1, strings.Count(op.Log(), "is not served"), "one line while the cause stays the same")

	serve(true)
	waitFor(t, "the operator to see v1alpha1 served", func() bool {
		return strings.Contains(metricsText(t, op), `inferencestack_operator_api_served{group_version="inferencestack.io/v1alpha1"} 1`)
	})
	s := createStack(t, "api-check-stack", "9")
	waitDeploying(t, s)
	require.False(t, op.Exited(), "the operator never exited")
	require.NotContains(t, op.Log(), "no matches for kind")
}
