//go:build e2e

package e2e_test

import (
	"context"
	"maps"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/inferencestack/inferencestack/internal/bundle"
	"github.com/inferencestack/inferencestack/internal/image"
	"github.com/inferencestack/inferencestack/internal/release"
	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/test/olm"
	"github.com/inferencestack/inferencestack/test/testenv"
)

// TestConversionWebhookOnTheNode: a CRD package release that serves
// v1alpha1 and v1alpha2 (a test release 2.0.0 whose input says so), as
// bundlegen packages it and OLM v1 installs it: the conversion webhook runs
// as the pod of its Deployment under the restricted Pod Security Standard,
// makes its certificate, writes the CRD's caBundle, and the API server
// converts through its Service: an InferenceStack written through v1alpha2
// reads back through v1alpha1 (stored) and v1alpha2 the same.
func TestConversionWebhookOnTheNode(t *testing.T) {
	dumpLogsOnFailure(t)
	ctx := context.Background()

	bin := filepath.Join(t.TempDir(), "manager")
	require.NoError(t, testenv.BuildStatic("./operator/cmd", bin))
	in, err := release.LoadInput(filepath.Join(root, "channels", "releases", "2.0.0.yaml"))
	require.NoError(t, err)
	pushed, err := node.PushBinary(ctx, bin, image.BinaryOptions{Path: image.OperatorPath}, in.OperatorImage)
	require.NoError(t, err)

	dir := t.TempDir()
	catalogDir, err := olm.Release{
		Root:     root,
		Dir:      dir,
		Versions: map[string][]string{bundle.PackageCRDs: {"1.0.0", "2.0.0"}, bundle.PackageOperator: {"1.0.0", "2.0.0"}},
		Digests:  map[string]string{in.OperatorImage: digestOf(pushed)},
		Edit: func(in *release.Input) {
			if in.Version != "2.0.0" {
				return
			}
			in.API = release.APIVersions{Reads: "v1alpha1", Served: []string{"v1alpha1", "v1alpha2"}, Storage: "v1alpha1"}
		},
	}.Run(ctx)
	require.NoError(t, err)
	catalogRef, err := cluster.PushRelease(ctx, filepath.Join(dir, "bundle"), catalogDir, "conversion-catalog")
	require.NoError(t, err)

	var objs []*unstructured.Unstructured
	for _, f := range []string{"clustercatalog.yaml", "namespace.yaml", "installer-rbac.yaml", "clusterextension-crds.yaml"} {
		o, err := olm.ReadObjects(filepath.Join(root, "operator", "config", "olm", f))
		require.NoError(t, err)
		objs = append(objs, o...)
	}
	var catalog, crds *unstructured.Unstructured
	for _, o := range objs {
		switch o.GetKind() {
		case "ClusterCatalog":
			catalog = o
			require.NoError(t, unstructured.SetNestedField(o.Object, catalogRef, "spec", "source", "image", "ref"))
		case "Namespace":
			require.Equal(t, bundle.ConversionNamespace, o.GetName(), "the sample installs where the CRD package's webhook must run")
			labels := o.GetLabels()
			if labels == nil {
				labels = map[string]string{}
			}
			maps.Copy(labels, enforceRestricted)
			o.SetLabels(labels)
		case "ClusterExtension":
			crds = o
			require.NoError(t, unstructured.SetNestedField(o.Object, "2.x", "spec", "source", "catalog", "version"))
		}
	}
	apply(t, objs...)
	_, err = cluster.WaitCondition(ctx, catalog, olm.TypeServing, serveTimeout)
	require.NoError(t, err)
	_, err = cluster.WaitCondition(ctx, crds, olm.TypeInstalled, installTimeout)
	require.NoError(t, err)

	pod := operatorPod(t, bundle.ConversionNamespace, map[string]string{"app.kubernetes.io/name": bundle.ConversionName})
	t.Logf("conversion webhook pod %s Ready", pod.Name)

	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	require.NoError(t, v1alpha2.AddToScheme(scheme))
	c, err := client.New(node.Env.Config, client.Options{Scheme: scheme})
	require.NoError(t, err)

	var made v1alpha2.InferenceStack
	require.NoError(t, yaml.UnmarshalStrict([]byte(`{metadata: {namespace: `+bundle.ConversionNamespace+`, name: through-v2}, spec: {distribution: {name: starter},
		cache: {enabled: true}, storage: {kv: {type: redis, endpoint: "redis:6379"}},
		scaling: {autoscaling: {maxReplicas: 3, metrics: [{resource: memory, averageUtilization: 60}, {resource: cpu, averageUtilization: 70}]}}}}`), &made))
	deadline := time.Now().Add(time.Minute)
	for {
		err := c.Create(ctx, &made)
		if err == nil {
			break
		}
		require.True(t, time.Now().Before(deadline), "the API server converts through the webhook's Service: %v\nwebhook log:\n%s",
			err, testenv.LastLines(node.PodLogs(bundle.ConversionNamespace, pod.Name)["webhook"], 30))
		time.Sleep(250 * time.Millisecond)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), &made) })

	var asV1 v1alpha1.InferenceStack
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(&made), &asV1))
	require.Equal(t, ptr.To(int32(70)), asV1.Spec.Workload.Autoscaling.TargetCPUUtilizationPercentage)
	require.Contains(t, asV1.Annotations[v1alpha2.MetricsAnnotation], "memory")
	var asV2 v1alpha2.InferenceStack
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(&made), &asV2))
	require.Equal(t, made.Spec, asV2.Spec, "stored as v1alpha1, read through v1alpha2: nothing lost")
}
