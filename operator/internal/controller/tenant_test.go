package controller_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/internal/controller"
	"github.com/inferencestack/inferencestack/operator/internal/serverstatus"
	"github.com/inferencestack/inferencestack/test/testutil"
)

// Values planted in Secrets the tenant may not read: none may show up
// anywhere the tenant can look (docs/security.md).
const (
	markerA   = "MARKER-a-admin-only-7f3c"
	markerB   = "MARKER-b-other-namespace-91d2"
	markerBad = "MARKER-malformed-value-44e1"
)

// TestTenantGetsNothingThroughTheOperator: a user who may only create
// InferenceStacks in namespace A (and read them) tries, through stack
// specs, to get through the operator what their own rights do not give
// them. The operator runs with exactly its ClusterRole
// (config/rbac/role.yaml) on an API server with RBAC on. Each attempt is
// refused or has no effect:
//
//   - a token of a ServiceAccount of their choice (the server's
//     workload.serviceAccountName, bound to admin): the only token the
//     operator presents to the server is its own prober identity's for that
//     stack, which holds no rights;
//   - a ServiceAccount named as the prober's would be (admin-bound, made
//     before the stack): the operator refuses the name (NameTaken), leaves it
//     unchanged and requests no token for it;
//   - Secrets of namespace B (names with a slash or ..) and of namespace A
//     that the tenant may not read: their values appear in no status,
//     condition, event, ConfigMap or operator log line, and neither does a
//     malformed value the operator cannot parse;
//   - a hostPath volume through the v1alpha2 annotation of a v1alpha1 write
//     (which the API server's v1alpha2 rules never see): no such pod;
//   - every object the operator writes is in namespace A, none is
//     cluster-scoped, and every pod template it writes passes the API
//     server's restricted Pod Security admission.
func TestTenantGetsNothingThroughTheOperator(t *testing.T) {
	ctx := context.Background()
	a, b := namespace(t), namespace(t)
	enforceRestricted(t, a)

	// The tenant: InferenceStacks in A, nothing else.
	grant(t, a, "alice", rbacv1.PolicyRule{APIGroups: []string{"inferencestack.io"}, Resources: []string{"inferencestacks"},
		Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
		rbacv1.PolicyRule{APIGroups: []string{"inferencestack.io"}, Resources: []string{"inferencestacks/status"}, Verbs: []string{"get"}})
	tenantCfg := rest.CopyConfig(env.Config)
	tenantCfg.Impersonate = rest.ImpersonationConfig{UserName: "alice"}
	tenant, err := client.New(tenantCfg, client.Options{Scheme: scheme()})
	if err != nil {
		t.Fatal(err)
	}
	if err := tenant.Get(ctx, client.ObjectKey{Namespace: a, Name: "db-admin"}, &corev1.Secret{}); !apierrors.IsForbidden(err) {
		t.Fatalf("the tenant reading a Secret: %v, want Forbidden (the test's premise)", err)
	}

	// What the tenant is after.
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: a, Name: "db-admin"},
		StringData: map[string]string{"url": "postgresql://admin:" + markerA + "@db.example:5432/prod", "key": markerA}})
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: a, Name: "bad-conn"},
		StringData: map[string]string{"url": "not a connection string " + markerBad}})
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: b, Name: "other"}, StringData: map[string]string{"key": markerB}})
	for _, name := range []string{"powerful", "evil-prober"} {
		create(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: a, Name: name}})
		create(t, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: a, Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "admin"},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: a}}})
	}

	// The operator, as its own ClusterRole allows, reading the servers
	// through a stand-in that records every bearer token it is sent.
	srv := &tokenRecorder{}
	server := httptest.NewServer(srv)
	t.Cleanup(server.Close)
	p := &serverstatus.Prober{Interval: 200 * time.Millisecond, Timeout: 5 * time.Second,
		Resolve: func(string) string { return server.Listener.Addr().String() }}
	var logs syncBuffer
	label := map[string]string{"test.inferencestack.io/tenant": a}
	op := startOperator(t, asIdentity(operatorIdentity(t, a)), withProber(p), loggingTo(&logs),
		onlyStacks(labels.SelectorFromSet(label)))
	// Its sweep at start-up may remove the watched label from user objects
	// other tests' deleted stacks left in their namespaces: not the
	// tenant's doing, so not counted below.
	eventually(t, timeout, func() error {
		if !controller.Swept(op.reconciler) {
			return errors.New("the operator has not swept the watched labels yet")
		}
		return nil
	})
	op.writes.Reset()

	stack := func(name string, opts ...testutil.Option) *v1alpha1.InferenceStack {
		s := testutil.Stack(name, append(opts, testutil.WithNamespace(a))...)
		s.Labels = label
		return s
	}
	attempts := []struct {
		name  string
		stack *v1alpha1.InferenceStack
	}{
		{"a token of a ServiceAccount of its choice", stack("tok", testutil.WithKubernetesAuth("system:authenticated"),
			testutil.WithSpec(func(s *v1alpha1.InferenceStackSpec) {
				s.Workload = &v1alpha1.WorkloadSpec{ServiceAccountName: "powerful"}
			}))},
		{"a ServiceAccount named as the prober's", stack("evil", testutil.WithKubernetesAuth("system:authenticated"))},
		{"a Secret it may not read, as an API key", stack("key", testutil.WithProviders("inference",
			testutil.Provider("openai", testutil.WithAPIKey("db-admin", "key"))))},
		{"a Secret of another namespace", stack("cross", testutil.WithProviders("inference",
			testutil.Provider("openai", testutil.WithAPIKey("../"+b+"/other", "key"))))},
		{"the operator's own Secret", stack("own", testutil.WithProviders("inference",
			testutil.Provider("openai", testutil.WithAPIKey("inferencestack-conversion-tls", "tls.key"))))},
		{"a cache, whose pod the operator runs too", stack("cached", testutil.WithCache())},
		{"a malformed value the operator reads", stack("bad", testutil.WithSQL(v1alpha1.SQLStoreSpec{Type: v1alpha1.SQLStorePostgres,
			ConnectionString: testutil.SecretKey("bad-conn", "url")}))},
		{"a hostPath volume through the v1alpha2 annotation", func() *v1alpha1.InferenceStack {
			s := stack("host")
			s.Annotations = map[string]string{v1alpha2.SpecAnnotation: `{"workload":{"podOverrides":{"volumes":[{"name":"host","hostPath":{"path":"/"}}],"volumeMounts":[{"name":"host","mountPath":"/host"}]}}}`}
			return s
		}()},
	}
	for _, at := range attempts {
		if err := tenant.Create(ctx, at.stack); err != nil {
			t.Logf("%s: refused by the API server: %v", at.name, err)
			at.stack = nil
		}
	}
	if _, err := get(t, &v1alpha1.InferenceStack{}, a, "tok"); err != nil {
		t.Fatal(err)
	}
	converged(t, a, "tok")
	available(t, a, "tok")
	providersHealthy(t, a, "tok", metav1.ConditionTrue, v1alpha2.ReasonProvidersHealthy)
	// What each attempt comes to: refused with a condition, or (an API key
	// from a Secret of the namespace) what a Deployment referencing it
	// would do, the value passed to the pod by secretKeyRef.
	for name, reason := range map[string]string{
		"evil":  v1alpha2.ReasonNameTaken,
		"key":   v1alpha2.ReasonAsExpected,
		"cross": v1alpha2.ReasonApplyFailed, // client-go refuses the name before any request
		"bad":   v1alpha2.ReasonInvalidConfig,
		// Names are of the stack's namespace: the operator's Secrets are not.
		"own":    v1alpha2.ReasonSecretNotFound,
		"cached": v1alpha2.ReasonAsExpected,
		"host":   v1alpha2.ReasonInvalidSpec, // the v1alpha2 CRD's volume rule, run by the operator on the annotation
	} {
		settled(t, a, name)
		got, err := get(t, &v1alpha1.InferenceStack{}, a, name)
		if err != nil {
			t.Fatal(err)
		}
		if c := findCondition(got, v1alpha2.TypeDegraded); c == nil || c.Reason != reason {
			t.Errorf("stack %s: Degraded %+v, want reason %s", name, c, reason)
		}
	}

	t.Run("no token but the prober's own", func(t *testing.T) {
		who := srv.identities(t)
		want := []string{"system:serviceaccount:" + a + ":tok-prober"}
		if !slices.Equal(who, want) {
			t.Errorf("the server was sent tokens of %q, want only %q", who, want)
		}
	})
	t.Run("a ServiceAccount of the prober's name is not taken over", func(t *testing.T) {
		s, err := get(t, &v1alpha1.InferenceStack{}, a, "evil")
		if err != nil {
			t.Fatal(err)
		}
		c := findCondition(s, v1alpha2.TypeDegraded)
		if c == nil || c.Reason != v1alpha2.ReasonNameTaken || !strings.Contains(c.Message, "ServiceAccount "+a+"/evil-prober") {
			t.Errorf("Degraded %+v, want reason %s naming ServiceAccount %s/evil-prober", c, v1alpha2.ReasonNameTaken, a)
		}
		sa, err := get(t, &corev1.ServiceAccount{}, a, "evil-prober")
		if err != nil {
			t.Fatal(err)
		}
		if len(sa.Labels) != 0 || len(sa.OwnerReferences) != 0 {
			t.Errorf("the user's ServiceAccount evil-prober was changed: labels %v, owners %v", sa.Labels, sa.OwnerReferences)
		}
	})
	t.Run("no hostPath pod", func(t *testing.T) {
		var deps appsv1.DeploymentList
		if err := env.Client.List(ctx, &deps, client.InNamespace(a)); err != nil {
			t.Fatal(err)
		}
		for _, d := range deps.Items {
			for _, v := range d.Spec.Template.Spec.Volumes {
				if v.HostPath != nil {
					t.Errorf("Deployment %s mounts hostPath %s", d.Name, v.HostPath.Path)
				}
			}
		}
	})
	t.Run("every pod template passes restricted Pod Security", func(t *testing.T) {
		var deps appsv1.DeploymentList
		if err := env.Client.List(ctx, &deps, client.InNamespace(a)); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, d := range deps.Items {
			names = append(names, d.Name)
		}
		if !slices.Contains(names, "tok") || !slices.Contains(names, "cached-cache") {
			t.Fatalf("Deployments %q, want the servers' and the cache's", names)
		}
		for _, d := range deps.Items {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: a, Name: d.Name + "-psa"}, Spec: d.Spec.Template.Spec}
			if err := env.Client.Create(ctx, pod, client.DryRunAll); err != nil {
				t.Errorf("a pod of Deployment %s under restricted Pod Security: %v", d.Name, err)
			}
		}
	})
	t.Run("nothing written outside namespace A", func(t *testing.T) {
		for _, w := range op.writes.Writes() {
			if !strings.Contains(w, " "+a+"/") {
				t.Errorf("the operator wrote outside namespace %s: %s", a, w)
			}
		}
	})
	t.Run("no Secret value anywhere the tenant can look", func(t *testing.T) {
		var seen bytes.Buffer
		var stacks v1alpha1.InferenceStackList
		if err := tenant.List(ctx, &stacks, client.InNamespace(a)); err != nil {
			t.Fatal(err)
		}
		var events eventsv1.EventList
		var configMaps corev1.ConfigMapList
		for _, l := range []client.ObjectList{&events, &configMaps} {
			if err := env.Client.List(ctx, l, client.InNamespace(a)); err != nil {
				t.Fatal(err)
			}
		}
		for _, o := range []any{stacks, events, configMaps} {
			data, err := json.Marshal(o)
			if err != nil {
				t.Fatal(err)
			}
			seen.Write(data)
		}
		seen.WriteString(logs.String())
		for _, m := range []string{markerA, markerB, markerBad} {
			if i := strings.Index(seen.String(), m); i >= 0 {
				t.Errorf("the value %s shows: ...%s...", m, seen.String()[max(0, i-200):min(seen.Len(), i+50)])
			}
		}
		if len(events.Items) == 0 || logs.Len() == 0 {
			t.Errorf("%d events, %d bytes of logs: the scan saw nothing", len(events.Items), logs.Len())
		}
	})
}

// tokenRecorder answers a Llama Stack server's version and providers (an
// empty list) to a request with a bearer token, and records the tokens.
type tokenRecorder struct {
	mu     sync.Mutex
	tokens []string
}

func (r *tokenRecorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	tok, ok := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
	if !ok {
		http.Error(w, `{"error":{"message":"Authentication required"}}`, http.StatusUnauthorized)
		return
	}
	r.mu.Lock()
	if !slices.Contains(r.tokens, tok) {
		r.tokens = append(r.tokens, tok)
	}
	r.mu.Unlock()
	if strings.HasSuffix(req.URL.Path, "/version") {
		fmt.Fprint(w, `{"version":"0.2.23"}`)
		return
	}
	fmt.Fprint(w, `{"data":[]}`)
}

// identities are the users the recorded tokens authenticate as, asked of
// the API server as the server's kubernetes auth asks (SelfSubjectReview).
func (r *tokenRecorder) identities(t *testing.T) []string {
	t.Helper()
	r.mu.Lock()
	tokens := slices.Clone(r.tokens)
	r.mu.Unlock()
	var who []string
	for _, tok := range tokens {
		cfg := rest.AnonymousClientConfig(env.Config)
		cfg.BearerToken = tok
		c, err := client.New(cfg, client.Options{Scheme: scheme()})
		if err != nil {
			t.Fatal(err)
		}
		review := &authenticationv1.SelfSubjectReview{}
		if err := c.Create(context.Background(), review); err != nil {
			t.Fatalf("a token the server was sent: %v", err)
		}
		who = append(who, review.Status.UserInfo.Username)
	}
	return who
}

// operatorIdentity is a client identity holding exactly the operator's
// ClusterRole (config/rbac/role.yaml), bound for this test.
func operatorIdentity(t *testing.T, suffix string) *rest.Config {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.ClusterRole
	if err := yaml.Unmarshal(data, &role); err != nil {
		t.Fatal(err)
	}
	user := "inferencestack-operator-" + suffix
	role.ObjectMeta = metav1.ObjectMeta{Name: user}
	create(t, &role)
	create(t, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}})
	path, err := env.KubeconfigForUser(user)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// grant gives user the rules in namespace ns.
func grant(t *testing.T, ns, user string, rules ...rbacv1.PolicyRule) {
	t.Helper()
	create(t, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user}, Rules: rules})
	create(t, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: user},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}})
}

// enforceRestricted has the API server's Pod Security admission enforce
// the restricted standard in ns.
func enforceRestricted(t *testing.T, ns string) {
	t.Helper()
	edit(t, &corev1.Namespace{}, "", ns, func(n *corev1.Namespace) { n.Labels["pod-security.kubernetes.io/enforce"] = "restricted" })
}

// settled waits until the stack's status is of its generation, whatever
// it says.
func settled(t *testing.T, ns, name string) {
	t.Helper()
	eventually(t, timeout, func() error {
		s, err := get(t, &v1alpha1.InferenceStack{}, ns, name)
		if err != nil {
			return err
		}
		if s.Status.ObservedGeneration != s.Generation {
			return fmt.Errorf("the status of %s is of generation %d, the spec %d", name, s.Status.ObservedGeneration, s.Generation)
		}
		return nil
	})
}

func findCondition(s *v1alpha1.InferenceStack, typ string) *metav1.Condition {
	for i := range s.Status.Conditions {
		if s.Status.Conditions[i].Type == typ {
			return &s.Status.Conditions[i]
		}
	}
	return nil
}

// syncBuffer is a bytes.Buffer safe for the operator's concurrent logging.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *syncBuffer) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Len()
}

// TestAuthorRightsPolicy: the opt-in admission policy of docs/security.md,
// applied as shipped (its binding narrowed to this test's namespace),
// refuses an InferenceStack from a user who may only create
// InferenceStacks, admits one from a user who may also create Deployments
// and read Secrets (as the `edit` role allows), and lets the first user change what is not
// the spec (a label).
func TestAuthorRightsPolicy(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "policies", "inferencestack-author-rights.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(data), "\n---\n")
	if len(docs) != 2 {
		t.Fatalf("the policy file holds %d documents, want the policy and its binding", len(docs))
	}
	var policy admissionregistrationv1.ValidatingAdmissionPolicy
	var binding admissionregistrationv1.ValidatingAdmissionPolicyBinding
	for i, into := range []any{&policy, &binding} {
		if err := yaml.UnmarshalStrict([]byte(docs[i]), into); err != nil {
			t.Fatal(err)
		}
	}
	// One policy per test namespace: other tests' users stay unchecked.
	policy.Name += "-" + ns
	binding.Name, binding.Spec.PolicyName = policy.Name, policy.Name
	binding.Spec.MatchResources = &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
		MatchLabels: map[string]string{corev1.LabelMetadataName: ns}}}
	create(t, &policy)
	create(t, &binding)

	grant(t, ns, "carol", rbacv1.PolicyRule{APIGroups: []string{"inferencestack.io"}, Resources: []string{"inferencestacks"},
		Verbs: []string{"get", "create", "update", "patch"}})
	// What the edit role grants that matters here (the test's control plane
	// runs no ClusterRole aggregation, so edit itself is empty).
	grant(t, ns, "dave", rbacv1.PolicyRule{APIGroups: []string{"inferencestack.io"}, Resources: []string{"inferencestacks"},
		Verbs: []string{"get", "create"}},
		rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"create"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}})
	as := func(user string) client.Client {
		cfg := rest.CopyConfig(env.Config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
		c, err := client.New(cfg, client.Options{Scheme: scheme()})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	carol, dave := as("carol"), as("dave")

	// The API server takes up a new policy within a second or so: until
	// then a dry run is admitted.
	eventually(t, timeout, func() error {
		err := carol.Create(ctx, testutil.Stack("probe", testutil.WithNamespace(ns)), client.DryRunAll)
		if err == nil {
			return fmt.Errorf("not refused yet")
		}
		if !strings.Contains(err.Error(), "carol may not create Deployments in namespace "+ns) {
			t.Fatalf("carol's stack: %v, want the policy's refusal", err)
		}
		return nil
	})
	if err := dave.Create(ctx, testutil.Stack("edited", testutil.WithNamespace(ns))); err != nil {
		t.Fatalf("a namespace editor's stack: %v, want it admitted", err)
	}
	// A change of anything but the spec and annotations is not checked.
	var s v1alpha1.InferenceStack
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := carol.Get(ctx, client.ObjectKey{Namespace: ns, Name: "edited"}, &s); err != nil {
			return err
		}
		s.Labels = map[string]string{"team": "a"}
		return carol.Update(ctx, &s)
	}); err != nil {
		t.Errorf("carol labelling a stack: %v, want it admitted", err)
	}
	s.Spec.Workload = &v1alpha1.WorkloadSpec{ServiceAccountName: "powerful"}
	if err := carol.Update(ctx, &s); err == nil || !strings.Contains(err.Error(), "may not create Deployments") {
		t.Errorf("carol changing a stack's spec: %v, want the policy's refusal", err)
	}
}
