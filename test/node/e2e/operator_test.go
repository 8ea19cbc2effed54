//go:build e2e

package e2e_test

import (
	"context"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/inferencestack/inferencestack/internal/bundle"
	"github.com/inferencestack/inferencestack/internal/image"
	"github.com/inferencestack/inferencestack/internal/release"
	"github.com/inferencestack/inferencestack/internal/validate"
	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/pin"
	testnode "github.com/inferencestack/inferencestack/test/node"
	"github.com/inferencestack/inferencestack/test/olm"
	"github.com/inferencestack/inferencestack/test/testenv"
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
// published name, with the test-only stand-ins of the operands it pins
// (test/standin: the Llama Stack server of each release's line, and
// PostgreSQL); the repository's releases are made again with those images
// (olm.Release: the operator's real digest, the stand-ins pinned in
// place of upstream's images, which cannot be pulled here); OLM v1 installs
// the CRDs and both majors of the operator from its catalog with the sample
// manifests (operator/config/olm, and olm/v2 beside it). Each operator then
// runs for real as the pod its CSV describes: pulled by containerd, in a
// namespace enforcing the restricted Pod Security Standard, as the
// ServiceAccount OLM made, reaching the API server in cluster through the
// `kubernetes` Service, holding its leader election Lease and reading the
// pin from its ConfigMap. The subtests share this install: a server image
// that cannot be pulled, every sample and the auth and TLS variants on
// each line reaching Ready (stacks_test.go), faults (faults_test.go),
// the server's state kept across a new pod (state_test.go), and
// NetworkPolicy enforced, the operator reading the servers through it
// (netpol_test.go); last, alone, majors 3, 4 and a test-only 5 join and a
// stack moves across the lines and between two majors of one line
// (moves_test.go).
func TestOperatorRunsAsTheInstalledPod(t *testing.T) {
	dumpLogsOnFailure(t)
	ctx := context.Background()

	start := time.Now()
	bin := filepath.Join(t.TempDir(), "manager")
	require.NoError(t, testenv.BuildStatic("./operator/cmd", bin))
	digests := map[string]string{}
	files, err := filepath.Glob(filepath.Join(root, "channels", "releases", "*.yaml"))
	require.NoError(t, err)
	var lines []string
	for _, f := range files {
		in, err := release.LoadInput(f)
		require.NoError(t, err)
		pushed := pushOperator(t, bin, in.OperatorImage)
		digests[in.OperatorImage] = digestOf(pushed)
		t.Logf("operator image of release %s: %s", in.Version, pushed)
		lines = append(lines, in.LlamaStackVersion)
		if in.Version == sameLineFrom {
			// The test-only major beside it on its line (olm.Release.Fixtures).
			ref := strings.Replace(in.OperatorImage, ":v"+sameLineFrom, ":v"+sameLineFixture, 1)
			digests[ref] = digestOf(pushOperator(t, bin, ref))
		}
	}
	t.Logf("operator built and pushed in %s", time.Since(start).Round(100*time.Millisecond))
	start = time.Now()
	standIns := pushStandIns(t, lines)
	maps.Copy(digests, standIns.digests)
	t.Logf("stand-in images built and pushed in %s", time.Since(start).Round(100*time.Millisecond))

	// The release as `make release` makes it, with the built image's digest
	// and the stand-ins pinned in place of the operands.
	dir := t.TempDir()
	catalogDir, err := olm.Release{Root: root, Dir: dir, Digests: digests, Edit: standIns.pin,
		Fixtures: map[string]string{sameLineFixture: sameLineFrom}}.Run(ctx)
	require.NoError(t, err)
	catalogRef, err := cluster.PushRelease(ctx, filepath.Join(dir, "bundle"), catalogDir, "catalog")
	require.NoError(t, err)

	objs, catalog, crds, operators := olmSamples(t)
	sampleRef, _, _ := unstructured.NestedString(catalog.Object, "spec", "source", "image", "ref")
	require.Equal(t, catalogRef, sampleRef, "the sample ClusterCatalog's image")
	apply(t, objs...)

	start = time.Now()
	_, err = cluster.WaitCondition(ctx, catalog, olm.TypeServing, serveTimeout)
	require.NoError(t, err)
	for _, ce := range append([]*unstructured.Unstructured{crds}, operators...) {
		_, err := cluster.WaitCondition(ctx, ce, olm.TypeInstalled, installTimeout)
		require.NoError(t, err)
	}
	t.Logf("catalog Serving and the CRDs and both majors Installed in %s", time.Since(start).Round(100*time.Millisecond))

	var installs []*install
	for _, operator := range operators {
		installs = append(installs, installed(t, operator, dir, digests, standIns))
	}
	slices.SortFunc(installs, func(a, b *install) int { return strings.Compare(a.major, b.major) })

	prepareNode(t)
	// The subtests run at once, to keep the suite short: their stacks
	// live in namespaces of their own, the scheduler holds the pods the
	// node has no room for, and the stacks of the operator that faults
	// kills converge once it is back, which their timeouts allow for.
	var wg sync.WaitGroup
	for name, run := range map[string]func(*testing.T){
		"image pull failure": func(t *testing.T) { imagePullFailure(t, installs[0]) },
		"crash loop":         func(t *testing.T) { crashLoop(t, installs[len(installs)-1], standIns) },
		"ready":              func(t *testing.T) { readyStacks(t, installs, standIns) },
		"faults":             func(t *testing.T) { faults(t, installs[0]) },
		"state":              func(t *testing.T) { stateKept(t, installs) },
		"network policies":   func(t *testing.T) { networkPolicies(t, installs[len(installs)-1]) },
		"line move":          func(t *testing.T) { lineMove(t, installs) },
	} {
		wg.Go(func() { t.Run(name, run) })
	}
	wg.Wait()
	// After the others: each of its stacks rolls out a second pod beside
	// the first (a new command), which the node, full of the others' pods
	// at their peak, may have no CPU left to schedule (seen once in CI:
	// "Insufficient cpu").
	t.Run("workers and overrides", func(t *testing.T) { workersAndOverrides(t, installs) })
	// Last, alone: the CRD package moves on and majors 3 and 4 join, so the
	// other subtests run with the two majors they were written for.
	t.Run("moves across lines", func(t *testing.T) { movesAcrossLines(t, installs, crds, dir, digests, standIns) })
}

// installed checks the operator major OLM installed for the ClusterExtension
// operator, from the release made in dir: its pod runs as the CSV
// describes, on the node, the built image (digests), in a namespace
// enforcing the restricted Pod Security Standard, holding its leader
// election Lease; and returns it with its installed pin.
func installed(t *testing.T, operator *unstructured.Unstructured, dir string, digests map[string]string, standIns standIns) *install {
	t.Helper()
	ctx := context.Background()
	version, _, _ := unstructured.NestedString(operator.Object, "status", "install", "bundle", "version")
	ns, _, _ := unstructured.NestedString(operator.Object, "spec", "namespace")
	// The operator's pod, as the CSV describes it.
	csv := installedCSV(t, filepath.Join(dir, "bundle", bundle.PackageOperator, version))
	start := time.Now()
	pod := operatorPod(t, ns, csv.deployment.Spec.Selector.MatchLabels)
	t.Logf("operator %s: pod %s/%s Ready on %s in %s", version, ns, pod.Name, pod.Spec.NodeName, time.Since(start).Round(100*time.Millisecond))
	require.Equal(t, testnode.Name, pod.Spec.NodeName)
	require.Equal(t, csv.deployment.Spec.Template.Spec.ServiceAccountName, pod.Spec.ServiceAccountName, "the pod's ServiceAccount")
	want := csv.deployment.Spec.Template.Spec.Containers[0].Image
	require.Equal(t, want, pod.Spec.Containers[0].Image, "the pod runs the image the CSV names")
	ref := operatorImageOf(t, dir, version) // the test release's input (a fixture's too)
	require.True(t, strings.HasSuffix(want, "@"+digests[ref]), "the CSV names the built image %s", want)
	require.Contains(t, pod.Status.ContainerStatuses[0].ImageID, digests[ref], "containerd ran another image")
	got := &corev1.Namespace{}
	require.NoError(t, node.Env.Client.Get(ctx, client.ObjectKey{Name: ns}, got))
	require.Equal(t, "restricted", got.Labels["pod-security.kubernetes.io/enforce"])

	// It won its leader election from inside the pod: in cluster, the
	// API server is reachable only through the `kubernetes` Service.
	lease := waitLease(t, ns, pod.Name)
	t.Logf("Lease %s/%s held by %s", ns, lease.Name, *lease.Spec.HolderIdentity)
	p := installedPin(t, ns)
	return &install{namespace: ns, selector: csv.deployment.Spec.Selector.MatchLabels, pin: p,
		major: strings.Split(version, ".")[0], standIn: standIns.llama[p.LlamaStackVersion]}
}

// olmSamples are the manifests a cluster admin applies to install the CRD
// package and both operator majors (operator/config/olm and olm/v2), the
// install namespaces enforcing the restricted Pod Security Standard: all of
// them, the ClusterCatalog, the CRD package's ClusterExtension and the
// operators'.
func olmSamples(t *testing.T) (objs []*unstructured.Unstructured, catalog, crds *unstructured.Unstructured, operators []*unstructured.Unstructured) {
	t.Helper()
	objs = readSamples(t, "clustercatalog.yaml", "namespace.yaml", "installer-rbac.yaml", "clusterextension-crds.yaml",
		"clusterextension-operator.yaml", "v2/namespace.yaml", "v2/installer.yaml", "v2/clusterextension-operator.yaml")
	for _, o := range objs {
		switch {
		case o.GetKind() == "ClusterCatalog":
			catalog = o
		case o.GetKind() == "ClusterExtension" && o.GetName() == "inferencestack-crds":
			crds = o
		case o.GetKind() == "ClusterExtension":
			operators = append(operators, o)
		}
	}
	require.Len(t, operators, 2, "the operator's ClusterExtensions of operator/config/olm and olm/v2")
	return objs, catalog, crds, operators
}

// majorSamples are the manifests that install operator major N beside the
// others (operator/config/olm/vN), its namespace enforcing the restricted
// Pod Security Standard, and their ClusterExtension.
func majorSamples(t *testing.T, major string) (objs []*unstructured.Unstructured, operator *unstructured.Unstructured) {
	t.Helper()
	objs = readSamples(t, "v"+major+"/namespace.yaml", "v"+major+"/installer.yaml", "v"+major+"/clusterextension-operator.yaml")
	for _, o := range objs {
		if o.GetKind() == "ClusterExtension" {
			require.Nil(t, operator, "operator/config/olm/v%s has two ClusterExtensions", major)
			operator = o
		}
	}
	require.NotNil(t, operator, "operator/config/olm/v%s has no ClusterExtension", major)
	return objs, operator
}

// readSamples reads the manifests of operator/config/olm, their
// namespaces labelled to enforce the restricted Pod Security Standard.
func readSamples(t *testing.T, files ...string) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	for _, f := range files {
		o, err := olm.ReadObjects(filepath.Join(root, "operator", "config", "olm", f))
		require.NoError(t, err)
		objs = append(objs, o...)
	}
	for _, o := range objs {
		if o.GetKind() == "Namespace" {
			labels := o.GetLabels()
			if labels == nil {
				labels = map[string]string{}
			}
			maps.Copy(labels, enforceRestricted)
			o.SetLabels(labels)
		}
	}
	return objs
}

// install is one major of the operator as OLM installed it.
type install struct {
	// namespace is the operator's install namespace.
	namespace string
	// selector selects the operator's pod.
	selector map[string]string
	// pin is the operand pin the operator runs with.
	pin pin.Pin
	// major is the operator's major version; stacks of another major than
	// the one that takes unlabelled stacks carry it in their label.
	major string
	// standIn is the Llama Stack stand-in image of the pin's line, by digest.
	standIn string
}

// label hands s to the install's operator.
func (in *install) label(s *v1alpha1.InferenceStack) {
	if in.major == "1" {
		return
	}
	if s.Labels == nil {
		s.Labels = map[string]string{}
	}
	s.Labels[v1alpha2.LabelOperatorMajor] = in.major
}

// pushOperator pushes the operator binary bin as the image ref (its copy
// in the node's registry, which the kubelet pulls), signed with the test
// run's key, its SBOM and provenance attached, and verified (as
// cluster.PushRelease does for the bundles and the catalog). It returns
// ref by digest.
func pushOperator(t *testing.T, bin, ref string) string {
	t.Helper()
	ctx := context.Background()
	pushed, err := node.PushBinary(ctx, bin, image.BinaryOptions{Path: image.OperatorPath}, ref)
	require.NoError(t, err)
	local, err := node.LocalRef(pushed)
	require.NoError(t, err)
	if _, done := signedOperators.LoadOrStore(local, true); !done {
		require.NoError(t, cluster.Signing.Sign(ctx, image.KindOperator, bin, local))
	}
	require.NoError(t, cluster.Signing.Verify(ctx, local))
	return pushed
}

// signedOperators are the operator images (repository@digest in the node's
// registry) pushOperator signed: the releases' tags of one binary are one
// image, signed once.
var signedOperators sync.Map

// digestOf is the digest of a reference by digest.
func digestOf(ref string) string { return ref[strings.LastIndex(ref, "@")+1:] }

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
	objs, err := olm.ReadObjects(files[0])
	require.NoError(t, err)
	deployments, _, _ := unstructured.NestedSlice(objs[0].Object, "spec", "install", "spec", "deployments")
	require.Len(t, deployments, 1, "deployments of %s", files[0])
	spec, _, _ := unstructured.NestedMap(deployments[0].(map[string]any), "spec")
	var out csvInstall
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(spec, &out.deployment.Spec))
	return out
}

// operatorImageOf is the operatorImage of the release version in the
// repository (or test release) at root.
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
	cluster.ApplyForTest(t, deleteTimeout, objs...)
}
