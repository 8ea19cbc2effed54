//go:build e2e

package e2e_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/inferencestack/inferencestack/internal/bundle"
	"github.com/inferencestack/inferencestack/internal/validate"
	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/components/config"
	"github.com/inferencestack/inferencestack/operator/components/network"
	"github.com/inferencestack/inferencestack/operator/components/server"
	"github.com/inferencestack/inferencestack/operator/pin"
	"github.com/inferencestack/inferencestack/test/olm"
	"github.com/inferencestack/inferencestack/test/testenv"
	"github.com/inferencestack/inferencestack/test/testutil"
)

// reconcileTimeout bounds the operator's way from start to a stack ready
// for deployment: start-up, leader election (the Lease is new, so won at
// once) and one reconcile.
const reconcileTimeout = 90 * time.Second

// stackFinalizer is the operator's finalizer on InferenceStacks
// (operator/internal/controller.Finalizer, not importable from here).
const stackFinalizer = "inferencestack.io/cleanup"

// TestInstalledOperatorReconcilesWithBundleRBAC: the operator binary, run as
// the ServiceAccount OLM made for the installed bundle (so with exactly the
// CSV's permissions) and with the pin ConfigMap OLM installed, wins its
// leader election, brings a starter stack to Deploying (pods never run
// here) with all its objects, which go with it when it is deleted (owner
// references; no stack has a finalizer), and the API server refuses it
// nothing.
func TestInstalledOperatorReconcilesWithBundleRBAC(t *testing.T) {
	dumpLogsOnFailure(t)
	ctx := context.Background()
	bundleRoot, _, ce := installOneMajor(t)
	ns, _, _ := unstructured.NestedString(ce.Object, "spec", "namespace")
	sa := csvServiceAccount(t, filepath.Join(bundleRoot, bundle.PackageOperator, installedVersion(t, ce)))
	token, err := cluster.Token(ctx, ns, sa, 10*time.Minute)
	require.NoError(t, err)
	kubeconfig, err := cluster.KubeconfigFor(token)
	require.NoError(t, err)
	pinFile, p := installedPin(t, ns)

	stackNS := &unstructured.Unstructured{}
	stackNS.SetAPIVersion("v1")
	stackNS.SetKind("Namespace")
	stackNS.SetName("e2e-stack")
	apply(t, stackNS)
	// The operator sets blockOwnerDeletion on the owner references to its
	// stacks; the admission plugin that checks its right to
	// (inferencestacks/finalizers) must know the CRD OLM just installed.
	probe := starterSample(t)
	probe.SetNamespace(stackNS.GetName())
	probe.SetName("probe")
	require.NoError(t, cluster.Client.Create(ctx, probe))
	restConfig, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	require.NoError(t, err)
	asOperator, err := client.New(restConfig, client.Options{})
	require.NoError(t, err)
	start := time.Now()
	require.NoError(t, cluster.WaitOwnerReferences(ctx, asOperator, probe, 60*time.Second),
		"the operator's ServiceAccount may not set owner references to InferenceStacks: the CSV lacks update on inferencestacks/finalizers?")
	require.NoError(t, cluster.Client.Delete(ctx, probe))
	t.Logf("owner references to InferenceStacks admitted after %s", time.Since(start).Round(100*time.Millisecond))

	// Started before the stack is applied, so it is stopped after the stack
	// is deleted: it sees the deletion too.
	op := startOperator(t, kubeconfig, "--pin-file="+pinFile, "--leader-elect", "--leader-election-namespace="+ns)

	stack := starterSample(t)
	stack.SetNamespace(stackNS.GetName())
	stack.SetLabels(map[string]string{v1alpha2.LabelOperatorMajor: "1"})
	apply(t, stack)
	start = time.Now()
	_, waitErr := cluster.WaitFor(ctx, stack, reconcileTimeout, func(conds []metav1.Condition) (metav1.Condition, bool) {
		if op.Exited() || len(op.refusals()) > 0 {
			return metav1.Condition{}, true // fails below, without waiting for the timeout
		}
		c := meta.FindStatusCondition(conds, v1alpha2.TypeConfigGenerated)
		phase, _, _ := unstructured.NestedString(stack.Object, "status", "phase")
		return metav1.Condition{}, c != nil && c.Status == metav1.ConditionTrue &&
			c.ObservedGeneration == stack.GetGeneration() && phase == string(v1alpha2.PhaseDeploying)
	})
	op.requireNoRefusals(t)
	require.False(t, op.Exited(), "the operator exited; its log is below")
	require.NoError(t, waitErr, "the operator did not bring the stack to %s", v1alpha2.PhaseDeploying)
	t.Logf("InferenceStack %s/%s %s in %s", stack.GetNamespace(), stack.GetName(), v1alpha2.PhaseDeploying, time.Since(start).Round(100*time.Millisecond))

	typed := &v1alpha1.InferenceStack{}
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(stack.Object, typed))
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: server.Name(typed)}}
	for _, want := range []client.Object{
		dep,
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: server.Name(typed)}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: config.ConfigMapName(typed.Name)}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: server.ServiceAccountName(testutil.Hub(typed))}},
		&networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: network.ServerPolicyName(typed)}},
	} {
		key := client.ObjectKey{Namespace: typed.Namespace, Name: want.GetName()}
		require.NoError(t, cluster.Client.Get(ctx, key, want), "%T %s of the stack", want, key)
		t.Logf("%T %s: present", want, key)
	}
	// The server runs the operand the installed pin names.
	image, err := p.Image(string(typed.Spec.Distribution.Name))
	require.NoError(t, err)
	containers := dep.Spec.Template.Spec.Containers
	idx := slices.IndexFunc(containers, func(c corev1.Container) bool { return c.Name == server.ContainerName })
	require.GreaterOrEqual(t, idx, 0, "Deployment %s/%s has no container %s", dep.Namespace, dep.Name, server.ContainerName)
	require.Equal(t, image, containers[idx].Image, "the server's image is not the one the installed pin names")

	// The operator gives no stack a finalizer (owner references remove all
	// a stack must take with it), so creating it cost no write of its
	// metadata, and its deletion is the garbage collector's alone.
	start = time.Now()
	require.NotContains(t, stack.GetFinalizers(), stackFinalizer)
	require.NoError(t, cluster.Delete(ctx, deleteTimeout, stack), "the stack was not deleted")
	op.requireNoRefusals(t)
	t.Logf("InferenceStack %s/%s deleted in %s", stack.GetNamespace(), stack.GetName(), time.Since(start).Round(100*time.Millisecond))
}

// starterSample is operator/config/samples' starter InferenceStack.
func starterSample(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	objs, err := olm.ReadObjects(filepath.Join(root, "operator", "config", "samples", "inferencestack_v1alpha1_starter.yaml"))
	require.NoError(t, err)
	require.Len(t, objs, 1, "the starter sample")
	return objs[0]
}

// csvServiceAccount is the ServiceAccount the CSV of the bundle at dir runs
// its Deployment as, which OLM creates and binds to the CSV's permissions.
func csvServiceAccount(t *testing.T, dir string) string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "manifests", "*clusterserviceversion.yaml"))
	require.NoError(t, err)
	require.Len(t, files, 1, "CSVs in %s/manifests", dir)
	objs, err := olm.ReadObjects(files[0])
	require.NoError(t, err)
	require.Len(t, objs, 1, files[0])
	deployments, _, _ := unstructured.NestedSlice(objs[0].Object, "spec", "install", "spec", "deployments")
	require.Len(t, deployments, 1, "deployments of the install strategy of %s", files[0])
	sa, _, _ := unstructured.NestedString(deployments[0].(map[string]any), "spec", "template", "spec", "serviceAccountName")
	require.NotEmpty(t, sa, "the Deployment of %s names no serviceAccountName", files[0])
	return sa
}

// installedPin writes the operand pin of the pin ConfigMap OLM installed in
// ns to a file, as the operator's Deployment mounts it, and returns the file
// and the pin.
func installedPin(t *testing.T, ns string) (string, pin.Pin) {
	t.Helper()
	cm := &corev1.ConfigMap{}
	key := client.ObjectKey{Namespace: ns, Name: validate.PinConfigMapName}
	require.NoError(t, cluster.Client.Get(context.Background(), key, cm), "the pin ConfigMap")
	data := cm.Data[validate.PinKey]
	p, err := pin.Parse([]byte(data))
	require.NoError(t, err, "ConfigMap %s key %s", key, validate.PinKey)
	path := filepath.Join(t.TempDir(), validate.PinKey)
	require.NoError(t, os.WriteFile(path, []byte(data), 0o644))
	return path, p
}

// operatorProcess is the operator binary running out of cluster.
type operatorProcess struct{ *testenv.Process }

// startOperator builds the operator and runs it with args, as the identity of
// kubeconfig, on free local ports. It is stopped (SIGTERM) when the test
// ends, and its log printed if the test failed.
func startOperator(t *testing.T, kubeconfig string, args ...string) *operatorProcess {
	t.Helper()
	dir := t.TempDir()
	bin, err := operatorBinary(t)
	require.NoError(t, err)

	ports, err := testenv.FreePorts(2)
	require.NoError(t, err)
	args = append(args,
		"--metrics-bind-address=127.0.0.1:"+strconv.Itoa(ports[0]),
		"--health-probe-bind-address=127.0.0.1:"+strconv.Itoa(ports[1]))
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	proc, err := testenv.StartProcess(cmd, filepath.Join(dir, "manager.log"))
	require.NoError(t, err)
	p := &operatorProcess{proc}
	t.Cleanup(func() {
		if !p.Stop(30 * time.Second) {
			t.Errorf("the operator did not stop within 30s of SIGTERM")
		}
		if t.Failed() {
			t.Logf("---- operator log ----\n%s", testenv.LastLines(p.Log(), 60))
		}
	})
	return p
}

var (
	buildOnce   sync.Once
	builtBinary string
	buildErr    error
)

// operatorBinary builds the operator once for the test binary (into the
// control plane's scratch folder, removed with it).
func operatorBinary(t *testing.T) (string, error) {
	buildOnce.Do(func() {
		start := time.Now()
		builtBinary, buildErr = testenv.BuildOperator(cluster.Dir())
		t.Logf("operator built in %s", time.Since(start).Round(100*time.Millisecond))
	})
	return builtBinary, buildErr
}

// requireNoRefusals fails the test if the API server refused the operator
// anything.
func (p *operatorProcess) requireNoRefusals(t *testing.T) {
	t.Helper()
	if refusals := p.refusals(); len(refusals) > 0 {
		t.Fatalf("the API server refused the operator, running with the installed bundle's permissions: its CSV lacks "+
			"a permission the operator uses; add the +kubebuilder:rbac marker to the controller and release again "+
			"(make release). The refusals:\n%s", strings.Join(refusals, "\n"))
	}
}

// refusals are the lines of the operator's log where the API server refused
// it a request.
func (p *operatorProcess) refusals() []string {
	var out []string
	for _, line := range strings.Split(p.Log(), "\n") {
		if strings.Contains(strings.ToLower(line), "forbidden") {
			out = append(out, line)
		}
	}
	return out
}
