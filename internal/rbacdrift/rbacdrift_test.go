package rbacdrift

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	crrbac "sigs.k8s.io/controller-tools/pkg/rbac"

	"github.com/inferencestack/inferencestack/operator/componentrbac"
)

const repo = "../.."

var (
	get   = []string{"get"}
	write = rbacv1.PolicyRule{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterroles", "clusterrolebindings", "roles", "rolebindings"}, Verbs: []string{"create", "patch"}}
)

func rule(group, resource string, verbs []string, names ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: []string{group}, Resources: []string{resource}, Verbs: verbs, ResourceNames: names}
}

func clusterRole(name string, rules ...rbacv1.PolicyRule) componentrbac.Object {
	return componentrbac.Object{Builder: "test.ClusterRole", ClusterRole: &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}}
}

func clusterRoleBinding(name, role string) componentrbac.Object {
	return componentrbac.Object{Builder: "test.ClusterRoleBinding", ClusterRoleBinding: &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role}}}
}

func TestCoverage(t *testing.T) {
	tests := []struct {
		name        string
		owner       Owner
		objs        []componentrbac.Object
		wantCovered []bool
		wantVia     []string
		wantMissing []string // String(rule) + " " + need
	}{
		{
			name:        "held rules",
			owner:       Owner{ClusterRules: []rbacv1.PolicyRule{write, rule("", "pods", []string{"*"})}},
			objs:        []componentrbac.Object{clusterRole("r", rule("", "pods", get)), clusterRoleBinding("b", "r")},
			wantCovered: []bool{true, true},
			wantVia:     []string{"rules", "rules"},
		},
		{
			name:        "missing verb, reported on the role and on its binding",
			owner:       Owner{ClusterRules: []rbacv1.PolicyRule{write, rule("", "pods", get)}},
			objs:        []componentrbac.Object{clusterRole("r", rule("", "pods", []string{"get", "list"})), clusterRoleBinding("b", "r")},
			wantCovered: []bool{false, false},
			wantVia:     []string{"rules", "rules"},
			wantMissing: []string{`apiGroups="" resources=pods verbs=list grant`, `apiGroups="" resources=pods verbs=list grant`},
		},
		{
			name:        "no write",
			owner:       Owner{ClusterRules: []rbacv1.PolicyRule{rule(rbacv1.GroupName, "clusterroles", []string{"create"}), rule("", "pods", get)}},
			objs:        []componentrbac.Object{clusterRole("r", rule("", "pods", get))},
			wantCovered: []bool{false},
			wantVia:     []string{"rules"},
			wantMissing: []string{"apiGroups=rbac.authorization.k8s.io resources=clusterroles resourceNames=r verbs=patch write"},
		},
		{
			name:        "escalate and bind, by name",
			owner:       Owner{ClusterRules: []rbacv1.PolicyRule{write, rule(rbacv1.GroupName, "clusterroles", []string{"escalate", "bind"}, "r")}},
			objs:        []componentrbac.Object{clusterRole("r", rule("", "secrets", get)), clusterRoleBinding("b", "r")},
			wantCovered: []bool{true, true},
			wantVia:     []string{"escalate", "bind"},
		},
		{
			name:        "a binding of a role that is not a component's needs bind",
			owner:       Owner{ClusterRules: []rbacv1.PolicyRule{write, rule("*", "*", []string{"get"})}},
			objs:        []componentrbac.Object{clusterRoleBinding("b", "view")},
			wantCovered: []bool{false},
			wantVia:     []string{""},
			wantMissing: []string{"apiGroups=rbac.authorization.k8s.io resources=clusterroles resourceNames=view verbs=bind bind"},
		},
		{
			name:  "an aggregation rule needs everything",
			owner: Owner{ClusterRules: []rbacv1.PolicyRule{write, rule("", "pods", get)}},
			objs: []componentrbac.Object{{Builder: "test", ClusterRole: &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "agg"},
				AggregationRule: &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"a": "b"}}}}}}},
			wantCovered: []bool{false},
			wantVia:     []string{"rules"},
			wantMissing: []string{"apiGroups=* resources=* verbs=* grant", "nonResourceURLs=* verbs=* grant"},
		},
		{
			name: "namespaced rules count in the operator's namespace only",
			owner: Owner{ClusterRules: []rbacv1.PolicyRule{write}, NamespaceRules: []rbacv1.PolicyRule{rule("coordination.k8s.io", "leases", get)},
				Namespace: "op"},
			objs: []componentrbac.Object{
				{Builder: "test", Role: &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "op"}, Rules: []rbacv1.PolicyRule{rule("coordination.k8s.io", "leases", get)}}},
				{Builder: "test", Role: &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "stack"}, Rules: []rbacv1.PolicyRule{rule("coordination.k8s.io", "leases", get)}}},
			},
			wantCovered: []bool{true, false},
			wantVia:     []string{"rules", "rules"},
			wantMissing: []string{"apiGroups=coordination.k8s.io resources=leases verbs=get grant"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			results, missing, err := Coverage(tc.owner, tc.objs)
			require.NoError(t, err)
			var covered []bool
			var via []string
			for _, r := range results {
				covered = append(covered, r.Covered)
				via = append(via, r.Via)
			}
			require.Equal(t, tc.wantCovered, covered)
			require.Equal(t, tc.wantVia, via)
			var got []string
			for _, m := range missing {
				got = append(got, String(m.Rule)+" "+m.Need)
			}
			require.Equal(t, tc.wantMissing, got)
		})
	}
}

func TestMarkerAndCompact(t *testing.T) {
	tests := []struct {
		name  string
		rules []rbacv1.PolicyRule
		want  []string
	}{
		{
			name:  "verbs of a resource and resources with the same verbs merge",
			rules: []rbacv1.PolicyRule{rule("", "pods", []string{"list"}), rule("", "pods", get), rule("", "services", []string{"get", "list"})},
			want:  []string{`// +kubebuilder:rbac:groups="",resources=pods;services,verbs=get;list`},
		},
		{
			name:  "resource names and subresources",
			rules: []rbacv1.PolicyRule{rule("apps", "deployments/scale", get, "a"), rule("authentication.k8s.io", "tokenreviews", []string{"create"})},
			want: []string{
				"// +kubebuilder:rbac:groups=apps,resources=deployments/scale,resourceNames=a,verbs=get",
				"// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create",
			},
		},
		{
			name:  "non-resource URLs",
			rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: get}},
			want:  []string{"// +kubebuilder:rbac:urls=/metrics,verbs=get"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, r := range Compact(tc.rules) {
				got = append(got, Marker(r))
			}
			require.Equal(t, tc.want, got)
		})
	}
}

func TestReadMarkers(t *testing.T) {
	ms, err := ReadMarkers("testdata/source")
	require.NoError(t, err)
	require.Len(t, ms, 4)
	require.Equal(t, SourceMarker{File: "testdata/source/markers.go", Line: 5, Rule: rule("events.k8s.io", "events", []string{"create", "patch"}),
		Reason: "the event recorder writes events.k8s.io Events"}, ms[1])
	require.Equal(t, rule("", "configmaps", get, "a", "b"), ms[2].Rule)
	require.Equal(t, rbacv1.PolicyRule{NonResourceURLs: []string{"/metrics"}, Verbs: get}, ms[3].Rule)
	require.Empty(t, ms[0].Reason)

	// Every marker generates a rule equal to the marker the check would
	// print for it, as controller-gen parses it.
	for _, m := range ms {
		again, err := crrbac.RuleDefinition.Parse(strings.TrimPrefix(Marker(m.Rule), "// "))
		require.NoError(t, err)
		r := again.(crrbac.Rule)
		require.Equal(t, m.Rule, r.ToRule())
	}
}

func TestAppliedResources(t *testing.T) {
	applied, err := AppliedResources(repo + "/operator/apply/kinds.go")
	require.NoError(t, err)
	require.Equal(t, "Deployment", applied[schema.GroupResource{Group: "apps", Resource: "deployments"}])
	require.Equal(t, "PersistentVolumeClaim", applied[schema.GroupResource{Resource: "persistentvolumeclaims"}])
	require.NotContains(t, applied, schema.GroupResource{Group: rbacv1.GroupName, Resource: "clusterroles"}, "no component applies RBAC")
	require.Equal(t, "ConfigMap", applied[schema.GroupResource{Resource: "configmaps"}])
	require.NotContains(t, applied, schema.GroupResource{Group: "events.k8s.io", Resource: "events"})
}

func TestExplain(t *testing.T) {
	applied := map[schema.GroupResource]string{{Group: "apps", Resource: "deployments"}: "Deployment"}
	markers, err := ReadMarkers("testdata/source")
	require.NoError(t, err)
	rules := []rbacv1.PolicyRule{
		rule("apps", "deployments", get),
		rule("inferencestack.io", "inferencestacks/status", get),
		rule("authentication.k8s.io", "tokenreviews", []string{"create"}),
		rule("events.k8s.io", "events", []string{"create"}),
		rule("", "configmaps", get, "a"),
		rule("", "pods", []string{"get", "list"}),
	}
	needed := []rbacv1.PolicyRule{rule("authentication.k8s.io", "tokenreviews", []string{"create"})}
	explained, unexplained := Explain(rules, needed, applied, markers, "role.yaml")
	why := map[string]string{}
	for _, e := range explained {
		why[String(e.Rule)] = e.Why
	}
	require.Equal(t, map[string]string{
		"apiGroups=apps resources=deployments verbs=get":                         "the operator applies Deployment",
		"apiGroups=inferencestack.io resources=inferencestacks/status verbs=get": "the operator's own API",
		"apiGroups=authentication.k8s.io resources=tokenreviews verbs=create":    "needed to create a component's RBAC object",
		"apiGroups=events.k8s.io resources=events verbs=create":                  "testdata/source/markers.go:5: the event recorder writes events.k8s.io Events",
	}, why)
	// The configmaps marker has no reason; pods has no marker.
	require.Equal(t, []Unexplained{
		{File: "role.yaml", Rule: rule("", "configmaps", get, "a"), Markers: []string{"testdata/source/markers.go:6"}},
		{File: "role.yaml", Rule: rule("", "pods", []string{"get", "list"})},
	}, unexplained)
}

func check(rbacDir, bundleDir string) Check {
	return Check{
		RBACDir: rbacDir, ServiceAccount: "inferencestack-operator",
		SourceDir: repo + "/operator/internal", AppliedKinds: repo + "/operator/apply/kinds.go",
		ReleasesDir: "testdata/releases", BundleDir: bundleDir,
	}
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name          string
		check         Check
		wantFailed    bool
		wantMissing   []string
		wantMarkers   []string
		wantStale     []string
		wantBundles   []string
		wantNotes     int
		wantNote      string
		wantUnexplain []string
	}{
		{
			name:          "the repository's RBAC covers the components; no bundle is a note",
			check:         check(repo+"/operator/config/rbac", t.TempDir()),
			wantNotes:     1,
			wantUnexplain: nil, // the events marker carries its "// rbac:" explanation
		},
		{
			name:          "the fixture bundle is stale against the repository's RBAC, and named",
			check:         check(repo+"/operator/config/rbac", "testdata/bundle"),
			wantFailed:    true,
			wantBundles:   []string{"testdata/bundle/inferencestack-operator/1.0.0"},
			wantStale:     []string{"testdata/bundle/inferencestack-operator/1.0.0/manifests/inferencestack-operator.clusterserviceversion.yaml spec.install.spec.clusterPermissions"},
			wantUnexplain: nil, // the events marker carries its "// rbac:" explanation
		},
		{
			name: "the same bundle of a published release is frozen, not stale",
			check: func() Check {
				c := check(repo+"/operator/config/rbac", "testdata/bundle")
				c.ReleasesDir = publishedReleases(t)
				return c
			}(),
			wantBundles:   []string{"testdata/bundle/inferencestack-operator/1.0.0"},
			wantNotes:     1,
			wantUnexplain: nil,
			wantNote:      "release 1.0.0 is published (",
		},
		{
			// No component creates RBAC today; a component ClusterRole like the
			// one auth.kubernetes once needed shows what the check reports.
			name: "the fixture RBAC lacks a component ClusterRole's rules; its bundle is fresh",
			check: func() Check {
				c := check("testdata/rbac", "testdata/bundle")
				c.Objects = reviewerRole("reviewer")
				return c
			}(),
			wantFailed:  true,
			wantBundles: []string{"testdata/bundle/inferencestack-operator/1.0.0"},
			wantMissing: []string{
				"test.ClusterRole apiGroups=authentication.k8s.io resources=tokenreviews verbs=create",
				"test.ClusterRole apiGroups=authorization.k8s.io resources=subjectaccessreviews verbs=create",
				"test.ClusterRole apiGroups=rbac.authorization.k8s.io resources=clusterroles resourceNames=reviewer verbs=create",
				"test.ClusterRole apiGroups=rbac.authorization.k8s.io resources=clusterroles resourceNames=reviewer verbs=patch",
				"test.ClusterRoleBinding apiGroups=rbac.authorization.k8s.io resources=clusterrolebindings resourceNames=reviewer verbs=create",
				"test.ClusterRoleBinding apiGroups=rbac.authorization.k8s.io resources=clusterrolebindings resourceNames=reviewer verbs=patch",
				"test.ClusterRoleBinding apiGroups=authentication.k8s.io resources=tokenreviews verbs=create",
				"test.ClusterRoleBinding apiGroups=authorization.k8s.io resources=subjectaccessreviews verbs=create",
			},
			wantMarkers: []string{
				"// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create",
				"// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create",
				"// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterrolebindings;clusterroles,resourceNames=reviewer,verbs=create;patch",
			},
		},
		{
			name:          "a missing bundle fails with --require-bundle",
			check:         func() Check { c := check(repo+"/operator/config/rbac", t.TempDir()); c.RequireBundle = true; return c }(),
			wantFailed:    true,
			wantStale:     []string{"*/1.0.0 "},
			wantUnexplain: nil, // the events marker carries its "// rbac:" explanation
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := tc.check.Run(context.Background())
			require.NoError(t, err)
			require.Equal(t, tc.wantFailed, r.Failed())
			var missing, stale, unexplained []string
			for _, m := range r.Missing {
				missing = append(missing, m.Builder+" "+String(m.Rule))
			}
			for _, s := range r.Stale {
				stale = append(stale, s.File+" "+s.Field)
			}
			for _, u := range r.Unexplained {
				unexplained = append(unexplained, String(u.Rule))
			}
			require.ElementsMatch(t, tc.wantMissing, missing)
			require.Equal(t, append([]string{}, tc.wantMarkers...), r.Markers)
			if len(tc.wantStale) == 1 && strings.HasPrefix(tc.wantStale[0], "*/") {
				require.Len(t, stale, 1)
				require.True(t, strings.HasSuffix(stale[0], tc.wantStale[0]), stale[0])
			} else {
				require.Equal(t, tc.wantStale, stale)
			}
			require.Equal(t, append([]string{}, tc.wantBundles...), r.Bundles)
			require.Len(t, r.Notes, tc.wantNotes)
			if tc.wantNote != "" {
				require.Contains(t, r.Notes[0], tc.wantNote)
				require.Contains(t, r.Notes[0], "are not compared with "+repo+"/operator/config/rbac")
				require.True(t, r.Frozen)
			}
			require.Equal(t, tc.wantUnexplain, unexplained)
			require.Equal(t, "1.0.0", r.Version)
		})
	}
}

func TestPrintNamesFileRuleAndMarker(t *testing.T) {
	c := check("testdata/rbac", "testdata/bundle")
	c.Objects = reviewerRole("reviewer")
	r, err := c.Run(context.Background())
	require.NoError(t, err)
	var b strings.Builder
	r.Print(&b)
	out := b.String()
	require.Contains(t, out, "error: testdata/rbac/role.yaml: missing apiGroups=authentication.k8s.io resources=tokenreviews verbs=create: "+
		"needed to grant the rules of ClusterRole reviewer (test.ClusterRole); "+
		"or hold apiGroups=rbac.authorization.k8s.io resources=clusterroles resourceNames=reviewer verbs=escalate\n")
	require.Contains(t, out, "  // +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create\n")
	require.Contains(t, out, "refused: ClusterRole reviewer (test.ClusterRole)\n")
	_, err = os.Stat(filepath.Join("testdata", "rbac", "role.yaml"))
	require.NoError(t, err)
}

// reviewerRole is a component ClusterRole granting TokenReviews and
// SubjectAccessReviews, bound to a server ServiceAccount.
func reviewerRole(name string) []componentrbac.Object {
	return []componentrbac.Object{
		{Builder: "test.ClusterRole", ClusterRole: &rbacv1.ClusterRole{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Rules: []rbacv1.PolicyRule{
				rule("authentication.k8s.io", "tokenreviews", []string{"create"}),
				rule("authorization.k8s.io", "subjectaccessreviews", []string{"create"}),
			}}},
		{Builder: "test.ClusterRoleBinding", ClusterRoleBinding: &rbacv1.ClusterRoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "server", Namespace: "ns"}}}},
	}
}

// publishedReleases is testdata/releases with release 1.0.0 published.
func publishedReleases(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("testdata/releases/1.0.0.yaml")
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "1.0.0.yaml"), append(b, "published: true\n"...), 0o644))
	return dir
}
