//go:build e2e

package e2e_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

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

// The deprecation conditions of a ClusterExtension (operator-controller api/v1).
const (
	typeDeprecated        = "Deprecated"
	typePackageDeprecated = "PackageDeprecated"
	typeChannelDeprecated = "ChannelDeprecated"
	typeBundleDeprecated  = "BundleDeprecated"
)

// TestDeprecationConditions: over a catalog made by the release tools whose
// release extras deprecate the operator package, its channel stable-v1 and
// its bundle 1.0.0 (channels/<package>.release.yaml, deprecations), a
// ClusterExtension that installs 1.0.0 through stable-v1 reports
// Deprecated, PackageDeprecated, ChannelDeprecated and BundleDeprecated True
// with the catalog's messages. Moving its range on to 1.0.1 (where
// internal/upgrades predicts) clears BundleDeprecated only.
func TestDeprecationConditions(t *testing.T) {
	dumpLogsOnFailure(t)
	ctx := context.Background()
	const (
		catalog    = "e2e-deprecated"
		ns         = "e2e-deprecated"
		name       = "deprecated"
		channel    = "stable-v1"
		pkgMsg     = "inferencestack-operator is deprecated (e2e): install its successor"
		channelMsg = "stable-v1 is deprecated (e2e): use stable-v2"
		bundleMsg  = "1.0.0 is deprecated (e2e): install 1.0.1"
	)
	dir := t.TempDir()
	catalogDir, err := olm.Release{
		Root:     root,
		Dir:      dir,
		Versions: map[string][]string{bundle.PackageOperator: {"1.0.0", "1.0.1"}},
		Deprecations: map[string]fbc.Deprecations{bundle.PackageOperator: {
			Package:  pkgMsg,
			Channels: map[string]string{channel: channelMsg},
			Bundles:  map[string]string{"1.0.0": bundleMsg},
		}},
		Log: testWriter{t},
	}.Run(ctx)
	require.NoError(t, err)
	serveCatalog(t, catalog, "e2e-deprecated-catalog", filepath.Join(dir, "bundle"), catalogDir)

	apply(t, installer(t, ns, name)...)
	ce := extension(t, bundle.PackageOperator, name, ns, "1.0.0", catalog)
	require.NoError(t, unstructured.SetNestedStringSlice(ce.Object, []string{channel}, "spec", "source", "catalog", "channels"))
	apply(t, ce)
	_, err = cluster.WaitCondition(ctx, ce, olm.TypeInstalled, installTimeout)
	require.NoError(t, err)
	require.Equal(t, "1.0.0", installedVersion(t, ce), "the only bundle in range is installed although deprecated")

	conds := waitDeprecation(t, ce, metav1.ConditionTrue)
	for typ, msgs := range map[string][]string{
		typeDeprecated:        {pkgMsg, channelMsg, bundleMsg},
		typePackageDeprecated: {pkgMsg},
		typeChannelDeprecated: {channelMsg},
		typeBundleDeprecated:  {bundleMsg},
	} {
		c := meta.FindStatusCondition(conds, typ)
		require.NotNil(t, c, "no %s condition: %s", typ, olm.FormatConditions(conds))
		require.Equal(t, metav1.ConditionTrue, c.Status, "%s: %s", typ, c.Message)
		for _, m := range msgs {
			require.Contains(t, c.Message, m, "%s", typ)
		}
		t.Logf("%s=%s (%s): %q", typ, c.Status, c.Reason, c.Message)
	}

	// On to 1.0.1: OLM sorts the deprecated installed bundle after its
	// successor, as upgrades does.
	pkgs, err := fbc.Load(ctx, catalogDir)
	require.NoError(t, err)
	idx := slices.IndexFunc(pkgs, func(p fbc.Package) bool { return p.Name == bundle.PackageOperator })
	require.GreaterOrEqual(t, idx, 0)
	predicted, err := upgrades.Upgrades{Package: pkgs[idx], From: "1.0.0", Channels: []string{channel}, VersionRange: "1.0.x"}.Run(ctx)
	require.NoError(t, err)
	require.Equal(t, bundle.PackageOperator+".v1.0.1", predicted.Final)

	require.NoError(t, cluster.Client.Get(ctx, client.ObjectKeyFromObject(ce), ce))
	require.NoError(t, unstructured.SetNestedField(ce.Object, "1.0.x", "spec", "source", "catalog", "version"))
	require.NoError(t, cluster.Client.Update(ctx, ce))
	_, err = cluster.WaitFor(ctx, ce, installTimeout, func(conds []metav1.Condition) (metav1.Condition, bool) {
		c := meta.FindStatusCondition(conds, olm.TypeInstalled)
		return metav1.Condition{}, c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == ce.GetGeneration() &&
			installedVersionOf(ce) == "1.0.1"
	})
	require.NoError(t, err, "installed %s", installedVersionOf(ce))

	conds = waitDeprecation(t, ce, metav1.ConditionFalse)
	for typ, want := range map[string]metav1.ConditionStatus{
		typeDeprecated:        metav1.ConditionTrue,
		typePackageDeprecated: metav1.ConditionTrue,
		typeChannelDeprecated: metav1.ConditionTrue,
		typeBundleDeprecated:  metav1.ConditionFalse,
	} {
		c := meta.FindStatusCondition(conds, typ)
		require.NotNil(t, c, "no %s condition: %s", typ, olm.FormatConditions(conds))
		require.Equal(t, want, c.Status, "%s: %s", typ, c.Message)
		require.NotContains(t, c.Message, bundleMsg, "%s still names the bundle deprecation", typ)
		t.Logf("after the upgrade %s=%s (%s): %q", typ, c.Status, c.Reason, c.Message)
	}
}

// waitDeprecation waits until ce's BundleDeprecated condition, observed at
// its current generation, has the given status, and returns its conditions.
func waitDeprecation(t *testing.T, ce *unstructured.Unstructured, bundleStatus metav1.ConditionStatus) []metav1.Condition {
	t.Helper()
	ctx := context.Background()
	start := time.Now()
	_, err := cluster.WaitFor(ctx, ce, installTimeout, func(conds []metav1.Condition) (metav1.Condition, bool) {
		c := meta.FindStatusCondition(conds, typeBundleDeprecated)
		return metav1.Condition{}, c != nil && c.Status == bundleStatus && c.ObservedGeneration == ce.GetGeneration()
	})
	require.NoError(t, err)
	t.Logf("BundleDeprecated=%s in %s", bundleStatus, time.Since(start).Round(100*time.Millisecond))
	return mustConditions(t, ce)
}
