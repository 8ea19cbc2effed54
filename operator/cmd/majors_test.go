package main_test

// The operator binary of two majors at once on one real control plane: each
// reconciles only the InferenceStacks labelled with its major (its cache holds
// no other), the one that takes unlabelled stacks reconciles them too,
// without labelling them, and relabelling a stack hands it over in place. Each binary runs as a ServiceAccount of its
// own, bound to the operator's generated ClusterRole (role.yaml), and the API
// server's audit log says who wrote what.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/components/cache"
	"github.com/inferencestack/inferencestack/operator/components/config"
	"github.com/inferencestack/inferencestack/operator/components/network"
	"github.com/inferencestack/inferencestack/operator/components/server"
	"github.com/inferencestack/inferencestack/test/local"
	"github.com/inferencestack/inferencestack/test/testenv"
	"github.com/inferencestack/inferencestack/test/testutil"
)

// operatorsNS holds the operators' ServiceAccounts and leader election Leases.
const operatorsNS = "operators"

var (
	env      *testenv.Env
	auditLog string
)

const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
# The status patches with their bodies: a test that finds one more than it
# wants names what it said.
- level: Request
  verbs: [patch]
  resources: [{group: inferencestack.io, resources: [inferencestacks/status]}]
  userGroups: ["system:serviceaccounts:` + operatorsNS + `", "system:serviceaccounts:` + reverseNS + `"]
- level: Metadata
  verbs: [create, update, patch, delete, deletecollection]
  userGroups: ["system:serviceaccounts:` + operatorsNS + `", "system:serviceaccounts:` + reverseNS + `"]
- level: None
`

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "majors-audit-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer os.RemoveAll(dir)
	policy := filepath.Join(dir, "policy.yaml")
	auditLog = filepath.Join(dir, "audit.log")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testenv.RunMain(m, testenv.Options{
		CRDDirectoryPaths: []string{filepath.Join("..", "config", "crd", "bases")},
		GarbageCollector:  true,
		Scheme:            local.Scheme(),
		APIServerArgs: map[string][]string{
			"audit-policy-file": {policy},
			"audit-log-path":    {auditLog},
			"audit-log-format":  {"json"},
			"audit-log-mode":    {"blocking"},
		},
	}, &env)
}

// TestTwoMajorsSideBySide runs the operator binary as 1.1.0 (taking
// unlabelled stacks, as 1.x releases do) and as 2.0.0 (only stacks labelled
// 2, as 2.0.0 is released) at once.
func TestTwoMajorsSideBySide(t *testing.T) {
	ctx := context.Background()
	binary := buildOperator(t)
	setupOperatorAccounts(t, "v1", "v2")
	v1 := startOperator(t, binary, "v1", "1.1.0")
	v2 := startOperator(t, binary, "v2", "2.0.0", "--take-unlabeled-stacks=false", "--max-concurrent-reconciles=3")

	// One namespace per stack, so the audit log's namespaces name the stack.
	unlabelled := createStack(t, "unlabelled", "")
	one := createStack(t, "one", "1")
	two := createStack(t, "two", "2")
	moving := createStack(t, "moving", "1", withCache)

	for _, s := range []*v1alpha1.InferenceStack{unlabelled, one, two, moving} {
		waitDeploying(t, s)
	}
	// The 1.x operator took the unlabelled stack, without labelling it (its
	// status names the release); 2.0.0 does not take them.
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(unlabelled), unlabelled))
	if got, ok := unlabelled.Labels[v1alpha2.LabelOperatorMajor]; ok {
		t.Errorf("unlabelled stack was labelled %s=%q", v1alpha2.LabelOperatorMajor, got)
	}
	if rd := unlabelled.Status.ResolvedDistribution; rd == nil || rd.OperatorVersion != "1.1.0" {
		t.Errorf("unlabelled stack: status.resolvedDistribution %+v, want operatorVersion 1.1.0 (the release that takes unlabelled stacks)", rd)
	}
	// Each major's defaults show which one built each Deployment.
	for s, want := range map[*v1alpha1.InferenceStack]string{unlabelled: "250m", one: "250m", two: "500m", moving: "250m"} {
		if got := serverCPU(t, s); got != want {
			t.Errorf("stack %s: server cpu request %s, want %s (the defaults of its major)", s.Namespace, got, want)
		}
	}
	stacksOf := map[string][]string{
		"v1": {unlabelled.Namespace, one.Namespace, moving.Namespace},
		"v2": {two.Namespace},
	}
	checkAudit(t, 0, stacksOf, stacksOf)
	// A change of each stack's spec that changes none of its objects but
	// the owner references of the cache's volume and password (with
	// retainOnDelete: false the stack owns them, so they go with it) makes
	// its operator reconcile it once more and write its status. Once the
	// status describes the change, that reconcile has finished: a write of
	// the creation left to a later reconcile is in the audit log by then.
	for _, s := range []*v1alpha1.InferenceStack{unlabelled, one, two, moving} {
		require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(s), s))
		change := client.MergeFrom(s.DeepCopy())
		if s.Spec.Cache == nil {
			s.Spec.Cache = &v1alpha1.CacheSpec{}
		}
		s.Spec.Cache.RetainOnDelete = ptr.To(false)
		require.NoError(t, env.Client.Patch(ctx, s, change))
	}
	for _, s := range []*v1alpha1.InferenceStack{unlabelled, one, two, moving} {
		waitDeploying(t, s)
	}
	writes := auditWrites(t, 0)
	for _, s := range []*v1alpha1.InferenceStack{unlabelled, one, two, moving} {
		if diff := cmp.Diff(creationWrites(s), writes[s.Namespace]); diff != "" {
			t.Errorf("stack %s: the writes of its creation and of a spec change that changes no object (-want +got):\n%s\nits status patches:\n%s",
				s.Namespace, diff, statusPatches(t, 0, s.Namespace))
		}
	}
	// --max-concurrent-reconciles, and its default of 4 per GOMAXPROCS, for
	// both controllers; the operator's GOGC unless the variable sets one.
	for op, want := range map[*local.Operator]int{v1: 4 * goruntime.GOMAXPROCS(0), v2: 3} {
		text := metricsText(t, op)
		if _, set := os.LookupEnv("GOGC"); !set && !slices.Contains(strings.Split(text, "\n"), "go_gc_gogc_percent 50") {
			t.Errorf("operator at %s does not run with GOGC 50", op.MetricsAddr)
		}
		line := fmt.Sprintf("controller_runtime_max_concurrent_reconciles{controller=%q} %d", "inferencestack", want)
		if !slices.Contains(strings.Split(text, "\n"), line) {
			t.Errorf("operator at %s does not serve %q", op.MetricsAddr, line)
		}
	}

	// Hand "moving" over to 2.x by relabelling it.
	before := objectUIDs(t, moving.Namespace)
	if _, ok := before["PersistentVolumeClaim"]; !ok {
		t.Fatalf("stack moving has no PersistentVolumeClaim before the hand-over: %v", before)
	}
	// 1.x runs Llama Stack 0.2.23, 2.x 0.3.0: the move loses 0.2's registry
	// (registry/v9, docs/moving-between-lines.md), accepted here with it.
	relabel := client.MergeFrom(moving.DeepCopy())
	moving.Labels[v1alpha2.LabelOperatorMajor] = "2"
	if moving.Annotations == nil {
		moving.Annotations = map[string]string{}
	}
	moving.Annotations[v1alpha2.SpecAnnotation] = `{"lineMove":{"line":"0.3","acceptLosses":["registry/v9"]}}`
	require.NoError(t, env.Client.Patch(ctx, moving, relabel))
	waitFor(t, "the 2.x defaults on stack moving's Deployment", func() bool { return serverCPU(t, moving) == "500m" })
	after := objectUIDs(t, moving.Namespace)
	if !maps.Equal(before, after) {
		t.Errorf("the hand-over replaced objects of stack moving:\nbefore %v\nafter  %v", before, after)
	}

	// From now on only 2.x writes stack moving's objects: change its spec and
	// look at who applied the change.
	offset := auditSize(t)
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(moving), moving))
	change := client.MergeFrom(moving.DeepCopy())
	// Two replicas need shared state: the cache holds the SQL stores, Redis the rest.
	moving.Spec.Workload = &v1alpha1.WorkloadSpec{Replicas: ptr.To[int32](2)}
	moving.Spec.Storage = &v1alpha1.StorageSpec{KV: &v1alpha1.KVStoreSpec{Type: v1alpha1.KVStoreRedis, Endpoint: "redis:6379"}}
	require.NoError(t, env.Client.Patch(ctx, moving, change))
	waitFor(t, "2 replicas on stack moving's Deployment", func() bool {
		d := &appsv1.Deployment{}
		return env.Client.Get(ctx, types.NamespacedName{Namespace: moving.Namespace, Name: moving.Name}, d) == nil &&
			d.Spec.Replicas != nil && *d.Spec.Replicas == 2
	})
	waitDeploying(t, moving)
	checkAudit(t, offset, map[string][]string{
		"v1": {unlabelled.Namespace, one.Namespace},
		"v2": {two.Namespace, moving.Namespace},
	}, map[string][]string{"v2": {moving.Namespace}})
	if final := objectUIDs(t, moving.Namespace); !maps.Equal(after, final) {
		t.Errorf("objects of stack moving were replaced after the hand-over:\nbefore %v\nafter  %v", after, final)
	}
}

func withCache(s *v1alpha1.InferenceStack) { s.Spec.Cache = &v1alpha1.CacheSpec{Enabled: true} }

// creationWrites is what the operator writes, by "verb resource name" (as
// auditWrites counts them), for stack s from its creation until it has
// reconciled one change of its spec that changes no object but the owner
// references of the cache's volume and password: each object once
// (server-side applies, and a create of the cache's password Secret), the
// volume and the password once more (their owner reference), never the
// stack's metadata (no finalizer), and its status twice (at creation and
// for the change); no label, no Event:
// for the unlabelled stack its 5 objects and the status, as
// TestCreationWritesEachObjectOnce counts them in process, plus the
// change's status write.
func creationWrites(s *v1alpha1.InferenceStack) map[string]int {
	w := map[string]int{
		"patch configmaps " + config.ConfigMapName(s.Name):                    1,
		"patch serviceaccounts " + server.ServiceAccountName(testutil.Hub(s)): 1,
		"patch deployments " + server.Name(s):                                 1,
		"patch services " + server.Name(s):                                    1,
		"patch networkpolicies " + network.ServerPolicyName(s):                1,
		"patch inferencestacks/status " + s.Name:                              2,
	}
	if cache.Enabled(testutil.Hub(s)) {
		w["create secrets "+cache.SecretName(s)] = 1
		w["patch secrets "+cache.SecretName(s)] = 1
		w["patch persistentvolumeclaims "+cache.PVCName(s)] = 2
		w["patch deployments "+cache.Name(s)] = 1
		w["patch services "+cache.Name(s)] = 1
		w["patch networkpolicies "+network.CachePolicyName(s)] = 1
	}
	return w
}

// buildOperator builds this package's binary.
func buildOperator(t *testing.T) string {
	t.Helper()
	binary, err := testenv.BuildOperator(t.TempDir())
	require.NoError(t, err)
	return binary
}

// setupOperatorAccounts makes a ServiceAccount per major in operatorsNS bound
// to the operator's ClusterRole and leader election Role, from
// operator/config/rbac, as a bundle installs them.
func setupOperatorAccounts(t *testing.T, majors ...string) {
	t.Helper()
	createObject(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorsNS}})
	role := &rbacv1.ClusterRole{}
	readYAML(t, filepath.Join("..", "config", "rbac", "role.yaml"), role)
	leader := &rbacv1.Role{}
	readYAML(t, filepath.Join("..", "config", "rbac", "leader_election_role.yaml"), leader)
	leader.Namespace = operatorsNS
	createObject(t, role)
	createObject(t, leader)
	var subjects []rbacv1.Subject
	for _, m := range majors {
		createObject(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: operatorsNS, Name: "operator-" + m}})
		subjects = append(subjects, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: operatorsNS, Name: "operator-" + m})
	}
	createObject(t, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   subjects,
	})
	createObject(t, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: operatorsNS, Name: leader.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: leader.Name},
		Subjects:   subjects,
	})
}

// startOperator runs the binary as ServiceAccount operator-<major> with the
// pin of operator version, and the flags args.
func startOperator(t *testing.T, binary, major, version string, args ...string) *local.Operator {
	t.Helper()
	ctx := context.Background()
	token, err := env.Token(ctx, operatorsNS, "operator-"+major, time.Hour)
	require.NoError(t, err)
	kubeconfig, err := env.KubeconfigFor(token)
	require.NoError(t, err)

	logFile := filepath.Join(t.TempDir(), "operator-"+major+".log")
	op, err := local.StartOperator(binary, kubeconfig, logFile, local.DemoPin(version),
		append([]string{"--leader-elect", "--leader-election-namespace=" + operatorsNS}, args...)...)
	require.NoError(t, err)
	t.Cleanup(func() {
		op.Stop(10 * time.Second)
		if t.Failed() {
			t.Logf("---- operator %s log ----\n%s", major, testenv.LastLines(op.Log(), 40))
		}
	})
	return op
}

// createStack creates an InferenceStack named name in a namespace of its own
// (also named name), labelled with major unless it is empty.
func createStack(t *testing.T, name, major string, opts ...func(*v1alpha1.InferenceStack)) *v1alpha1.InferenceStack {
	t.Helper()
	createObject(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	s := &v1alpha1.InferenceStack{
		ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: name, Labels: map[string]string{}},
		Spec:       v1alpha1.InferenceStackSpec{Distribution: v1alpha1.DistributionSpec{Name: "starter"}},
	}
	if major != "" {
		s.Labels[v1alpha2.LabelOperatorMajor] = major
	}
	for _, o := range opts {
		o(s)
	}
	createObject(t, s)
	return s
}

func createObject(t *testing.T, obj client.Object) {
	t.Helper()
	require.NoError(t, env.Client.Create(context.Background(), obj))
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(data, into))
}

// waitDeploying waits until the stack's config is generated and its server
// rolls out: the furthest a stack gets without a kubelet.
func waitDeploying(t *testing.T, s *v1alpha1.InferenceStack) {
	t.Helper()
	waitFor(t, "stack "+s.Namespace+" Deploying with ConfigGenerated", func() bool {
		got := &v1alpha1.InferenceStack{}
		if env.Client.Get(context.Background(), client.ObjectKeyFromObject(s), got) != nil {
			return false
		}
		return got.Status.Phase == v1alpha2.PhaseDeploying && got.Status.ObservedGeneration == got.Generation &&
			meta.IsStatusConditionTrue(got.Status.Conditions, v1alpha2.TypeConfigGenerated)
	})
}

func waitFor(t *testing.T, what string, done func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !done() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// serverCPU is the CPU request of the stack's server container.
func serverCPU(t *testing.T, s *v1alpha1.InferenceStack) string {
	t.Helper()
	d := &appsv1.Deployment{}
	if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: s.Namespace, Name: s.Name}, d); err != nil {
		return ""
	}
	q := d.Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]
	return q.String()
}

// objectUIDs maps "Kind/name" to the UID of every object of the kinds the
// operator makes in namespace ns.
func objectUIDs(t *testing.T, ns string) map[string]types.UID {
	t.Helper()
	ctx := context.Background()
	out := map[string]types.UID{}
	lists := []client.ObjectList{
		&appsv1.DeploymentList{}, &corev1.ServiceList{}, &corev1.ConfigMapList{}, &corev1.SecretList{},
		&corev1.ServiceAccountList{}, &corev1.PersistentVolumeClaimList{}, &networkingv1.NetworkPolicyList{},
	}
	for _, l := range lists {
		require.NoError(t, env.Client.List(ctx, l, client.InNamespace(ns)))
		require.NoError(t, meta.EachListItem(l, func(o runtime.Object) error {
			obj := o.(client.Object)
			kind := strings.TrimSuffix(fmt.Sprintf("%T", l), "List")
			kind = kind[strings.LastIndex(kind, ".")+1:]
			if kind == "ConfigMap" && obj.GetName() == "kube-root-ca.crt" {
				return nil
			}
			if kind == "PersistentVolumeClaim" {
				out[kind] = obj.GetUID()
			}
			out[kind+"/"+obj.GetName()] = obj.GetUID()
			return nil
		}))
	}
	return out
}

// auditEvent is what the test reads of an audit.k8s.io/v1 Event.
type auditEvent struct {
	Verb string `json:"verb"`
	User struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIVersion  string `json:"apiVersion"`
	} `json:"objectRef"`
	ResponseStatus struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	// RequestObject is the body of a status patch (the policy's Request
	// level), else empty.
	RequestObject json.RawMessage `json:"requestObject"`
	Time          string          `json:"requestReceivedTimestamp"`
}

// statusPatches lists the status patches of the stack in namespace ns since
// offset, each with its time, answer and body.
func statusPatches(t *testing.T, offset int64, ns string) string {
	t.Helper()
	var out []string
	for _, e := range operatorWrites(t, offset, operatorPrefix) {
		if e.ObjectRef.Namespace == ns && e.ObjectRef.Subresource == "status" {
			out = append(out, fmt.Sprintf("%s %s HTTP %d: %s", e.Time, strings.TrimPrefix(e.User.Username, operatorPrefix), e.ResponseStatus.Code, e.RequestObject))
		}
	}
	return strings.Join(out, "\n")
}

// auditWrites counts, by namespace, the write requests the operators made
// from offset on, failed ones too, by "verb resource[/subresource] name".
// An event's name is the name of the object it regards and ".*" (the
// recorder adds a timestamp).
func auditWrites(t *testing.T, offset int64) map[string]map[string]int {
	t.Helper()
	out := map[string]map[string]int{}
	for _, e := range operatorWrites(t, offset, operatorPrefix) {
		ref := e.ObjectRef
		what := e.Verb + " " + ref.Resource
		if ref.Subresource != "" {
			what += "/" + ref.Subresource
		}
		name := ref.Name
		if i := strings.LastIndex(name, "."); ref.Resource == "events" && i >= 0 {
			name = name[:i] + ".*"
		}
		what += " " + name
		if out[ref.Namespace] == nil {
			out[ref.Namespace] = map[string]int{}
		}
		out[ref.Namespace][what]++
	}
	return out
}

// operatorPrefix begins the user name of each operator's ServiceAccount
// (operator-<major>).
const operatorPrefix = "system:serviceaccount:" + operatorsNS + ":operator-"

// operatorWrites reads the audit log from offset: the writes to objects that
// the users whose names begin with userPrefix made (operatorPrefix: the
// operators' ServiceAccounts).
func operatorWrites(t *testing.T, offset int64, userPrefix string) []auditEvent {
	t.Helper()
	f, err := os.Open(auditLog)
	require.NoError(t, err)
	defer f.Close()
	_, err = f.Seek(offset, 0)
	require.NoError(t, err)
	var out []auditEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e auditEvent
		require.NoError(t, json.Unmarshal(sc.Bytes(), &e))
		if strings.HasPrefix(e.User.Username, userPrefix) && e.ObjectRef != nil {
			out = append(out, e)
		}
	}
	require.NoError(t, sc.Err())
	return out
}

// metricsText reads an operator's metrics.
func metricsText(t *testing.T, op *local.Operator) string {
	t.Helper()
	resp, err := http.Get("http://" + op.MetricsAddr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(data)
}

func auditSize(t *testing.T) int64 {
	t.Helper()
	fi, err := os.Stat(auditLog)
	require.NoError(t, err)
	return fi.Size()
}

// checkAudit reads the audit log from offset and checks that each operator
// (by major) wrote only in its stacks' namespaces (and, for leader election, in
// operatorsNS), and did write in the namespaces of mustWrite.
func checkAudit(t *testing.T, offset int64, stacks, mustWrite map[string][]string) {
	t.Helper()
	wrote := map[string]map[string]int{}
	for _, e := range operatorWrites(t, offset, operatorPrefix) {
		if e.ResponseStatus.Code >= 300 {
			continue
		}
		major := strings.TrimPrefix(e.User.Username, operatorPrefix)
		ns := e.ObjectRef.Namespace
		if ns == operatorsNS {
			// The leader election Lease and its events.
			continue
		}
		if !slices.Contains(stacks[major], ns) {
			t.Errorf("operator %s wrote outside its stacks %v: %s %s %s/%s", major, stacks[major], e.Verb, e.ObjectRef.Resource, ns, e.ObjectRef.Name)
		}
		if wrote[major] == nil {
			wrote[major] = map[string]int{}
		}
		wrote[major][ns]++
	}
	for major, namespaces := range mustWrite {
		for _, ns := range namespaces {
			if wrote[major][ns] == 0 {
				t.Errorf("the audit log has no write by operator %s in namespace %s (its stack's)", major, ns)
			}
		}
	}
	t.Logf("writes by operator and namespace since offset %d: %v", offset, wrote)
}
