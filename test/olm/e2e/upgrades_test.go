//go:build e2e

package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/inferencestack/inferencestack/internal/bundle"
	"github.com/inferencestack/inferencestack/test/olm"
)

// upgradeWithinMajors upgrades every major within itself on the real OLM
// v1, all four installed side by side and their operators reconciling
// (TestStorageMovesToV1alpha2WithFourMajors). The repository releases one
// version of 1.x, 3.x and 4.x, so the ClusterCatalog moves, as it would to
// a catalog image carrying new releases, to a test fixture: the release
// catalog plus 1.0.1, 3.0.1 and 4.0.1, each made from its major's committed
// bundle with only the version changed and rendered by the release tools
// (olm.NextPatches). The extensions of 1.x, 3.x and 4.x, whose ranges (the
// samples' "N.x") hold the new patches, upgrade along the catalog's edges
// (N.0.0 -> N.0.1 in stable-vN and candidate-vN) on their own; 2.x's range
// moves from 2.0.0 to 2.x (2.1.0): four upgrades at once. Each extension reports the new
// version Installed, its Deployment runs the new bundle's image, and the
// new operator, run as that Deployment runs it, takes over the major's
// stack from the old one, which stops then (as a rollout replaces the
// pod) and gives its leader election Lease up: the stack's status names the new release, nothing of the stack is
// lost (its spec, labels, finalizers and every object it owns keep their
// UIDs) and, as the new pins change no operand, nothing it owns is written
// (resourceVersions unchanged, so no pod is rolled); a change to each
// stack's spec is then reconciled by its major's new release
// (status.observedGeneration), and the audit log shows each stack written
// by its own major's ServiceAccount only.
func upgradeWithinMajors(t *testing.T, cat, crds *unstructured.Unstructured, exts map[string]*unstructured.Unstructured, majors []*majorStack, writers *stackWriters) {
	t.Helper()
	ctx := context.Background()
	start := time.Now()
	var from []string
	for _, m := range majors {
		if _, err := os.Stat(filepath.Join(root, "bundle", bundle.PackageOperator, m.next)); err != nil {
			from = append(from, m.version)
		}
	}
	fixture, err := olm.NextPatches{Root: root, Dir: t.TempDir(), From: from}.Run(ctx)
	require.NoError(t, err)
	// The release's bundles are pushed already (serveCatalog).
	ref, err := cluster.PushRelease(ctx, fixture.Added, fixture.CatalogDir, "catalog-upgrades")
	require.NoError(t, err)
	t.Logf("test fixture catalog %s: the release catalog plus %v, rendered and pushed in %s", ref, fixture.Next, time.Since(start).Round(100*time.Millisecond))

	before := map[string]stackState{}
	for _, m := range majors {
		before[m.stack.GetName()] = stateOf(t, m.stack)
	}

	// The catalog moves to the fixture; 2.x's range to the major.
	require.NoError(t, cluster.Client.Get(ctx, client.ObjectKeyFromObject(cat), cat))
	require.NoError(t, unstructured.SetNestedField(cat.Object, ref, "spec", "source", "image", "ref"))
	require.NoError(t, cluster.Client.Update(ctx, cat))
	upgradeStart := time.Now()
	for _, m := range majors {
		ce := exts[m.extension]
		require.NoError(t, cluster.Client.Get(ctx, client.ObjectKeyFromObject(ce), ce))
		if r, _, _ := unstructured.NestedString(ce.Object, "spec", "source", "catalog", "version"); r != m.major()+".x" {
			require.NoError(t, unstructured.SetNestedField(ce.Object, m.major()+".x", "spec", "source", "catalog", "version"))
			require.NoError(t, cluster.Client.Update(ctx, ce))
		}
	}
	for _, m := range majors {
		ce := exts[m.extension]
		_, err := cluster.WaitFor(ctx, ce, installTimeout, func(conds []metav1.Condition) (metav1.Condition, bool) {
			c := meta.FindStatusCondition(conds, olm.TypeInstalled)
			return metav1.Condition{}, c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == ce.GetGeneration() && installedVersionOf(ce) == m.next
		})
		require.NoError(t, err, "OLM upgrades %s within its major from %s to %s", m.extension, m.version, m.next)
		t.Logf("%s: %s -> %s Installed %s after the catalog moved", m.extension, m.version, m.next, time.Since(upgradeStart).Round(100*time.Millisecond))
	}
	var operators []*unstructured.Unstructured
	for _, m := range majors {
		operators = append(operators, exts[m.extension])
	}
	checkSideBySide(t, fixture.BundleRoot, crds, operators)

	// The new operators, as their Deployments run them; then the old ones
	// stop (SIGTERM, as a rollout stops the old pod), giving their Leases
	// up, and the new ones lead.
	old := map[*majorStack]*operatorProcess{}
	for _, m := range majors {
		ns, _, _ := unstructured.NestedString(exts[m.extension].Object, "spec", "namespace")
		dep := &appsv1.Deployment{}
		require.NoError(t, cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: bundle.PackageOperator}, dep))
		require.Equal(t, csvImage(t, filepath.Join(fixture.BundleRoot, bundle.PackageOperator, m.next)), dep.Spec.Template.Spec.Containers[0].Image,
			"the operator image of Deployment %s/%s after the upgrade to %s", ns, dep.Name, m.next)
		old[m] = m.op
		m.version = m.next
		m.op = runOperator(t, exts[m.extension], m, false)
	}
	holders := map[*majorStack]string{}
	for _, m := range majors {
		holders[m] = leaseHolder(t, exts[m.extension], m)
		require.NotEmpty(t, holders[m], "the Lease of major %s has no holder while operator %s runs", m.major(), m.version)
	}
	var wg sync.WaitGroup
	for m, op := range old {
		wg.Go(func() {
			if !op.Stop(30 * time.Second) {
				t.Errorf("the operator of major %s did not stop within 30s of SIGTERM", m.major())
			}
		})
	}
	wg.Wait()
	// The old leaders gave their Leases up as they stopped.
	for _, m := range majors {
		require.NotEqual(t, holders[m], leaseHolder(t, exts[m.extension], m),
			"the stopped operator of major %s still holds its Lease: the new one leads only once it expires", m.major())
	}
	offset := auditSize(t)
	takeover := time.Now()
	for _, m := range majors {
		waitReconciled(t, m)
	}
	t.Logf("every major's new operator reconciled its stack %s after the old ones stopped", time.Since(takeover).Round(100*time.Millisecond))
	for _, m := range majors {
		after := stateOf(t, m.stack)
		b := before[m.stack.GetName()]
		require.Equal(t, b.uid, after.uid, "%s was recreated", m.stack.GetName())
		require.True(t, equality.Semantic.DeepEqual(b.spec, after.spec), "the spec of %s changed across the upgrade to %s: %v -> %v", m.stack.GetName(), m.version, b.spec, after.spec)
		require.Equal(t, b.labels, after.labels, "the labels of %s", m.stack.GetName())
		require.Equal(t, b.finalizers, after.finalizers, "the finalizers of %s", m.stack.GetName())
		require.NotEmpty(t, b.owned, "%s owns nothing", m.stack.GetName())
		require.Equal(t, b.owned, after.owned, "what %s owns (kind/name: UID resourceVersion) after operator %s took over: nothing is lost or written, the pin changes no operand",
			m.stack.GetName(), m.version)
		t.Logf("%s: spec, labels, finalizers and %d owned objects unchanged (UIDs and resourceVersions) under operator %s", m.stack.GetName(), len(after.owned), m.version)
	}

	// A change to each stack, reconciled by its major's new release.
	for _, m := range majors {
		patch := `{"spec":{"resources":{"models":[{"name":"llama3.2:3b","provider":"ollama"},{"name":"llama3.2:1b","provider":"ollama"}]}}}`
		require.NoError(t, cluster.Client.Patch(ctx, m.stack, client.RawPatch(types.MergePatchType, []byte(patch))))
	}
	for _, m := range majors {
		waitReconciled(t, m)
	}
	writers.requireOwnMajorOnly(t, majors)
	written := requireAuditOwnMajor(t, majors, offset)
	for _, m := range majors {
		require.Positive(t, written[m.stack.GetName()], "the audit log holds no write of %s by %s after the upgrade", m.stack.GetName(), m.user)
	}
	t.Logf("upgrades within the four majors: %s in all, writes to the stacks since the old operators stopped: %v", time.Since(start).Round(100*time.Millisecond), written)
}

// leaseHolder is the holder of major m's leader election Lease in the
// install namespace of ce (the operator's default Lease name).
func leaseHolder(t *testing.T, ce *unstructured.Unstructured, m *majorStack) string {
	t.Helper()
	ns, _, _ := unstructured.NestedString(ce.Object, "spec", "namespace")
	lease := &coordinationv1.Lease{}
	key := client.ObjectKey{Namespace: ns, Name: "inferencestack-operator-v" + m.major() + ".inferencestack.io"}
	require.NoError(t, cluster.Client.Get(context.Background(), key, lease), "the leader election Lease of major %s", m.major())
	return ptr.Deref(lease.Spec.HolderIdentity, "")
}

// csvImage is the image of the operator Deployment of the CSV of the
// bundle at dir.
func csvImage(t *testing.T, dir string) string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "manifests", "*clusterserviceversion.yaml"))
	require.NoError(t, err)
	require.Len(t, files, 1, "CSVs in %s/manifests", dir)
	objs, err := olm.ReadObjects(files[0])
	require.NoError(t, err)
	deployments, _, _ := unstructured.NestedSlice(objs[0].Object, "spec", "install", "spec", "deployments")
	require.Len(t, deployments, 1, "deployments of %s", files[0])
	containers, _, _ := unstructured.NestedSlice(deployments[0].(map[string]any), "spec", "template", "spec", "containers")
	require.NotEmpty(t, containers, "containers of %s", files[0])
	image, _ := containers[0].(map[string]any)["image"].(string)
	return image
}

// stackState is what an upgrade of the operator must keep of a stack.
type stackState struct {
	uid        types.UID
	spec       any
	labels     map[string]string
	finalizers []string
	// owned is every object of the stack's namespace owned by it, as
	// "Kind/name" -> "UID resourceVersion".
	owned map[string]string
}

// ownedKinds are the kinds the operator makes for a stack.
var ownedKinds = []string{"apps/v1/Deployment", "v1/Service", "v1/ConfigMap", "v1/Secret", "v1/ServiceAccount",
	"v1/PersistentVolumeClaim", "networking.k8s.io/v1/NetworkPolicy", "policy/v1/PodDisruptionBudget",
	"rbac.authorization.k8s.io/v1/Role", "rbac.authorization.k8s.io/v1/RoleBinding"}

// stateOf reads the stack and the objects it owns.
func stateOf(t *testing.T, stack *unstructured.Unstructured) stackState {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, cluster.Client.Get(ctx, client.ObjectKeyFromObject(stack), stack))
	s := stackState{uid: stack.GetUID(), spec: stack.Object["spec"], labels: stack.GetLabels(), finalizers: stack.GetFinalizers(), owned: map[string]string{}}
	for _, k := range ownedKinds {
		i := strings.LastIndex(k, "/")
		list := listOf(k[:i], k[i+1:]+"List")
		require.NoError(t, cluster.Client.List(ctx, list, client.InNamespace(stack.GetNamespace())))
		for _, o := range list.Items {
			if slices.ContainsFunc(o.GetOwnerReferences(), func(r metav1.OwnerReference) bool { return r.UID == stack.GetUID() }) {
				s.owned[k[i+1:]+"/"+o.GetName()] = string(o.GetUID()) + " " + o.GetResourceVersion()
			}
		}
	}
	return s
}

// auditEvent is what the tests read of an audit.k8s.io/v1 Event.
type auditEvent struct {
	Verb string `json:"verb"`
	User struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource  string `json:"resource"`
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"objectRef"`
}

// auditSize is the audit log's current length, an offset for
// requireAuditOwnMajor.
func auditSize(t *testing.T) int64 {
	t.Helper()
	fi, err := os.Stat(auditLog)
	require.NoError(t, err)
	return fi.Size()
}

// requireAuditOwnMajor fails if, from offset on, the audit log holds a
// write to a major's stack by another major's operator (ServiceAccount);
// it returns the writes by each stack's own operator, by stack name.
func requireAuditOwnMajor(t *testing.T, majors []*majorStack, offset int64) map[string]int {
	t.Helper()
	users := map[string]string{} // stack -> its operator
	operators := map[string]bool{}
	for _, m := range majors {
		users[m.stack.GetName()] = m.user
		operators[m.user] = true
	}
	f, err := os.Open(auditLog)
	require.NoError(t, err)
	defer f.Close()
	_, err = f.Seek(offset, 0)
	require.NoError(t, err)
	own := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e auditEvent
		require.NoError(t, json.Unmarshal(sc.Bytes(), &e), "the audit log %s", auditLog)
		ref := e.ObjectRef
		if ref == nil || ref.Resource != "inferencestacks" || !operators[e.User.Username] {
			continue
		}
		want, ours := users[ref.Name]
		if !ours || ref.Namespace != majors[0].stack.GetNamespace() {
			continue
		}
		require.Equal(t, want, e.User.Username, "%s of stack %s/%s by another major's operator", e.Verb, ref.Namespace, ref.Name)
		own[ref.Name]++
	}
	require.NoError(t, sc.Err())
	t.Logf("audit log from offset %d: writes to each stack by its own major's operator only: %v (operators %v)", offset, own, slices.Sorted(maps.Keys(operators)))
	return own
}
