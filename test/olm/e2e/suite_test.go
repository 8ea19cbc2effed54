//go:build e2e

package e2e_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/inferencestack/inferencestack/internal/bundle"
	"github.com/inferencestack/inferencestack/test/olm"
	"github.com/inferencestack/inferencestack/test/registry"
	"github.com/inferencestack/inferencestack/test/testenv"
)

// Timeouts for OLM decisions: measured at about 7-10 s each on 2 cores.
const (
	serveTimeout   = 90 * time.Second
	installTimeout = 120 * time.Second
	deleteTimeout  = 120 * time.Second
)

var (
	cluster *olm.Cluster
	// root is the repository root.
	root string
	// auditLog is the API server's audit log of writes to InferenceStacks
	// (auditPolicy), one JSON event a line.
	auditLog string
)

// auditPolicy records who wrote each InferenceStack: the operators run as
// their bundles' ServiceAccounts, one per major.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  verbs: [create, update, patch, delete, deletecollection]
  resources:
  - group: inferencestack.io
    resources: [inferencestacks, inferencestacks/status]
- level: None
`

func TestMain(m *testing.M) {
	testenv.Main(m, func() (func() error, error) {
		var err error
		if root, err = filepath.Abs(filepath.Join("..", "..", "..")); err != nil {
			return nil, err
		}
		auditDir, err := os.MkdirTemp("", "e2e-audit-")
		if err != nil {
			return nil, err
		}
		policy := filepath.Join(auditDir, "policy.yaml")
		auditLog = filepath.Join(auditDir, "audit.log")
		if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
			return nil, err
		}
		registry := registry.Start()
		start := time.Now()
		cluster, err = olm.Start(context.Background(), olm.Options{Registry: registry.Host(), ControlPlane: testenv.Options{
			// The API server calls a Service's webhook at one of its
			// EndpointSlice's addresses rather than its ClusterIP, which
			// nothing routes here (no kube-proxy): a test runs the
			// conversion webhook in its own process and names it in an
			// EndpointSlice of the CRD package's Service (webhookEndpoint).
			APIServerArgs: map[string][]string{
				"enable-aggregator-routing": {"true"},
				"audit-policy-file":         {policy},
				"audit-log-path":            {auditLog},
				"audit-log-format":          {"json"},
				// Blocking: no event is dropped, however busy the machine.
				"audit-log-mode": {"blocking"},
			},
		}})
		if err != nil {
			registry.Close()
			os.RemoveAll(auditDir)
			return nil, err
		}
		fmt.Fprintf(os.Stderr, "e2e: control plane, catalogd and operator-controller ready in %s\n", time.Since(start).Round(100*time.Millisecond))
		return func() error {
			defer os.RemoveAll(auditDir)
			defer registry.Close()
			return cluster.Stop()
		}, nil
	})
}

// dumpLogsOnFailure prints OLM's logs when the test fails.
func dumpLogsOnFailure(t *testing.T) {
	t.Cleanup(func() {
		if t.Failed() {
			for _, name := range []string{"catalogd", "operator-controller"} {
				t.Logf("---- %s log ----\n%s", name, testenv.LastLines(cluster.Logs(name), 60))
			}
		}
	})
}

// sample reads operator/config/olm/<file> (the manifests users apply).
func sample(t *testing.T, file string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := olm.ReadObjects(filepath.Join(root, "operator", "config", "olm", file))
	require.NoError(t, err)
	require.NotEmpty(t, objs, file)
	return objs
}

// apply applies objs and deletes them (waiting until they are gone) when the
// test ends, in reverse order.
func apply(t *testing.T, objs ...*unstructured.Unstructured) {
	t.Helper()
	cluster.ApplyForTest(t, deleteTimeout, objs...)
}

// releaseCatalog returns the repository's release artifacts: bundle/ and
// catalog/ when committed, else the same release generated into a temporary
// folder by the release tools (what `make release` writes), so the tests run
// before the first release is committed.
func releaseCatalog(t *testing.T) (bundleRoot, catalogDir string) {
	t.Helper()
	bundleRoot, catalogDir = filepath.Join(root, "bundle"), filepath.Join(root, "catalog")
	if _, err := os.Stat(filepath.Join(catalogDir, bundle.PackageOperator, "catalog.yaml")); err == nil {
		return bundleRoot, catalogDir
	}
	t.Logf("catalog/ is not committed yet: generating the release from channels/ into a temporary folder")
	dir := t.TempDir()
	versions := map[string][]string{}
	for _, pkg := range []string{bundle.PackageCRDs, bundle.PackageOperator} {
		data, err := os.ReadFile(filepath.Join(root, "channels", pkg+".semver.yaml"))
		require.NoError(t, err)
		for _, line := range strings.Split(string(data), "\n") {
			if ref, ok := strings.CutPrefix(strings.TrimSpace(line), "- image: bundle/"+pkg+"/"); ok {
				if !slices.Contains(versions[pkg], ref) {
					versions[pkg] = append(versions[pkg], ref)
				}
			}
		}
	}
	catalogDir, err := olm.Release{Root: root, Dir: dir, Versions: versions, Log: testWriter{t}}.Run(context.Background())
	require.NoError(t, err)
	return filepath.Join(dir, "bundle"), catalogDir
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
