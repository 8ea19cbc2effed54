package apiserver

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/inferencestack/inferencestack/internal/csv"
	"github.com/inferencestack/inferencestack/internal/manifests"
	"github.com/inferencestack/inferencestack/internal/rbacdrift"
	"github.com/inferencestack/inferencestack/operator/componentrbac"
)

const (
	namespace = "rbac-proof"
	rbacDir   = "../../../operator/config/rbac"
	sa        = "inferencestack-operator"
)

var (
	rbacGroup = []string{rbacv1.GroupName}
	// write is what server-side apply of new component roles and bindings needs.
	write = rbacv1.PolicyRule{APIGroups: rbacGroup, Resources: []string{"clusterroles", "clusterrolebindings"}, Verbs: []string{"create", "patch"}}
)

// generated returns the cluster rules the operator's ServiceAccount holds in
// the generated RBAC manifests (role.yaml).
func generated(t *testing.T) []rbacv1.PolicyRule {
	t.Helper()
	rbac, err := manifests.LoadRBAC(rbacDir)
	require.NoError(t, err)
	cluster, _, err := csv.Permissions(rbac, sa)
	require.NoError(t, err)
	var rules []rbacv1.PolicyRule
	for _, p := range cluster {
		rules = append(rules, p.Rules...)
	}
	require.NotEmpty(t, rules)
	return rules
}

// components renders the real component RBAC objects for a stack named name.
func components(name string) func(*testing.T) []componentrbac.Object {
	return func(t *testing.T) []componentrbac.Object {
		stack := componentrbac.Fixture()
		stack.Name = name
		objs, err := componentrbac.Objects(stack)
		require.NoError(t, err)
		return objs
	}
}

// roleAndBinding is a component ClusterRole granting rules and a
// ClusterRoleBinding of it, for cases the real components do not exercise.
func roleAndBinding(name string, rules ...rbacv1.PolicyRule) func(*testing.T) []componentrbac.Object {
	return func(*testing.T) []componentrbac.Object {
		return []componentrbac.Object{
			{Builder: "test", ClusterRole: &rbacv1.ClusterRole{
				TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
				ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}},
			{Builder: "test", ClusterRoleBinding: &rbacv1.ClusterRoleBinding{
				TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
				ObjectMeta: metav1.ObjectMeta{Name: name},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
				Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "server", Namespace: namespace}}}},
		}
	}
}

func rule(group, resource string, verbs []string, names ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: []string{group}, Resources: []string{resource}, Verbs: verbs, ResourceNames: names}
}

func url(u string, verbs ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{NonResourceURLs: []string{u}, Verbs: verbs}
}

// TestCoverageAgainstAPIServer binds each case's owner rules to a fresh
// ServiceAccount, impersonates it, and server-side applies each component
// object as the controller does. For every object, the API server must
// accept exactly when rbacdrift.Coverage says covered (and the case's
// expectation agrees); when it refuses, the check must name wantMissing.
func TestCoverageAgainstAPIServer(t *testing.T) {
	get := []string{"get"}
	tests := []struct {
		name    string
		owner   func(*testing.T) []rbacv1.PolicyRule
		objects func(*testing.T) []componentrbac.Object
		// wantCovered is, per object, whether the operator may create it.
		wantCovered []bool
		// wantMissing are rules (rbacdrift.String) the check must name.
		wantMissing []string
	}{
		{
			// No component creates RBAC today (kubernetes auth needs none).
			name:        "generated role.yaml covers the components (none create RBAC)",
			owner:       generated,
			objects:     components("gen"),
			wantCovered: []bool{},
		},
		{
			name:        "owner without create on tokenreviews cannot grant it",
			owner:       func(*testing.T) []rbacv1.PolicyRule { return []rbacv1.PolicyRule{write} },
			objects:     roleAndBinding("no-tokenreviews", rule("authentication.k8s.io", "tokenreviews", []string{"create"})),
			wantCovered: []bool{false, false},
			wantMissing: []string{"apiGroups=authentication.k8s.io resources=tokenreviews verbs=create"},
		},
		{
			name: "owner without patch on clusterroles and clusterrolebindings (server-side apply needs it)",
			owner: func(*testing.T) []rbacv1.PolicyRule {
				return []rbacv1.PolicyRule{
					{APIGroups: rbacGroup, Resources: []string{"clusterroles", "clusterrolebindings"}, Verbs: []string{"create"}},
					rule("authentication.k8s.io", "tokenreviews", []string{"create"}),
				}
			},
			objects:     roleAndBinding("no-patch", rule("authentication.k8s.io", "tokenreviews", []string{"create"})),
			wantCovered: []bool{false, false},
			wantMissing: []string{
				"apiGroups=rbac.authorization.k8s.io resources=clusterroles resourceNames=no-patch verbs=patch",
				"apiGroups=rbac.authorization.k8s.io resources=clusterrolebindings resourceNames=no-patch verbs=patch",
			},
		},
		{
			name:        "missing verb",
			owner:       func(*testing.T) []rbacv1.PolicyRule { return []rbacv1.PolicyRule{write, rule("", "pods", get)} },
			objects:     roleAndBinding("missing-verb", rule("", "pods", []string{"get", "list"})),
			wantCovered: []bool{false, false},
			wantMissing: []string{`apiGroups="" resources=pods verbs=list`},
		},
		{
			name: "missing subresource",
			owner: func(*testing.T) []rbacv1.PolicyRule {
				return []rbacv1.PolicyRule{write, rule("apps", "deployments", get)}
			},
			objects:     roleAndBinding("missing-subresource", rule("apps", "deployments/scale", get)),
			wantCovered: []bool{false, false},
			wantMissing: []string{"apiGroups=apps resources=deployments/scale verbs=get"},
		},
		{
			name:        "subresource wildcard covers the subresource",
			owner:       func(*testing.T) []rbacv1.PolicyRule { return []rbacv1.PolicyRule{write, rule("apps", "*/scale", get)} },
			objects:     roleAndBinding("subresource-wildcard", rule("apps", "deployments/scale", get)),
			wantCovered: []bool{true, true},
		},
		{
			name: "resourceName too narrow",
			owner: func(*testing.T) []rbacv1.PolicyRule {
				return []rbacv1.PolicyRule{write, rule("", "configmaps", get, "a")}
			},
			objects:     roleAndBinding("narrow-name", rule("", "configmaps", get, "a", "b")),
			wantCovered: []bool{false, false},
			wantMissing: []string{`apiGroups="" resources=configmaps resourceNames=b verbs=get`},
		},
		{
			name: "resourceNames within the held names",
			owner: func(*testing.T) []rbacv1.PolicyRule {
				return []rbacv1.PolicyRule{write, rule("", "configmaps", get, "a", "b")}
			},
			objects:     roleAndBinding("held-names", rule("", "configmaps", get, "b")),
			wantCovered: []bool{true, true},
		},
		{
			name:        "missing nonResourceURL",
			owner:       func(*testing.T) []rbacv1.PolicyRule { return []rbacv1.PolicyRule{write, url("/metrics", "get")} },
			objects:     roleAndBinding("missing-url", url("/metrics", "get"), url("/debug/pprof", "get")),
			wantCovered: []bool{false, false},
			wantMissing: []string{"nonResourceURLs=/debug/pprof verbs=get"},
		},
		{
			name:        "nonResourceURL prefix wildcard",
			owner:       func(*testing.T) []rbacv1.PolicyRule { return []rbacv1.PolicyRule{write, url("/debug/*", "get")} },
			objects:     roleAndBinding("url-wildcard", url("/debug/pprof", "get")),
			wantCovered: []bool{true, true},
		},
		{
			name: "escalate on the role lifts the need for its rules, not for the binding's",
			owner: func(*testing.T) []rbacv1.PolicyRule {
				return []rbacv1.PolicyRule{write, rule(rbacv1.GroupName, "clusterroles", []string{"escalate"}, "escalate")}
			},
			objects:     roleAndBinding("escalate", rule("", "secrets", get)),
			wantCovered: []bool{true, false},
			wantMissing: []string{`apiGroups="" resources=secrets verbs=get`},
		},
		{
			name: "escalate on another role name does not",
			owner: func(*testing.T) []rbacv1.PolicyRule {
				return []rbacv1.PolicyRule{write, rule(rbacv1.GroupName, "clusterroles", []string{"escalate"}, "other")}
			},
			objects:     roleAndBinding("escalate-other", rule("", "secrets", get)),
			wantCovered: []bool{false, false},
			wantMissing: []string{`apiGroups="" resources=secrets verbs=get`},
		},
		{
			name: "escalate and bind lift the need for every rule",
			owner: func(*testing.T) []rbacv1.PolicyRule {
				return []rbacv1.PolicyRule{write, rule(rbacv1.GroupName, "clusterroles", []string{"escalate", "bind"})}
			},
			objects:     roleAndBinding("escalate-bind", rule("", "secrets", get), url("/metrics", "get")),
			wantCovered: []bool{true, true},
		},
		{
			name: "wildcards cover everything",
			owner: func(*testing.T) []rbacv1.PolicyRule {
				return []rbacv1.PolicyRule{rule("*", "*", []string{"*"}), url("*", "*")}
			},
			objects:     roleAndBinding("wildcards", rule("apps", "deployments/scale", []string{"update"}), url("/metrics", "get")),
			wantCovered: []bool{true, true},
		},
	}
	ctx := context.Background()
	admin, err := kubernetes.NewForConfig(env.Config)
	require.NoError(t, err)
	_, err = admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{})
	require.NoError(t, err)

	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			owner := tc.owner(t)
			objs := tc.objects(t)
			require.Len(t, tc.wantCovered, len(objs), "one expectation per object")

			results, missing, err := rbacdrift.Coverage(rbacdrift.Owner{ClusterRules: owner}, objs)
			require.NoError(t, err)
			var named []string
			for _, m := range missing {
				named = append(named, rbacdrift.String(m.Rule))
			}
			for _, want := range tc.wantMissing {
				require.Contains(t, named, want, "the check must name the missing rule")
			}

			as := impersonate(t, admin, fmt.Sprintf("owner-%d", i), owner)
			for j, o := range objs {
				accepted, refusal := applyAs(t, as, admin, o)
				t.Logf("%s: API server accepted=%v check covered=%v (%s) %s", results[j].Object, accepted, results[j].Covered, results[j].Via, refusal)
				require.Equal(t, accepted, results[j].Covered, "%s: the check and the API server disagree (API server: %s)", results[j].Object, refusal)
				require.Equal(t, tc.wantCovered[j], accepted, "%s: the case's expectation is wrong", results[j].Object)
				if !accepted {
					for _, m := range missing {
						if m.Object == results[j].Object && m.Need == rbacdrift.NeedGrant {
							require.Contains(t, refusal, what(m.Rule), "the API server names the rule the check names")
						}
					}
				}
			}
		})
	}
}

// what is how the API server's refusal names a rule's resource or URL.
func what(r rbacv1.PolicyRule) string {
	if len(r.NonResourceURLs) > 0 {
		return r.NonResourceURLs[0]
	}
	return r.Resources[0]
}

// impersonate creates a ServiceAccount holding rules (through a ClusterRole
// and ClusterRoleBinding), waits until the authorizer sees them, and returns
// a client acting as it.
func impersonate(t *testing.T, admin kubernetes.Interface, name string, rules []rbacv1.PolicyRule) kubernetes.Interface {
	t.Helper()
	ctx := context.Background()
	// A probe rule that no case's component needs tells when the binding is in effect.
	probe := rule("", "configmaps", []string{"get"}, "probe-"+name)
	_, err := admin.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: append(slices.Clone(rules), probe)}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: namespace}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	user := "system:serviceaccount:" + namespace + ":" + name
	require.Eventually(t, func() bool {
		sar, err := admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: namespace, Verb: "get", Resource: "configmaps", Name: "probe-" + name},
		}}, metav1.CreateOptions{})
		return err == nil && sar.Status.Allowed
	}, 10*time.Second, 50*time.Millisecond, "the ServiceAccount's ClusterRoleBinding never took effect")
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	c, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return c
}

// applyAs server-side applies o as the impersonated client, the way the
// controller writes it. It returns whether the API server accepted it and,
// if not, its refusal, which must be Forbidden. A refused role is then
// created as admin, so that a binding of it is judged on its own.
func applyAs(t *testing.T, as, admin kubernetes.Interface, o componentrbac.Object) (bool, string) {
	t.Helper()
	ctx := context.Background()
	opts := metav1.ApplyOptions{FieldManager: "inferencestack-operator", Force: true}
	var err error
	switch {
	case o.ClusterRole != nil:
		var ac rbacv1ac.ClusterRoleApplyConfiguration
		convert(t, o.ClusterRole, &ac)
		_, err = as.RbacV1().ClusterRoles().Apply(ctx, &ac, opts)
		if err != nil {
			_, cerr := admin.RbacV1().ClusterRoles().Create(ctx, o.ClusterRole, metav1.CreateOptions{})
			require.NoError(t, cerr)
		}
	case o.ClusterRoleBinding != nil:
		var ac rbacv1ac.ClusterRoleBindingApplyConfiguration
		convert(t, o.ClusterRoleBinding, &ac)
		_, err = as.RbacV1().ClusterRoleBindings().Apply(ctx, &ac, opts)
	default:
		t.Fatalf("%s: the test applies only ClusterRoles and ClusterRoleBindings", o.Builder)
	}
	if err == nil {
		return true, ""
	}
	require.True(t, apierrors.IsForbidden(err), "a refusal other than Forbidden: %v", err)
	return false, strings.ReplaceAll(err.Error(), "\n", " ")
}

func convert(t *testing.T, from, to any) {
	t.Helper()
	data, err := json.Marshal(from)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, to))
}
