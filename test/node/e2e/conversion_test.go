//go:build e2e

package e2e_test

import (
	"context"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/blang/semver/v4"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/inferencestack/inferencestack/internal/bundle"
	"github.com/inferencestack/inferencestack/internal/release"
	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/conversion"
	"github.com/inferencestack/inferencestack/test/olm"
	"github.com/inferencestack/inferencestack/test/testenv"
)

// TestConversionWebhookOnTheNode is the API version move end to end, with
// OLM v1 and a real node. The CRD package at 1.0.0 (v1alpha1 alone) and
// operator majors 1 and 2 (both reading v1alpha1) are installed by OLM;
// the package is upgraded to 2.0.0, which serves v1alpha1 and v1alpha2 (as
// bundlegen packages it): its conversion webhook runs as the pod of its
// Deployment under the restricted Pod Security Standard, makes its
// certificate, writes the CRD's caBundle, and the API server converts
// through its Service: an InferenceStack written through v1alpha2 reads back
// through v1alpha1 (stored) and v1alpha2 the same and is reconciled by
// major 2, one written through v1alpha1 by major 1. Then the webhook is
// stopped and comes back (webhookDown), the package moves its storage to
// v1alpha2 and the migration runs (storageMoved), and the webhook is
// stopped again: now the operators' reads need it, both report it, and a
// change made meanwhile is reconciled once it is back. (OLM's refusal of a
// too-early removal of v1alpha1: test/olm/e2e/storedversions_test.go.)
func TestConversionWebhookOnTheNode(t *testing.T) {
	dumpLogsOnFailure(t)
	ctx := context.Background()

	bin := filepath.Join(t.TempDir(), "manager")
	require.NoError(t, testenv.BuildStatic("./operator/cmd", bin))
	in, err := release.LoadInput(filepath.Join(root, "channels", "releases", "2.0.0.yaml"))
	require.NoError(t, err)
	digests := map[string]string{}
	// The webhook of each test release runs its operator image (a tag per
	// version, the same binary).
	for _, v := range []string{"1.0.0", "2.0.0", "2.1.0"} {
		ref := strings.Replace(in.OperatorImage, ":v2.0.0", ":v"+v, 1)
		digests[ref] = digestOf(pushOperator(t, bin, ref))
	}

	// 1.0.0 serves v1alpha1 alone; 2.0.0 serves both versions and stores
	// v1alpha1; 2.1.0 stores v1alpha2 (steps 1 and 2 of the storage move,
	// docs/api-versions.md). The operators of 1.0.0 and 2.0.0 read v1alpha1.
	dir := t.TempDir()
	catalogDir, err := olm.Release{
		Root:     root,
		Dir:      dir,
		Versions: map[string][]string{bundle.PackageCRDs: {"1.0.0", "2.0.0", "2.1.0"}, bundle.PackageOperator: {"1.0.0", "2.0.0"}},
		Digests:  digests,
		Edit: func(in *release.Input) {
			switch in.Version {
			case "1.0.0":
				in.API = release.APIVersions{Reads: "v1alpha1", Served: []string{"v1alpha1"}, Storage: "v1alpha1"}
			case "2.0.0":
				in.API = release.APIVersions{Reads: "v1alpha1", Served: []string{"v1alpha1", "v1alpha2"}, Storage: "v1alpha1"}
			case "2.1.0":
				in.API = release.APIVersions{Reads: "v1alpha1", Served: []string{"v1alpha1", "v1alpha2"}, Storage: "v1alpha2"}
			}
		},
	}.Run(ctx)
	require.NoError(t, err)
	catalogRef, err := cluster.PushRelease(ctx, filepath.Join(dir, "bundle"), catalogDir, "conversion-catalog")
	require.NoError(t, err)

	objs, catalog, crds, operators := olmSamples(t)
	require.NoError(t, unstructured.SetNestedField(catalog.Object, catalogRef, "spec", "source", "image", "ref"))
	ns, _, _ := unstructured.NestedString(crds.Object, "spec", "namespace")
	require.Equal(t, bundle.ConversionNamespace, ns, "the sample installs where the CRD package's webhook must run")
	require.NoError(t, unstructured.SetNestedField(crds.Object, "1.0.0", "spec", "source", "catalog", "version"))
	apply(t, objs...)
	_, err = cluster.WaitCondition(ctx, catalog, olm.TypeServing, serveTimeout)
	require.NoError(t, err)
	// The CRD package with one version, and both operator majors beside it.
	for _, ce := range append([]*unstructured.Unstructured{crds}, operators...) {
		_, err = cluster.WaitCondition(ctx, ce, olm.TypeInstalled, installTimeout)
		require.NoError(t, err)
	}
	ext, err := apiextensionsclient.NewForConfig(node.Env.Config)
	require.NoError(t, err)
	crd, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "inferencestacks.inferencestack.io", metav1.GetOptions{})
	require.NoError(t, err)
	require.Len(t, crd.Spec.Versions, 1, "CRD package 1.0.0 serves v1alpha1 alone")
	// The CRD package upgraded to serve both.
	upgradeCRDs(t, crds, "2.0.0")

	pod := webhookPod(t)
	t.Logf("conversion webhook pod %s Ready", pod.Name)

	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	require.NoError(t, v1alpha2.AddToScheme(scheme))
	c, err := client.New(node.Env.Config, client.Options{Scheme: scheme})
	require.NoError(t, err)

	// Through v1alpha2, for major 2; through v1alpha1 (below), unlabelled,
	// which major 1 takes. (Its PostgreSQL is the user's, named by a Secret:
	// no volume claim that this node without a provisioner would keep.)
	pg := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: bundle.ConversionNamespace, Name: "pg"},
		StringData: map[string]string{"uri": "postgresql://llama@pg:5432/llama"}}
	require.NoError(t, node.Env.Client.Create(ctx, pg))
	t.Cleanup(func() { _ = node.Env.Client.Delete(context.Background(), pg) })
	var made v1alpha2.InferenceStack
	require.NoError(t, yaml.UnmarshalStrict([]byte(`{metadata: {namespace: `+bundle.ConversionNamespace+`, name: through-v2, labels: {inferencestack.io/operator-major: "2"}}, spec: {distribution: {name: starter},
		storage: {kv: {type: redis, endpoint: "redis:6379"}, sql: {type: postgres, connectionString: {name: pg, key: uri}}},
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
	// Deleted, and let go by its operator, before the later cleanups
	// uninstall the operators and the webhook.
	t.Cleanup(func() {
		deleteStack(t, &v1alpha1.InferenceStack{ObjectMeta: metav1.ObjectMeta{Namespace: made.Namespace, Name: made.Name}})
	})

	var asV1 v1alpha1.InferenceStack
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(&made), &asV1))
	require.Equal(t, ptr.To(int32(70)), asV1.Spec.Workload.Autoscaling.TargetCPUUtilizationPercentage)
	require.Contains(t, asV1.Annotations[v1alpha2.MetricsAnnotation], "memory")
	var asV2 v1alpha2.InferenceStack
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(&made), &asV2))
	require.Equal(t, made.Spec, asV2.Spec, "stored as v1alpha1, read through v1alpha2: nothing lost")

	restrictedNamespace(t, "through-v1")
	viaV1 := &v1alpha1.InferenceStack{
		ObjectMeta: metav1.ObjectMeta{Namespace: "through-v1", Name: "through-v1"},
		Spec: v1alpha1.InferenceStackSpec{Distribution: v1alpha1.DistributionSpec{Name: "starter"},
			Workload: &v1alpha1.WorkloadSpec{Replicas: ptr.To(int32(0))}},
	}
	require.NoError(t, c.Create(ctx, viaV1))
	t.Cleanup(func() { deleteStack(t, viaV1) })
	reconciledBy(t, c, viaV1.Namespace, viaV1.Name, "1")
	// The test's 1.0.0 and 2.0.0 are the newest release's input renamed
	// (olm.Release with Versions), so they pin its line's server images,
	// which this node's registry does not hold: through-v2's server pod
	// (autoscaled, one replica at least) cannot pull its image, and the
	// operator says so (Degraded, ImagePullFailed) once the kubelet has
	// tried, which came before this check in one run of six. That is the
	// kubelet's answer, not a conversion's.
	reconciledBy(t, c, made.Namespace, made.Name, "2", v1alpha2.ReasonImagePullFailed)

	// The webhook down while v1alpha1 is stored: reads through v1alpha2
	// fail; the operators read the stored version and need no conversion.
	webhookDown(t, c, client.ObjectKeyFromObject(&made), &v1alpha2.InferenceStack{}, &v1alpha1.InferenceStackList{}, func() {})
	var back v1alpha2.InferenceStack
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(&made), &back))
	require.Equal(t, made.Spec, back.Spec, "read through v1alpha2 once the webhook is back: what was written")

	storageMoved(t, c, crds, &made)

	// The webhook down after the migration: both stacks are stored as
	// v1alpha2 and every read of the operators (v1alpha1) needs it. Both
	// operators say so; a change made meanwhile through v1alpha2 (the
	// stored version: the write needs no conversion) is reconciled by
	// major 1 once the webhook is back.
	webhookDown(t, c, client.ObjectKeyFromObject(&made), &v1alpha1.InferenceStack{}, &v1alpha2.InferenceStackList{}, func() {
		require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
			var s v1alpha2.InferenceStack
			if err := c.Get(ctx, client.ObjectKeyFromObject(viaV1), &s); err != nil {
				return err
			}
			s.Spec.Workload = &v1alpha2.WorkloadSpec{Env: []corev1.EnvVar{{Name: "CHANGED_WHILE_DOWN", Value: "1"}}}
			return c.Update(ctx, &s)
		}))
		for _, ns := range []string{"inferencestack-system", "inferencestack-system-v2"} {
			op := operatorPod(t, ns, map[string]string{"app.kubernetes.io/name": "inferencestack-operator"})
			waitLog(t, ns, op.Name, "manager", "the conversion webhook of the inferencestack-crds package is down or unreachable")
		}
	})
	gen := reconciledBy(t, c, viaV1.Namespace, viaV1.Name, "1")
	require.Equal(t, int64(2), gen, "the change made while the webhook was down is the stack's second generation")
	for _, ns := range []string{"inferencestack-system", "inferencestack-system-v2"} {
		op := operatorPod(t, ns, map[string]string{"app.kubernetes.io/name": "inferencestack-operator"})
		waitLog(t, ns, op.Name, "manager", "reads of InferenceStacks work again")
	}
}

// reconciledBy waits until the stack (read through v1alpha1) is the
// operator major's (labelled so, or unlabelled with a status that names a
// release of the major, which takes unlabelled stacks) and has a status of
// its current generation that is not Degraded, with its server Deployment made and owned by it, and returns
// the generation. (Right after the CRD package's upgrade, the API server's
// owner-reference admission may not map the stack's version for a while,
// its discovery not yet refreshed: the operator's writes fail, it says so
// in the status (Degraded, ApplyFailed) and retries.) A stack Degraded for
// one of the reasons tolerated counts as not Degraded.
func reconciledBy(t *testing.T, c client.Client, ns, name, major string, tolerated ...string) int64 {
	t.Helper()
	ctx := context.Background()
	var s v1alpha1.InferenceStack
	var dep appsv1.Deployment
	deadline := time.Now().Add(installTimeout)
	for {
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &s); err == nil && majorOf(&s) == major &&
			s.Status.Phase != "" && s.Status.ObservedGeneration == s.Generation &&
			!degraded(&s, tolerated) &&
			c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &dep) == nil {
			break
		}
		require.True(t, time.Now().Before(deadline), "stack %s/%s reconciled by major %s: %+v", ns, name, major, s.Status)
		time.Sleep(250 * time.Millisecond)
	}
	require.Equal(t, s.UID, metav1.GetControllerOf(&dep).UID, "the server Deployment is the stack's")
	t.Logf("stack %s/%s (generation %d) reconciled by major %s: phase %s", ns, name, s.Generation, major, s.Status.Phase)
	return s.Generation
}

// degraded reports whether s is Degraded for a reason other than those
// tolerated.
func degraded(s *v1alpha1.InferenceStack, tolerated []string) bool {
	c := meta.FindStatusCondition(s.Status.Conditions, v1alpha2.TypeDegraded)
	return c != nil && c.Status == metav1.ConditionTrue && !slices.Contains(tolerated, c.Reason)
}

// majorOf is the major that reconciles s: its label's, or for an
// unlabelled stack the major of the release its status names.
func majorOf(s *v1alpha1.InferenceStack) string {
	if major, ok := s.Labels[v1alpha2.LabelOperatorMajor]; ok {
		return major
	}
	if rd := s.Status.ResolvedDistribution; rd != nil {
		if v, err := semver.ParseTolerant(rd.OperatorVersion); err == nil {
			return strconv.FormatUint(v.Major, 10)
		}
	}
	return ""
}

// webhookPod waits until the conversion webhook's Deployment rolled out
// (a CRD package upgrade brings a new image) and returns its one pod, Ready.
func webhookPod(t *testing.T) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	var dep appsv1.Deployment
	var ready []corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, installTimeout, true, func(ctx context.Context) (bool, error) {
		if err := node.Env.Client.Get(ctx, client.ObjectKey{Namespace: bundle.ConversionNamespace, Name: bundle.ConversionName}, &dep); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		want, st := ptr.Deref(dep.Spec.Replicas, 1), dep.Status
		if st.ObservedGeneration != dep.Generation || st.Replicas != want || st.UpdatedReplicas != want || st.AvailableReplicas != want {
			return false, nil
		}
		var pods corev1.PodList
		if err := node.Env.Client.List(ctx, &pods, client.InNamespace(dep.Namespace), client.MatchingLabels(dep.Spec.Selector.MatchLabels)); err != nil {
			return false, err
		}
		ready = slices.DeleteFunc(pods.Items, func(p corev1.Pod) bool { return p.DeletionTimestamp != nil || !podReady(&p) })
		return len(ready) == 1, nil
	})
	require.NoError(t, err, "the conversion webhook's Deployment rolled out, one pod Ready: %+v\nevents:\n%s", dep.Status, events(t, bundle.ConversionNamespace, ""))
	return &ready[0]
}

// webhookDown stops the webhook's process (SIGSTOP: it hangs, as a webhook
// that stopped answering does): a read of key through nonStored, which
// needs a conversion, fails with the API server's conversion error; a list
// through the stored version works and nothing is deleted; whileDown runs.
// Then the process is killed (if the kubelet's liveness probe has not yet)
// and the kubelet restarts the container: reads through nonStored work
// again.
func webhookDown(t *testing.T, c client.Client, key client.ObjectKey, nonStored client.Object, storedList client.ObjectList, whileDown func()) {
	ctx := context.Background()
	pod := webhookPod(t)
	i := slices.IndexFunc(pod.Status.ContainerStatuses, func(s corev1.ContainerStatus) bool { return s.Name == "webhook" })
	require.GreaterOrEqual(t, i, 0, "the webhook container's status")
	id, restarts := pod.Status.ContainerStatuses[i].ContainerID, pod.Status.ContainerStatuses[i].RestartCount
	stopped, err := node.SignalContainer(id, syscall.SIGSTOP)
	require.NoError(t, err)
	require.Positive(t, stopped)
	t.Cleanup(func() { _, _ = node.SignalContainer(id, syscall.SIGCONT) })

	var downErr error
	deadline := time.Now().Add(2 * time.Minute)
	for downErr == nil {
		require.True(t, time.Now().Before(deadline), "reads through %s still work with the webhook stopped", nonStored.GetObjectKind().GroupVersionKind().Version)
		downErr = c.Get(ctx, key, nonStored.DeepCopyObject().(client.Object))
	}
	t.Logf("the webhook stopped, a read through the version not stored says: %v", downErr)
	require.ErrorContains(t, downErr, "conversion webhook for inferencestack.io/")
	require.ErrorContains(t, downErr, "Kind=InferenceStack failed")
	require.NoError(t, c.List(ctx, storedList, client.InNamespace(key.Namespace)), "lists through the stored version need no conversion")
	require.Equal(t, 1, meta.LenList(storedList), "nothing deleted")
	whileDown()

	// A SIGKILL to a stopped process (the kubelet's may have come first).
	_, _ = node.KillContainer(id)
	waitPod(t, pod.Namespace, pod.Name, podTimeout, func(p *corev1.Pod) bool {
		i := slices.IndexFunc(p.Status.ContainerStatuses, func(s corev1.ContainerStatus) bool { return s.Name == "webhook" })
		return i >= 0 && p.Status.ContainerStatuses[i].RestartCount > restarts && podReady(p)
	})
	deadline = time.Now().Add(2 * time.Minute)
	for {
		err := c.Get(ctx, key, nonStored.DeepCopyObject().(client.Object))
		if err == nil {
			break
		}
		require.True(t, time.Now().Before(deadline), "reads through the version not stored work again once the webhook is back: %v", err)
		time.Sleep(250 * time.Millisecond)
	}
}

// waitLog waits until the log of container in pod ns/name has line.
func waitLog(t *testing.T, ns, name, container, line string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, 2*time.Minute, true, func(context.Context) (bool, error) {
		return strings.Contains(node.PodLogs(ns, name)[container], line), nil
	})
	require.NoError(t, err, "%s/%s's %s log says %q; its last lines:\n%s", ns, name, container, line, testenv.LastLines(node.PodLogs(ns, name)[container], 20))
}

// storageMoved: the CRD package moves to 2.1.0 (v1alpha2 stored):
// status.storedVersions lists both until the migration (the webhook's
// `--migrate`, here its code in the test process) rewrites every object
// through v1alpha2 and trims it to [v1alpha2]; the stack reads the same
// through both versions after it.
func storageMoved(t *testing.T, c client.Client, crds *unstructured.Unstructured, made *v1alpha2.InferenceStack) {
	ctx := context.Background()
	upgradeCRDs(t, crds, "2.1.0")
	ext, err := apiextensionsclient.NewForConfig(node.Env.Config)
	require.NoError(t, err)
	var crd *apiextensionsv1.CustomResourceDefinition
	deadline := time.Now().Add(installTimeout)
	for {
		crd, err = ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "inferencestacks.inferencestack.io", metav1.GetOptions{})
		require.NoError(t, err)
		if conversion.StorageVersion(crd) == "v1alpha2" {
			break
		}
		require.True(t, time.Now().Before(deadline), "the CRD package 2.1.0 (v1alpha2 stored) installed: %v", crd.Spec.Versions)
		time.Sleep(250 * time.Millisecond)
	}
	require.Equal(t, []string{"v1alpha1", "v1alpha2"}, crd.Status.StoredVersions, "the stack is still stored as v1alpha1")
	// The package's upgrade rolls the webhook out (its 2.1.0 image); the
	// API server remade its caches of the stacks for the new storage
	// version, converting through it.
	webhookPod(t)
	deadline = time.Now().Add(2 * time.Minute)
	for {
		err := c.Get(ctx, client.ObjectKeyFromObject(made), &v1alpha2.InferenceStack{})
		if err == nil {
			break
		}
		require.True(t, time.Now().Before(deadline), "reads through v1alpha2 after the CRD package's upgrade: %v", err)
		time.Sleep(250 * time.Millisecond)
	}

	dyn, err := dynamic.NewForConfig(node.Env.Config)
	require.NoError(t, err)
	m, err := conversion.Migrate(ctx, dyn, ext, crd.Name)
	require.NoError(t, err)
	t.Logf("migration: %d object(s) rewritten through %s, storedVersions %v -> [%s]", m.Rewritten, m.Storage, m.Before, m.Storage)
	require.Equal(t, "v1alpha2", m.Storage)
	require.GreaterOrEqual(t, m.Rewritten, 1)
	crd, err = ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, []string{"v1alpha2"}, crd.Status.StoredVersions)

	var asV2 v1alpha2.InferenceStack
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(made), &asV2))
	require.Equal(t, made.Spec, asV2.Spec, "stored as v1alpha2 now: nothing lost")
	var asV1 v1alpha1.InferenceStack
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(made), &asV1))
	require.Equal(t, ptr.To(int32(70)), asV1.Spec.Workload.Autoscaling.TargetCPUUtilizationPercentage)
}
