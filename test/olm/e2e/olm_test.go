//go:build e2e

package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	mmsemver "github.com/Masterminds/semver/v3"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/inferencestack/inferencestack/internal/bundle"
	"github.com/inferencestack/inferencestack/internal/fbc"
	"github.com/inferencestack/inferencestack/internal/upgrades"
	"github.com/inferencestack/inferencestack/test/olm"
)

const (
	crdName = "inferencestacks.inferencestack.io"
	// ownerNameLabel is the label OLM v1 puts on every object it installs,
	// naming the owning ClusterExtension.
	ownerNameLabel = "olm.operatorframework.io/owner-name"
)

// serveCatalog pushes a release's bundles and catalog (as image
// <RedirectedPrefix>/<repo>:latest), applies the sample ClusterCatalog named
// name with that image and waits until catalogd serves it. The sample itself
// is ("inferencestack", "catalog").
func serveCatalog(t *testing.T, name, repo, bundleRoot, catalogDir string) *unstructured.Unstructured {
	t.Helper()
	ctx := context.Background()
	ref, err := cluster.PushRelease(ctx, bundleRoot, catalogDir, repo)
	require.NoError(t, err)
	cat := sample(t, "clustercatalog.yaml")[0]
	if name != cat.GetName() {
		cat.SetName(name)
		require.NoError(t, unstructured.SetNestedField(cat.Object, ref, "spec", "source", "image", "ref"))
	} else {
		sampleRef, _, _ := unstructured.NestedString(cat.Object, "spec", "source", "image", "ref")
		require.Equal(t, ref, sampleRef, "the sample ClusterCatalog's image")
	}
	apply(t, cat)
	start := time.Now()
	_, err = cluster.WaitCondition(ctx, cat, olm.TypeServing, serveTimeout)
	require.NoError(t, err)
	t.Logf("ClusterCatalog %s Serving in %s", name, time.Since(start).Round(100*time.Millisecond))
	return cat
}

// TestCatalogServesTheReleaseCatalog: the catalog image built from catalog/
// becomes Serving, and catalogd serves exactly what catalog/ holds.
func TestCatalogServesTheReleaseCatalog(t *testing.T) {
	dumpLogsOnFailure(t)
	bundleRoot, catalogDir := releaseCatalog(t)
	// The sample ClusterCatalog as users apply it: its image
	// quay.io/inferencestack/catalog:latest is redirected to the test registry.
	cat := serveCatalog(t, "inferencestack", "catalog", bundleRoot, catalogDir)

	served, err := cluster.CatalogContent(context.Background(), cat)
	require.NoError(t, err)
	got, err := servedObjects(served)
	require.NoError(t, err)
	want, err := catalogObjects(catalogDir)
	require.NoError(t, err)
	require.NotEmpty(t, want)
	require.Equal(t, want, got, "catalogd serves something else than %s holds", catalogDir)
}

// TestInstallOneMajor: the sample manifests (namespace, installer RBAC, both
// ClusterExtensions at 1.x) install both packages, and what the bundles hold
// exists: the CRD, the operator Deployment, its ServiceAccount and RBAC, and
// the operand pin ConfigMap with the bundle's data.
func TestInstallOneMajor(t *testing.T) {
	dumpLogsOnFailure(t)
	bundleRoot, crds, operator := installOneMajor(t)
	checkInstalled(t, filepath.Join(bundleRoot, bundle.PackageCRDs, installedVersion(t, crds)), crds)
	checkInstalled(t, filepath.Join(bundleRoot, bundle.PackageOperator, installedVersion(t, operator)), operator)
}

// installOneMajor serves the release catalog, applies the sample manifests
// (namespace, installer RBAC, both ClusterExtensions at 1.x) as users do,
// waits until both extensions are Installed and returns the release's bundle
// folder and the two ClusterExtensions.
func installOneMajor(t *testing.T) (bundleRoot string, crds, operator *unstructured.Unstructured) {
	t.Helper()
	ctx := context.Background()
	bundleRoot, catalogDir := releaseCatalog(t)
	serveCatalog(t, "inferencestack", "catalog", bundleRoot, catalogDir)

	var objs []*unstructured.Unstructured
	for _, f := range []string{"namespace.yaml", "installer-rbac.yaml", "clusterextension-crds.yaml", "clusterextension-operator.yaml"} {
		objs = append(objs, sample(t, f)...)
	}
	apply(t, objs...)
	crds, operator = objs[len(objs)-2], objs[len(objs)-1]
	for _, ce := range []*unstructured.Unstructured{crds, operator} {
		start := time.Now()
		_, err := cluster.WaitCondition(ctx, ce, olm.TypeInstalled, installTimeout)
		require.NoError(t, err)
		t.Logf("ClusterExtension %s Installed (%s) in %s", ce.GetName(), installedVersion(t, ce), time.Since(start).Round(100*time.Millisecond))
	}
	return bundleRoot, crds, operator
}

// testRelease builds a release with more versions than the repository's:
// operator 1.0.0, 1.0.1, 1.1.0 and 2.0.0, CRDs 1.0.0 and 2.0.0, made by the release
// tools from the repository's inputs, and serves it as catalog "e2e".
func testRelease(t *testing.T) (bundleRoot, catalogDir string) {
	t.Helper()
	dir := t.TempDir()
	catalogDir, err := olm.Release{
		Root: root,
		Dir:  dir,
		Versions: map[string][]string{
			bundle.PackageCRDs:     {"1.0.0", "2.0.0"},
			bundle.PackageOperator: {"1.0.0", "1.0.1", "1.1.0", "2.0.0"},
		},
	}.Run(context.Background())
	require.NoError(t, err)
	bundleRoot = filepath.Join(dir, "bundle")
	serveCatalog(t, "e2e", "e2e-catalog", bundleRoot, catalogDir)
	return bundleRoot, catalogDir
}

// extension is the sample ClusterExtension of pkg, renamed, installing into
// namespace at version range, from catalog.
func extension(t *testing.T, pkg, name, namespace, version, catalog string) *unstructured.Unstructured {
	t.Helper()
	file := "clusterextension-operator.yaml"
	if pkg == bundle.PackageCRDs {
		file = "clusterextension-crds.yaml"
	}
	ce := sample(t, file)[0]
	ce.SetName(name)
	require.NoError(t, unstructured.SetNestedField(ce.Object, namespace, "spec", "namespace"))
	require.NoError(t, unstructured.SetNestedField(ce.Object, version, "spec", "source", "catalog", "version"))
	require.NoError(t, unstructured.SetNestedStringMap(ce.Object, map[string]string{olm.CatalogNameLabel: catalog},
		"spec", "source", "catalog", "selector", "matchLabels"))
	return ce
}

// installer is the sample namespace and installer RBAC for namespace, with
// the installer allowed to manage the named ClusterExtensions: what a user
// applies for each major they install.
func installer(t *testing.T, namespace string, extensions ...string) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	for _, f := range []string{"namespace.yaml", "installer-rbac.yaml"} {
		objs = append(objs, sample(t, f)...)
	}
	for _, o := range objs {
		switch o.GetKind() {
		case "Namespace":
			o.SetName(namespace)
		case "ServiceAccount":
			o.SetNamespace(namespace)
		case "ClusterRole", "ClusterRoleBinding":
			o.SetName(o.GetName() + "-" + namespace)
		}
		if o.GetKind() == "ClusterRole" {
			rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
			for _, r := range rules {
				rule := r.(map[string]any)
				if slices.Contains(toStrings(rule["resources"]), "clusterextensions/finalizers") {
					rule["resourceNames"] = toAny(extensions)
				}
			}
			require.NoError(t, unstructured.SetNestedSlice(o.Object, rules, "rules"))
		}
		if o.GetKind() == "ClusterRoleBinding" {
			require.NoError(t, unstructured.SetNestedField(o.Object, o.GetName(), "roleRef", "name"))
			subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
			for _, s := range subjects {
				s.(map[string]any)["namespace"] = namespace
			}
			require.NoError(t, unstructured.SetNestedSlice(o.Object, subjects, "subjects"))
		}
	}
	return objs
}

// TestUpgradeFollowsTheCatalogEdges: moving a ClusterExtension's version
// range moves the install to the version internal/upgrades predicts
// from the catalog's edges, and a version the graph does not reach is refused
// with OLM's reason, as upgrades says.
func TestUpgradeFollowsTheCatalogEdges(t *testing.T) {
	dumpLogsOnFailure(t)
	ctx := context.Background()
	_, catalogDir := testRelease(t)
	pkgs, err := fbc.Load(ctx, catalogDir)
	require.NoError(t, err)
	idx := slices.IndexFunc(pkgs, func(p fbc.Package) bool { return p.Name == bundle.PackageOperator })
	require.GreaterOrEqual(t, idx, 0)
	graph := pkgs[idx]

	const ns = "e2e-upgrade"
	apply(t, installer(t, ns, "upgrade")...)
	ce := extension(t, bundle.PackageOperator, "upgrade", ns, "1.0.0", "e2e")
	apply(t, ce)
	_, err = cluster.WaitCondition(ctx, ce, olm.TypeInstalled, installTimeout)
	require.NoError(t, err)
	require.Equal(t, "1.0.0", installedVersion(t, ce))

	for _, tc := range []struct {
		versionRange string
		// wantReachable is what this graph must give: whether a bundle in
		// the range is reachable from the installed one.
		wantReachable bool
	}{
		{versionRange: "1.0.x", wantReachable: true},
		{versionRange: "1.x", wantReachable: true},
		{versionRange: "2.0.0", wantReachable: false},
		{versionRange: ">=1.1.0 <3.0.0", wantReachable: true}, // 2.0.0 is in range but has no edge from 1.x
	} {
		t.Run(tc.versionRange, func(t *testing.T) {
			from := installedVersion(t, ce)
			predicted, err := upgrades.Upgrades{Package: graph, From: from, VersionRange: tc.versionRange}.Run(ctx)
			require.NoError(t, err)
			want := from
			if n := len(predicted.Path); n > 0 {
				want = predicted.Path[n-1].Version
			}
			// upgrades ends on the installed bundle when nothing in the range
			// succeeds it; OLM then has nothing to install.
			reachable := inRange(t, want, tc.versionRange)
			require.Equal(t, tc.wantReachable, reachable, "upgrades from %s with range %q: path %+v, unreachable %+v",
				from, tc.versionRange, predicted.Path, predicted.Unreachable)

			require.NoError(t, cluster.Client.Get(ctx, client.ObjectKeyFromObject(ce), ce))
			require.NoError(t, unstructured.SetNestedField(ce.Object, tc.versionRange, "spec", "source", "catalog", "version"))
			require.NoError(t, cluster.Client.Update(ctx, ce))
			start := time.Now()
			if reachable {
				_, err := cluster.WaitFor(ctx, ce, installTimeout, func(conds []metav1.Condition) (metav1.Condition, bool) {
					c := meta.FindStatusCondition(conds, olm.TypeInstalled)
					return metav1.Condition{}, c != nil && c.Status == metav1.ConditionTrue &&
						c.ObservedGeneration == ce.GetGeneration() && installedVersionOf(ce) == want
				})
				require.NoError(t, err, "upgrades predicts %s (path %+v); OLM installed %s", want, predicted.Path, installedVersionOf(ce))
				t.Logf("%s -> %s (range %q) in %s; upgrades path: %+v", from, want, tc.versionRange, time.Since(start).Round(100*time.Millisecond), predicted.Path)
				return
			}
			cond, err := cluster.WaitFor(ctx, ce, installTimeout, func(conds []metav1.Condition) (metav1.Condition, bool) {
				c := meta.FindStatusCondition(conds, olm.TypeProgressing)
				if c == nil || c.ObservedGeneration != ce.GetGeneration() || c.Reason == olm.ReasonSucceeded {
					return metav1.Condition{}, false
				}
				return *c, true
			})
			require.NoError(t, err)
			require.Equal(t, olm.ReasonRetrying, cond.Reason, "Progressing: %s", cond.Message)
			require.Contains(t, cond.Message, "no bundles found for package")
			require.Equal(t, from, installedVersionOf(ce), "OLM moved the install although upgrades finds no path")
			t.Logf("%s with range %q refused by OLM (%s: %s); upgrades: unreachable %+v", from, tc.versionRange, cond.Reason, cond.Message, predicted.Unreachable)
		})
	}
}

// checkSideBySide checks operator majors installed side by side from the
// README's manifests (operator/config/olm, then v2, v3, v4): what each
// bundle holds exists, each in its own namespace; each operator Deployment
// is owned by its own extension, and only 1.x runs without
// --take-unlabeled-stacks=false; the CRD exists once, owned by the
// inferencestack-crds extension, and no operator bundle ships it.
func checkSideBySide(t *testing.T, bundleRoot string, crds *unstructured.Unstructured, operators []*unstructured.Unstructured) {
	t.Helper()
	ctx := context.Background()
	checkInstalled(t, filepath.Join(bundleRoot, bundle.PackageCRDs, installedVersion(t, crds)), crds)
	namespaces := map[string]bool{}
	for _, ce := range operators {
		version := installedVersion(t, ce)
		checkInstalled(t, filepath.Join(bundleRoot, bundle.PackageOperator, version), ce)
		ns, _, _ := unstructured.NestedString(ce.Object, "spec", "namespace")
		require.False(t, namespaces[ns], "two majors install into namespace %s", ns)
		namespaces[ns] = true
		// No object is claimed by two extensions: OLM labels what it
		// installs with its owner, and each operator's objects live in its
		// namespace.
		dep := &unstructured.Unstructured{}
		dep.SetAPIVersion("apps/v1")
		dep.SetKind("Deployment")
		require.NoError(t, cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: bundle.PackageOperator}, dep))
		require.Equal(t, ce.GetName(), dep.GetLabels()[ownerNameLabel], "Deployment %s/%s", ns, dep.GetName())
		// Exactly one major takes unlabelled stacks: 1.x, with the default
		// (true); the others run with --take-unlabeled-stacks=false.
		containers, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
		args := toStrings(containers[0].(map[string]any)["args"])
		require.Equal(t, !strings.HasPrefix(version, "1."), slices.Contains(args, bundle.TakeUnlabeledFlag+"=false"), "%s (%s) args %v", ce.GetName(), version, args)
		// The operator bundle ships no CRD.
		files, err := filepath.Glob(filepath.Join(bundleRoot, bundle.PackageOperator, version, "manifests", "*.yaml"))
		require.NoError(t, err)
		for _, f := range files {
			objs, err := olm.ReadObjects(f)
			require.NoError(t, err)
			for _, o := range objs {
				require.NotEqual(t, "CustomResourceDefinition", o.GetKind(), "operator bundle %s ships a CRD in %s", version, f)
			}
		}
	}
	// The CRD exists once, owned by the CRD package's extension.
	crd := &unstructured.Unstructured{}
	crd.SetAPIVersion("apiextensions.k8s.io/v1")
	crd.SetKind("CustomResourceDefinition")
	require.NoError(t, cluster.Client.Get(ctx, client.ObjectKey{Name: crdName}, crd))
	require.Equal(t, "inferencestack-crds", crd.GetLabels()[ownerNameLabel], "CRD %s labels: %v", crdName, crd.GetLabels())
}

// checkInstalled checks that what the bundle at dir holds exists in the
// cluster for the ClusterExtension ce.
func checkInstalled(t *testing.T, dir string, ce *unstructured.Unstructured) {
	t.Helper()
	ctx := context.Background()
	ns, _, _ := unstructured.NestedString(ce.Object, "spec", "namespace")
	files, err := filepath.Glob(filepath.Join(dir, "manifests", "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no manifests in %s", dir)
	for _, f := range files {
		objs, err := olm.ReadObjects(f)
		require.NoError(t, err)
		for _, want := range objs {
			switch want.GetKind() {
			case "ClusterServiceVersion":
				checkCSV(t, want, ce, ns)
			default:
				got := &unstructured.Unstructured{}
				got.SetGroupVersionKind(want.GroupVersionKind())
				key := client.ObjectKey{Name: want.GetName()}
				if want.GetKind() != "CustomResourceDefinition" {
					key.Namespace = ns
				}
				require.NoError(t, cluster.Client.Get(ctx, key, got), "%s %s from %s", want.GetKind(), key, f)
				if want.GetKind() == "ConfigMap" {
					require.Equal(t, want.Object["data"], got.Object["data"], "ConfigMap %s differs from the bundle's", key)
				}
				t.Logf("%s %s: present", want.GetKind(), key)
			}
		}
	}
}

// checkCSV checks the CSV's install strategy: Deployments and their
// ServiceAccounts in ns, and for each permissions and clusterPermissions
// entry a ClusterRole of the extension holding its rules (OLM v1 installs for
// all namespaces, so permissions become ClusterRoles too) bound to the
// ServiceAccount.
func checkCSV(t *testing.T, csv *unstructured.Unstructured, ce *unstructured.Unstructured, ns string) {
	t.Helper()
	ctx := context.Background()
	spec, _, _ := unstructured.NestedMap(csv.Object, "spec", "install", "spec")
	deployments, _, _ := unstructured.NestedSlice(spec, "deployments")
	for _, d := range deployments {
		name := d.(map[string]any)["name"].(string)
		dep := &unstructured.Unstructured{}
		dep.SetAPIVersion("apps/v1")
		dep.SetKind("Deployment")
		require.NoError(t, cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, dep), "Deployment %s/%s of the CSV", ns, name)
		t.Logf("Deployment %s/%s: present", ns, name)
	}
	roles := listOf("rbac.authorization.k8s.io/v1", "ClusterRoleList")
	require.NoError(t, cluster.Client.List(ctx, roles, client.MatchingLabels{ownerNameLabel: ce.GetName()}))
	for _, field := range []string{"permissions", "clusterPermissions"} {
		perms, _, _ := unstructured.NestedSlice(spec, field)
		for _, p := range perms {
			perm := p.(map[string]any)
			sa := perm["serviceAccountName"].(string)
			acct := &unstructured.Unstructured{}
			acct.SetAPIVersion("v1")
			acct.SetKind("ServiceAccount")
			require.NoError(t, cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: sa}, acct), "ServiceAccount %s/%s of the CSV", ns, sa)
			want, _, _ := unstructured.NestedSlice(perm, "rules")
			idx := slices.IndexFunc(roles.Items, func(r unstructured.Unstructured) bool {
				got, _, _ := unstructured.NestedSlice(r.Object, "rules")
				return len(got) >= len(want) && equalJSON(got[:len(want)], want)
			})
			require.GreaterOrEqual(t, idx, 0, "no ClusterRole of ClusterExtension %s holds the rules of the CSV's %s for %s", ce.GetName(), field, sa)
			role := roles.Items[idx].GetName()
			binding := &unstructured.Unstructured{}
			binding.SetAPIVersion("rbac.authorization.k8s.io/v1")
			binding.SetKind("ClusterRoleBinding")
			require.NoError(t, cluster.Client.Get(ctx, client.ObjectKey{Name: role}, binding), "ClusterRoleBinding %s", role)
			subjects, _, _ := unstructured.NestedSlice(binding.Object, "subjects")
			require.True(t, slices.ContainsFunc(subjects, func(s any) bool {
				m := s.(map[string]any)
				return m["kind"] == "ServiceAccount" && m["name"] == sa && m["namespace"] == ns
			}), "ClusterRoleBinding %s does not bind ServiceAccount %s/%s: %v", role, ns, sa, subjects)
			t.Logf("%s of %s: ClusterRole %s and its binding present", field, sa, role)
		}
	}
}

func equalJSON(a, b any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}

func installedVersion(t *testing.T, ce *unstructured.Unstructured) string {
	t.Helper()
	v := installedVersionOf(ce)
	require.NotEmpty(t, v, "ClusterExtension %s has no status.install.bundle.version", ce.GetName())
	return v
}

func installedVersionOf(ce *unstructured.Unstructured) string {
	v, _, _ := unstructured.NestedString(ce.Object, "status", "install", "bundle", "version")
	return v
}

func mustConditions(t *testing.T, u *unstructured.Unstructured) []metav1.Condition {
	t.Helper()
	conds, err := olm.Conditions(u)
	require.NoError(t, err)
	return conds
}

func listOf(apiVersion, kind string) *unstructured.UnstructuredList {
	l := &unstructured.UnstructuredList{}
	l.SetAPIVersion(apiVersion)
	l.SetKind(kind)
	return l
}

// servedObjects decodes catalogd's stream of JSON objects, each re-encoded
// canonically (sorted keys), sorted.
func servedObjects(data []byte) ([]string, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	var out []string
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, err
		}
		b, err := json.Marshal(obj)
		if err != nil {
			return nil, err
		}
		out = append(out, string(b))
	}
	slices.Sort(out)
	return out, nil
}

// catalogObjects reads every YAML or JSON document of a catalog folder, the
// way servedObjects encodes them.
func catalogObjects(dir string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		switch filepath.Ext(path) {
		case ".yaml", ".yml", ".json":
		default:
			return nil // .indexignore'd files (graph.svg, graph.md)
		}
		objs, err := olm.ReadObjects(path)
		if err != nil {
			return err
		}
		for _, o := range objs {
			b, err := json.Marshal(o.Object)
			if err != nil {
				return err
			}
			out = append(out, string(b))
		}
		return nil
	})
	slices.Sort(out)
	return out, err
}

// inRange says whether version satisfies a ClusterExtension version range
// (Masterminds/semver constraints, as OLM v1 reads them).
func inRange(t *testing.T, version, versionRange string) bool {
	t.Helper()
	c, err := mmsemver.NewConstraint(versionRange)
	require.NoError(t, err)
	v, err := mmsemver.NewVersion(version)
	require.NoError(t, err)
	return c.Check(v)
}

func toStrings(v any) []string {
	var out []string
	if list, ok := v.([]any); ok {
		for _, x := range list {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
	}
	return out
}

func toAny(list []string) []any {
	out := make([]any, len(list))
	for i, s := range list {
		out[i] = s
	}
	return out
}
