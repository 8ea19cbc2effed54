//go:build e2e

package nodee2e_test

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/inferencestack/inferencestack/internal/testenv"
	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	"github.com/inferencestack/inferencestack/operator/components"
	"github.com/inferencestack/inferencestack/operator/components/config"
	"github.com/inferencestack/inferencestack/operator/pin"
	"github.com/inferencestack/inferencestack/operator/runconfig"
	"github.com/inferencestack/inferencestack/tools/internal/bundle"
	"github.com/inferencestack/inferencestack/tools/internal/image"
	"github.com/inferencestack/inferencestack/tools/internal/nodetest"
	"github.com/inferencestack/inferencestack/tools/internal/olmtest"
	"github.com/inferencestack/inferencestack/tools/internal/release"
	"github.com/inferencestack/inferencestack/tools/internal/validate"
)

// Timeouts, measured at a few seconds each on 2 cores.
const (
	serveTimeout   = 90 * time.Second
	installTimeout = 2 * time.Minute
	podTimeout     = 2 * time.Minute
	deleteTimeout  = 2 * time.Minute
)

// TestOperatorRunsAsTheInstalledPod: the operator image is built from this
// commit (as `make image-operator` builds it) and pushed under the release's
// published name; the release is made again with that image's real digest;
// OLM v1 installs both packages from its catalog with the sample manifests;
// the operator then runs for real as the pod the CSV describes: pulled by
// containerd, in a namespace enforcing the restricted Pod Security Standard,
// as the ServiceAccount OLM made, reaching the API server in cluster
// through the `kubernetes` Service, holding its leader election Lease and
// reading the pin from its ConfigMap. Then one InferenceStack of every
// sample gets its pods scheduled to the node, and the kubelet tries to start
// them (the operand images are not in the test registry, so their pulls
// fail with "not found").
func TestOperatorRunsAsTheInstalledPod(t *testing.T) {
	dumpLogsOnFailure(t)
	ctx := context.Background()

	start := time.Now()
	bin := filepath.Join(t.TempDir(), "manager")
	require.NoError(t, testenv.BuildStatic("./operator/cmd", bin))
	digests := map[string]string{}
	files, err := filepath.Glob(filepath.Join(root, "channels", "releases", "*.yaml"))
	require.NoError(t, err)
	for _, f := range files {
		in, err := release.LoadInput(f)
		require.NoError(t, err)
		pushed, err := node.PushBinary(ctx, bin, image.BinaryOptions{Path: image.OperatorPath}, in.OperatorImage)
		require.NoError(t, err)
		digests[in.OperatorImage] = pushed[strings.LastIndex(pushed, "@")+1:]
		t.Logf("operator image of release %s: %s", in.Version, pushed)
	}
	t.Logf("operator built and pushed in %s", time.Since(start).Round(100*time.Millisecond))

	// The release as `make release` makes it, with the built image's digest.
	dir := t.TempDir()
	catalogDir, err := olmtest.Release{Root: root, Dir: dir, Digests: digests}.Run(ctx)
	require.NoError(t, err)
	catalogRef, err := cluster.PushRelease(ctx, filepath.Join(dir, "bundle"), catalogDir, "catalog")
	require.NoError(t, err)

	var objs []*unstructured.Unstructured
	for _, f := range []string{"clustercatalog.yaml", "namespace.yaml", "installer-rbac.yaml", "clusterextension-crds.yaml", "clusterextension-operator.yaml"} {
		o, err := olmtest.ReadObjects(filepath.Join(root, "operator", "config", "olm", f))
		require.NoError(t, err)
		objs = append(objs, o...)
	}
	var catalog, crds, operator, installNS *unstructured.Unstructured
	for _, o := range objs {
		switch {
		case o.GetKind() == "ClusterCatalog":
			catalog = o
		case o.GetKind() == "Namespace":
			installNS = o
		case o.GetKind() == "ClusterExtension" && o.GetName() == "inferencestack-crds":
			crds = o
		case o.GetKind() == "ClusterExtension":
			operator = o
		}
	}
	sampleRef, _, _ := unstructured.NestedString(catalog.Object, "spec", "source", "image", "ref")
	require.Equal(t, catalogRef, sampleRef, "the sample ClusterCatalog's image")
	// The install namespace enforces the restricted Pod Security Standard.
	labels := installNS.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, enforceRestricted)
	installNS.SetLabels(labels)
	apply(t, objs...)

	start = time.Now()
	_, err = cluster.WaitCondition(ctx, catalog, olmtest.TypeServing, serveTimeout)
	require.NoError(t, err)
	for _, ce := range []*unstructured.Unstructured{crds, operator} {
		_, err := cluster.WaitCondition(ctx, ce, olmtest.TypeInstalled, installTimeout)
		require.NoError(t, err)
	}
	version, _, _ := unstructured.NestedString(operator.Object, "status", "install", "bundle", "version")
	t.Logf("catalog Serving and both packages Installed (operator %s) in %s", version, time.Since(start).Round(100*time.Millisecond))

	// The operator's pod, as the CSV describes it.
	ns, _, _ := unstructured.NestedString(operator.Object, "spec", "namespace")
	csv := installedCSV(t, filepath.Join(dir, "bundle", bundle.PackageOperator, version))
	start = time.Now()
	pod := operatorPod(t, ns, csv.deployment.Spec.Selector.MatchLabels)
	t.Logf("operator pod %s/%s Ready on %s in %s", ns, pod.Name, pod.Spec.NodeName, time.Since(start).Round(100*time.Millisecond))
	require.Equal(t, nodetest.Name, pod.Spec.NodeName)
	require.Equal(t, csv.deployment.Spec.Template.Spec.ServiceAccountName, pod.Spec.ServiceAccountName, "the pod's ServiceAccount")
	want := csv.deployment.Spec.Template.Spec.Containers[0].Image
	require.Equal(t, want, pod.Spec.Containers[0].Image, "the pod runs the image the CSV names")
	require.True(t, strings.HasSuffix(want, "@"+digests[operatorImageOf(t, root, version)]), "the CSV names the built image %s", want)
	require.Contains(t, pod.Status.ContainerStatuses[0].ImageID, digests[operatorImageOf(t, root, version)], "containerd ran another image")
	got := &corev1.Namespace{}
	require.NoError(t, node.Env.Client.Get(ctx, client.ObjectKey{Name: ns}, got))
	require.Equal(t, "restricted", got.Labels["pod-security.kubernetes.io/enforce"])

	// It won its leader election from inside the pod: in cluster, the API
	// server is reachable only through the `kubernetes` Service.
	lease := waitLease(t, ns, pod.Name)
	t.Logf("Lease %s/%s held by %s", ns, lease.Name, *lease.Spec.HolderIdentity)

	stacks(t, ns)
}

// stacks creates, in a namespace enforcing the restricted standard, one
// InferenceStack of each sample, one after the other (their pods together
// request more CPU than the node has), and checks that the operator in ns
// rolled out its pods with the pinned images, the scheduler placed them on
// the node and the kubelet tried to start them; then deletes it.
func stacks(t *testing.T, operatorNS string) {
	ctx := context.Background()
	const ns = "stacks"
	restrictedNamespace(t, ns)
	p := installedPin(t, operatorNS)

	files, err := filepath.Glob(filepath.Join(root, "operator", "config", "samples", "inferencestack_*.yaml"))
	require.NoError(t, err)
	var samples []*v1alpha1.InferenceStack
	for _, f := range files {
		objs, err := olmtest.ReadObjects(f)
		require.NoError(t, err)
		require.Len(t, objs, 1, f)
		s := &v1alpha1.InferenceStack{}
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(objs[0].Object, s))
		s.Namespace = ns
		samples = append(samples, s)
	}
	// The starter first: its run config is the override sample's.
	slices.SortStableFunc(samples, func(a, b *v1alpha1.InferenceStack) int {
		return boolInt(b.Name == "starter") - boolInt(a.Name == "starter")
	})
	prepareNode(t, samples)
	var runConfig string
	for _, s := range samples {
		t.Run(s.Name, func(t *testing.T) {
			references(t, s, runConfig)
			persistentVolumes(t, s)
			start := time.Now()
			require.NoError(t, kube.Create(ctx, s))
			pods := stackPods(t, s)
			for _, pod := range pods {
				c := pod.Status.ContainerStatuses[0]
				t.Logf("pod %s on %s in %s: %s %s", pod.Name, pod.Spec.NodeName, time.Since(start).Round(100*time.Millisecond),
					c.State.Waiting.Reason, c.State.Waiting.Message)
				if pod.Labels[components.LabelComponent] == components.ComponentServer {
					wantImage := s.Spec.Distribution.Image
					if wantImage == "" {
						wantImage, err = p.Image(runconfig.ImageDistribution(s.Spec.Distribution.Name)) // remote-vllm runs the starter image
						require.NoError(t, err)
					}
					require.Equal(t, wantImage, pod.Spec.Containers[0].Image, "the server image of %s", s.Name)
				}
			}
			if s.Name == "starter" {
				cm := &corev1.ConfigMap{}
				require.NoError(t, node.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: config.ConfigMapName(s.Name)}, cm))
				runConfig = cm.Data[runconfig.ConfigKey]
			}
			deleteStack(t, s)
		})
	}
	custom := slices.IndexFunc(samples, func(s *v1alpha1.InferenceStack) bool { return s.Spec.Distribution.Image != "" })
	require.GreaterOrEqual(t, custom, 0, "no sample with spec.distribution.image")
	t.Run("stand-in image", func(t *testing.T) { standIn(t, samples[custom]) })
}

// standIn runs a stack like sample (whose spec.distribution.image names a
// custom image) with an image the test built and pushed
// (nodetest.PushGoImage): its server container is pulled and started. The
// program, the test's HTTP server at /usr/local/bin/llama, is no Llama
// Stack server: it only shows the way for a stand-in.
func standIn(t *testing.T, sample *v1alpha1.InferenceStack) {
	ctx := context.Background()
	ns := sample.Namespace
	ref, err := node.PushGoImage(ctx, "./tools/internal/nodetest/httpserver", image.BinaryOptions{Path: "/usr/local/bin/llama"},
		"registry.test/inferencestack/standin-server:e2e")
	require.NoError(t, err)
	s := &v1alpha1.InferenceStack{ObjectMeta: metav1.ObjectMeta{Name: "stand-in", Namespace: ns}, Spec: *sample.Spec.DeepCopy()}
	s.Spec.Distribution.Image = ref
	require.NoError(t, kube.Create(ctx, s))
	selector := client.MatchingLabels{components.LabelInstance: s.Name, components.LabelComponent: components.ComponentServer}
	var last string
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, podTimeout, true, func(ctx context.Context) (bool, error) {
		list := &corev1.PodList{}
		if err := node.Env.Client.List(ctx, list, client.InNamespace(ns), selector); err != nil {
			return false, err
		}
		last = fmt.Sprintf("%+v", list.Items)
		for _, p := range list.Items {
			for _, c := range p.Status.ContainerStatuses {
				if c.State.Running != nil && strings.Contains(c.ImageID, ref[strings.LastIndex(ref, "@")+1:]) {
					t.Logf("pod %s runs %s", p.Name, c.ImageID)
					return true, nil
				}
			}
		}
		return false, nil
	})
	require.NoError(t, err, "no server pod of %s runs %s: %s", s.Name, ref, last)
	deleteStack(t, s)
}

// prepareNode gives the node what the samples ask of a node: their node
// selector labels, and their extended resources (a GPU) advertised in its
// capacity, as a device plugin would (there is no device: the containers
// never start).
func prepareNode(t *testing.T, samples []*v1alpha1.InferenceStack) {
	t.Helper()
	ctx := context.Background()
	n := &corev1.Node{}
	require.NoError(t, node.Env.Client.Get(ctx, client.ObjectKey{Name: nodetest.Name}, n))
	before := n.DeepCopy()
	for _, s := range samples {
		w := s.Spec.Workload
		if w == nil {
			continue
		}
		maps.Copy(n.Labels, w.NodeSelector)
		if w.Resources == nil {
			continue
		}
		for name, q := range w.Resources.Limits {
			if have := n.Status.Capacity[name]; strings.Contains(string(name), "/") && have.Cmp(q) < 0 {
				n.Status.Capacity[name] = q
			}
		}
	}
	require.NoError(t, node.Env.Client.Patch(ctx, n.DeepCopy(), client.MergeFrom(before)))
	require.NoError(t, node.Env.Client.Status().Patch(ctx, n, client.MergeFrom(before)))
	// The kubelet puts the extended resources into allocatable.
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got := &corev1.Node{}
		if err := node.Env.Client.Get(ctx, client.ObjectKey{Name: nodetest.Name}, got); err != nil {
			return false, err
		}
		for name, q := range n.Status.Capacity {
			if a := got.Status.Allocatable[name]; a.Cmp(q) < 0 && strings.Contains(string(name), "/") {
				return false, nil
			}
		}
		return true, nil
	})
	require.NoError(t, err, "the node's allocatable does not show the extended resources")
}

// references creates the Secrets and ConfigMaps s references, with
// stand-in values; a ConfigMap key of an override holds runConfig.
func references(t *testing.T, s *v1alpha1.InferenceStack, runConfig string) {
	t.Helper()
	ctx := context.Background()
	for _, ref := range config.References(s.Spec) {
		data := map[string]string{}
		for _, k := range ref.Keys {
			data[k] = "stand-in"
		}
		var obj client.Object
		switch ref.Kind {
		case config.KindSecret:
			if len(ref.Keys) == 0 { // a mounted TLS Secret
				data = map[string]string{corev1.TLSCertKey: "stand-in", corev1.TLSPrivateKeyKey: "stand-in"}
			}
			obj = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: ref.Name, Namespace: s.Namespace}, StringData: data}
		case config.KindConfigMap:
			if s.Spec.OverrideConfig != nil && ref.Name == s.Spec.OverrideConfig.ConfigMapName {
				require.NotEmpty(t, runConfig, "no run config for the override of %s", s.Name)
				data[s.Spec.OverrideConfig.KeyOrDefault()] = runConfig
			}
			obj = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: ref.Name, Namespace: s.Namespace}, Data: data}
		default:
			t.Fatalf("%s references a %s", s.Name, ref.Kind)
		}
		if err := node.Env.Client.Create(ctx, obj); !apierrors.IsAlreadyExists(err) {
			require.NoError(t, err, "creating %s %s", ref.Kind, ref.Name)
		}
	}
}

// persistentVolumes makes a PersistentVolume for each claim of s (there is
// no provisioner): the cache's and the server's state volume, each a
// folder of the node of the requested size.
func persistentVolumes(t *testing.T, s *v1alpha1.InferenceStack) {
	t.Helper()
	if s.Spec.Cache != nil && s.Spec.Cache.Enabled {
		persistentVolume(t, s.Name+"-cache", s.Spec.Cache.StorageSize)
	}
	if w := s.Spec.Workload; w != nil && w.StateVolume != nil {
		persistentVolume(t, s.Name+"-state", w.StateVolume.Size)
	}
}

// persistentVolume makes one PersistentVolume named stacks-<name> a claim
// of size (default 1Gi) can bind.
func persistentVolume(t *testing.T, name string, request *resource.Quantity) {
	t.Helper()
	ctx := context.Background()
	size := resource.MustParse("1Gi")
	if request != nil {
		size = *request
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "stacks-" + name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{
				Path: "/var/lib/inferencestack-volumes/" + name,
				Type: ptr.To(corev1.HostPathDirectoryOrCreate),
			}},
		},
	}
	require.NoError(t, node.Env.Client.Create(ctx, pv))
	t.Cleanup(func() { _ = node.Env.Client.Delete(ctx, pv) })
}

// stackPods waits until every Deployment of s has all its pods scheduled to
// the node with the kubelet trying to start their first container (its
// image pull refused by the registry: "not found"), and returns them.
func stackPods(t *testing.T, s *v1alpha1.InferenceStack) []corev1.Pod {
	t.Helper()
	ctx := context.Background()
	selector := client.MatchingLabels{components.LabelInstance: s.Name, components.LabelManagedBy: components.ManagedBy}
	var pods []corev1.Pod
	var last string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, podTimeout, true, func(ctx context.Context) (bool, error) {
		deps := &appsv1.DeploymentList{}
		if err := node.Env.Client.List(ctx, deps, client.InNamespace(s.Namespace), selector); err != nil {
			return false, err
		}
		list := &corev1.PodList{}
		if err := node.Env.Client.List(ctx, list, client.InNamespace(s.Namespace), selector); err != nil {
			return false, err
		}
		want := int32(0)
		for _, d := range deps.Items {
			want += ptr.Deref(d.Spec.Replicas, 1)
		}
		stack := &v1alpha1.InferenceStack{}
		if err := kube.Get(ctx, client.ObjectKeyFromObject(s), stack); err != nil {
			return false, err
		}
		last = fmt.Sprintf("%d Deployments wanting %d pods, %d pods; stack phase %s, conditions %+v", len(deps.Items), want, len(list.Items),
			stack.Status.Phase, stack.Status.Conditions)
		if len(deps.Items) == 0 || int32(len(list.Items)) != want {
			return false, nil
		}
		for _, p := range list.Items {
			last += fmt.Sprintf("\n  pod %s: node %q, phase %s, conditions %+v, containers %+v", p.Name, p.Spec.NodeName, p.Status.Phase,
				p.Status.Conditions, p.Status.ContainerStatuses)
			if p.Spec.NodeName != nodetest.Name || len(p.Status.ContainerStatuses) == 0 {
				return false, nil
			}
			w := p.Status.ContainerStatuses[0].State.Waiting
			if w == nil || (w.Reason != "ErrImagePull" && w.Reason != "ImagePullBackOff") || !strings.Contains(w.Message, "not found") {
				return false, nil
			}
		}
		pods = list.Items
		return true, nil
	})
	require.NoError(t, err, "the pods of InferenceStack %s: %s\nevents:\n%s", s.Name, last, events(t, s.Namespace, ""))
	return pods
}

// deleteStack deletes s and waits until it and its pods are gone.
func deleteStack(t *testing.T, s *v1alpha1.InferenceStack) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, kube.Delete(ctx, s))
	selector := client.MatchingLabels{components.LabelInstance: s.Name, components.LabelManagedBy: components.ManagedBy}
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, deleteTimeout, true, func(ctx context.Context) (bool, error) {
		err := kube.Get(ctx, client.ObjectKeyFromObject(s), &v1alpha1.InferenceStack{})
		if !apierrors.IsNotFound(err) {
			return false, client.IgnoreNotFound(err)
		}
		list := &corev1.PodList{}
		if err := node.Env.Client.List(ctx, list, client.InNamespace(s.Namespace), selector); err != nil {
			return false, err
		}
		return len(list.Items) == 0, nil
	})
	require.NoError(t, err, "InferenceStack %s or its pods still exist", s.Name)
}

// csvInstall is what the test reads from the installed bundle's CSV.
type csvInstall struct {
	deployment appsv1.Deployment
}

// installedCSV reads the CSV of the bundle at dir: its one Deployment.
func installedCSV(t *testing.T, dir string) csvInstall {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "manifests", "*clusterserviceversion.yaml"))
	require.NoError(t, err)
	require.Len(t, files, 1, "CSVs in %s", dir)
	objs, err := olmtest.ReadObjects(files[0])
	require.NoError(t, err)
	deployments, _, _ := unstructured.NestedSlice(objs[0].Object, "spec", "install", "spec", "deployments")
	require.Len(t, deployments, 1, "deployments of %s", files[0])
	spec, _, _ := unstructured.NestedMap(deployments[0].(map[string]any), "spec")
	var out csvInstall
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(spec, &out.deployment.Spec))
	return out
}

// operatorImageOf is the operatorImage of the release version.
func operatorImageOf(t *testing.T, root, version string) string {
	t.Helper()
	in, err := release.LoadInput(filepath.Join(root, "channels", "releases", version+".yaml"))
	require.NoError(t, err)
	return in.OperatorImage
}

// operatorPod waits until one pod of the operator's Deployment in ns is
// Ready, and returns it.
func operatorPod(t *testing.T, ns string, selector map[string]string) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	var name string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, podTimeout, true, func(ctx context.Context) (bool, error) {
		list := &corev1.PodList{}
		if err := node.Env.Client.List(ctx, list, client.InNamespace(ns), client.MatchingLabels(selector)); err != nil {
			return false, err
		}
		if len(list.Items) == 0 {
			return false, nil
		}
		name = list.Items[0].Name
		return true, nil
	})
	require.NoError(t, err, "no pod of the operator's Deployment in %s\nevents:\n%s", ns, events(t, ns, ""))
	pod := waitPod(t, ns, name, podTimeout, podReady)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("---- operator log ----\n%s", testenv.LastLines(node.PodLogs(ns, name)["manager"], 60))
		}
	})
	return pod
}

// waitLease waits until a Lease in ns is held by the pod (controller-runtime
// names the holder <hostname>_<uuid>; the host name is the pod's name).
func waitLease(t *testing.T, ns, pod string) coordinationv1.Lease {
	t.Helper()
	ctx := context.Background()
	var held coordinationv1.Lease
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, podTimeout, true, func(ctx context.Context) (bool, error) {
		list := &coordinationv1.LeaseList{}
		if err := node.Env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
			return false, err
		}
		for _, l := range list.Items {
			if h := l.Spec.HolderIdentity; h != nil && strings.HasPrefix(*h, pod+"_") {
				held = l
				return true, nil
			}
		}
		return false, nil
	})
	require.NoError(t, err, "no Lease in %s held by the operator's pod %s\noperator log:\n%s", ns, pod,
		testenv.LastLines(node.PodLogs(ns, pod)["manager"], 40))
	return held
}

// installedPin is the operand pin of the pin ConfigMap OLM installed in ns.
func installedPin(t *testing.T, ns string) pin.Pin {
	t.Helper()
	cm := &corev1.ConfigMap{}
	key := client.ObjectKey{Namespace: ns, Name: validate.PinConfigMapName}
	require.NoError(t, node.Env.Client.Get(context.Background(), key, cm), "the pin ConfigMap")
	p, err := pin.Parse([]byte(cm.Data[validate.PinKey]))
	require.NoError(t, err, "ConfigMap %s key %s", key, validate.PinKey)
	return p
}

// apply applies objs and deletes them (waiting until they are gone) when the
// test ends, in reverse order.
func apply(t *testing.T, objs ...*unstructured.Unstructured) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, cluster.Apply(ctx, objs...))
	t.Cleanup(func() {
		for i := len(objs) - 1; i >= 0; i-- {
			if err := cluster.Delete(ctx, deleteTimeout, objs[i]); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
	})
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
