//go:build e2e

package e2e_test

import (
	"context"
	"encoding/json"
	"maps"
	"net"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsv1beta1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1beta1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/inferencestack/inferencestack/internal/bundle"
	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/conversion"
	"github.com/inferencestack/inferencestack/test/olm"
	"github.com/inferencestack/inferencestack/test/testenv"
)

// Where the API server keeps InferenceStacks and their CRD in etcd.
const (
	stacksKeyPrefix = testenv.EtcdPrefix + "inferencestack.io/inferencestacks/"
	crdKey          = testenv.EtcdPrefix + "apiextensions.k8s.io/customresourcedefinitions/" + crdName
)

// majorStack is one operator major of the test and the stack it reconciles.
type majorStack struct {
	extension string
	// version is the operator release running (and installed); next is
	// the one OLM upgrades the major to (upgradeWithinMajors).
	version, next string
	// apiVersion is the version the stack is written and edited through.
	apiVersion string
	// label is the stack's inferencestack.io/operator-major ("" for 1.x,
	// which takes unlabelled stacks).
	label string
	stack *unstructured.Unstructured
	// llamaStack is the installed pin's llamaStackVersion.
	llamaStack string
	// op is the running operator and user the API server's name for its
	// ServiceAccount (system:serviceaccount:<namespace>:<name>).
	op   *operatorProcess
	user string
}

// TestStorageMovesToV1alpha2WithFourMajors is the repository's own
// releases side by side, upgraded within each major, and moving the API's
// storage to v1alpha2 on the real OLM v1 (docs/api-versions.md, "Upgrade
// steps"), the sample manifests of four majors applied as users apply them:
// the CRD package at 2.1.0 (serving v1alpha1 and v1alpha2, storing
// v1alpha1) and operators 1.0.0 (Llama Stack 0.2.23), 2.0.0 (0.3.0), 3.0.0
// (0.7.1) and 4.0.0 (OGX 0.8.0) from the release catalog. Each operator
// runs out of cluster as the ServiceAccount and with the arguments and pin
// OLM installed, started one after the other: once an operator reconciled
// its own stack, the stacks of the majors not started yet are still
// untouched (no status.observedGeneration), and no write to a stack,
// watched from before its creation, ever names another operator release
// than its major's (checked again at the end), nor is any made by another
// major's ServiceAccount (the API server's audit log). Then every major
// upgrades within itself at once (upgradeWithinMajors): 2.x to 2.1.0, and
// 1.x, 3.x and 4.x to the next patches of a test fixture catalog. The
// conversion webhook runs in the test
// process as the CRD package's ServiceAccount, reached by the API server
// through the package's Service (an EndpointSlice naming the test
// process). Each stack is stored as v1alpha1 (read from etcd). OLM upgrades the CRD package
// along the catalog's bridge to 3.0.0 (v1alpha2 stored); the migration
// rewrites every stack, and etcd's own order of writes shows each stack
// stored as v1alpha2 before the write that trims status.storedVersions to
// [v1alpha2]. OLM's preflight then refuses moving the CRD package back to
// 2.0.0, which does not serve v1alpha2. Every major still reconciles a
// change to its stack: 1.x and 2.x read v1alpha1 through the webhook.
func TestStorageMovesToV1alpha2WithFourMajors(t *testing.T) {
	dumpLogsOnFailure(t)
	ctx := context.Background()
	start := time.Now()
	bundleRoot, catalogDir := releaseCatalog(t)
	cat := serveCatalog(t, "inferencestack", "catalog", bundleRoot, catalogDir)

	var objs []*unstructured.Unstructured
	for _, f := range []string{"namespace.yaml", "installer-rbac.yaml", "clusterextension-crds.yaml", "clusterextension-operator.yaml",
		"v2/namespace.yaml", "v2/installer.yaml", "v2/clusterextension-operator.yaml",
		"v3/namespace.yaml", "v3/installer.yaml", "v3/clusterextension-operator.yaml",
		"v4/namespace.yaml", "v4/installer.yaml", "v4/clusterextension-operator.yaml"} {
		objs = append(objs, sample(t, f)...)
	}
	exts := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		if o.GetKind() == "ClusterExtension" {
			exts[o.GetName()] = o
		}
	}
	crds := exts["inferencestack-crds"]
	require.NotNil(t, crds, "the sample ClusterExtension of the CRD package")
	// Step 1 of the storage move: the CRD package serving both versions.
	require.NoError(t, unstructured.SetNestedField(crds.Object, "2.1.0", "spec", "source", "catalog", "version"))
	// 2.x at its older version, upgraded with the others below.
	v2 := exts["inferencestack-operator-v2"]
	require.NotNil(t, v2, "the sample ClusterExtension of the operator's 2.x")
	require.NoError(t, unstructured.SetNestedField(v2.Object, "2.0.0", "spec", "source", "catalog", "version"))
	apply(t, objs...)
	majors := []*majorStack{
		{extension: "inferencestack-operator", version: "1.0.0", next: "1.0.1", apiVersion: "inferencestack.io/v1alpha1"},
		{extension: "inferencestack-operator-v2", version: "2.0.0", next: "2.1.0", apiVersion: "inferencestack.io/v1alpha1", label: "2"},
		{extension: "inferencestack-operator-v3", version: "3.0.0", next: "3.0.1", apiVersion: "inferencestack.io/v1alpha2", label: "3"},
		{extension: "inferencestack-operator-v4", version: "4.0.0", next: "4.0.1", apiVersion: "inferencestack.io/v1alpha2", label: "4"},
	}
	installed := []*unstructured.Unstructured{crds}
	for _, m := range majors {
		installed = append(installed, exts[m.extension])
	}
	for _, ce := range installed {
		require.NotNil(t, ce, "the sample manifests lack a ClusterExtension")
		_, err := cluster.WaitCondition(ctx, ce, olm.TypeInstalled, installTimeout)
		require.NoError(t, err)
	}
	require.Equal(t, "2.1.0", installedVersion(t, crds))
	require.Equal(t, "2.0.0", installedVersion(t, v2))
	t.Logf("the CRD package 2.1.0 and operators 1.0.0, 2.0.0, 3.0.0, 4.0.0 Installed side by side %s after the start", time.Since(start).Round(100*time.Millisecond))

	for _, m := range majors {
		require.Equal(t, m.version, installedVersion(t, exts[m.extension]), "the version ClusterExtension %s installed", m.extension)
		ns, _, _ := unstructured.NestedString(exts[m.extension].Object, "spec", "namespace")
		_, p := installedPin(t, ns)
		require.Equal(t, m.version, p.OperatorVersion, "the pin OLM installed for %s", m.extension)
		m.llamaStack = p.LlamaStackVersion
		t.Logf("operator %s pins Llama Stack %s (%v)", m.version, p.LlamaStackVersion, p.Operands)
	}
	checkSideBySide(t, bundleRoot, crds, installed[1:])

	ext, err := apiextensionsclient.NewForConfig(cluster.Config)
	require.NoError(t, err)
	webhookEndpoint(t, bundleRoot, ext)

	// The operators, each as its bundle runs it, with its installed pin.
	stackNS := &unstructured.Unstructured{}
	stackNS.SetAPIVersion("v1")
	stackNS.SetKind("Namespace")
	stackNS.SetName("e2e-migration")
	apply(t, stackNS)
	writers := watchWriters(t, stackNS.GetName())
	for _, m := range majors {
		m.stack = starterSample(t)
		m.stack.SetAPIVersion(m.apiVersion) // the starter's fields are the same in v1alpha2
		m.stack.SetNamespace(stackNS.GetName())
		m.stack.SetName("stack-v" + strings.Split(m.version, ".")[0])
		if m.label != "" {
			m.stack.SetLabels(map[string]string{v1alpha2.LabelOperatorMajor: m.label})
		}
	}
	// Created while v1alpha1 is stored; the one through v1alpha2 converted
	// by the webhook (retried until the API server has found its endpoint).
	deadline := time.Now().Add(time.Minute)
	for _, m := range majors {
		for {
			err := cluster.Client.Create(ctx, m.stack)
			if err == nil {
				break
			}
			require.True(t, time.Now().Before(deadline), "creating %s through %s: %v", m.stack.GetName(), m.apiVersion, err)
			time.Sleep(250 * time.Millisecond)
		}
		t.Cleanup(func() {
			if err := cluster.Delete(context.Background(), deleteTimeout, m.stack); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		})
	}
	startMajors(t, exts, majors)
	writers.requireOwnMajorOnly(t, majors)
	requireAuditOwnMajor(t, majors, 0)

	upgradeWithinMajors(t, cat, crds, exts, majors, writers)

	stored := storedVersions(t)
	for _, m := range majors {
		require.Equal(t, "inferencestack.io/v1alpha1", stored[m.stack.GetName()].apiVersion, "%s is stored as v1alpha1 under CRD package 2.1.0", m.stack.GetName())
	}
	rev0 := stored[""].revision

	// etcd's writes from here on, in its order: the stacks and the CRD (one
	// key range; the keys between them are ignored).
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events, watchErrs, err := cluster.EtcdWatch(wctx, crdKey, stacksKeyPrefix, rev0+1)
	require.NoError(t, err)

	// Step 2: OLM moves the CRD package to 3.0.0 along the catalog's bridge
	// (2.1.0 -> 3.0.0, skipRange '>=2.1.0 <3.0.0').
	require.NoError(t, cluster.Client.Get(ctx, client.ObjectKeyFromObject(crds), crds))
	require.NoError(t, unstructured.SetNestedField(crds.Object, "3.x", "spec", "source", "catalog", "version"))
	require.NoError(t, cluster.Client.Update(ctx, crds))
	upgradeStart := time.Now()
	_, err = cluster.WaitFor(ctx, crds, installTimeout, func(conds []metav1.Condition) (metav1.Condition, bool) {
		c := meta.FindStatusCondition(conds, olm.TypeInstalled)
		return metav1.Condition{}, c != nil && c.Status == metav1.ConditionTrue && installedVersionOf(crds) == "3.0.0"
	})
	require.NoError(t, err, "OLM upgrades the CRD package from 2.1.0 to 3.0.0")
	crd, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crdName, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "v1alpha2", conversion.StorageVersion(crd))
	require.Equal(t, []string{"v1alpha1", "v1alpha2"}, crd.Status.StoredVersions, "stacks are still stored as v1alpha1")
	t.Logf("CRD package 2.1.0 -> 3.0.0 in %s: v1alpha2 stored, storedVersions %v", time.Since(upgradeStart).Round(100*time.Millisecond), crd.Status.StoredVersions)

	// Step 3: the migration.
	dyn, err := dynamic.NewForConfig(cluster.Config)
	require.NoError(t, err)
	mig, err := conversion.Migrate(ctx, dyn, ext, crdName)
	require.NoError(t, err)
	require.Equal(t, "v1alpha2", mig.Storage)
	require.Equal(t, len(majors), mig.Rewritten)
	t.Logf("migration: %d stacks rewritten through %s, storedVersions %v -> [%s]", mig.Rewritten, mig.Storage, mig.Before, mig.Storage)

	// The order, from etcd's record of the writes: every stack is stored as
	// v1alpha2 by a write before the one that trims storedVersions.
	latest := map[string]storedStack{}
	trimmed := int64(0)
	decoder := crdDecoder(t)
	timeout := time.After(time.Minute)
	for trimmed == 0 {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("the etcd watch ended: %v", <-watchErrs)
			}
			key := string(ev.KV.Key)
			switch {
			case key == crdKey:
				require.False(t, ev.Deleted, "the CRD deleted")
				if !slices.Contains(storedVersionsOf(t, decoder, ev.KV.Value), "v1alpha1") {
					trimmed = ev.KV.ModRevision
				}
			case strings.HasPrefix(key, stacksKeyPrefix):
				require.False(t, ev.Deleted, "%s deleted", key)
				latest[strings.TrimPrefix(key, stacksKeyPrefix+stackNS.GetName()+"/")] = storedStack{apiVersion: apiVersionOf(t, ev.KV.Value), revision: ev.KV.ModRevision}
			}
		case <-timeout:
			t.Fatalf("etcd shows no write of the CRD without v1alpha1 in status.storedVersions; the stacks' writes: %v", latest)
		}
	}
	for _, m := range majors {
		s, ok := latest[m.stack.GetName()]
		require.True(t, ok, "no write of %s between the CRD package's upgrade and the trim of storedVersions (revision %d)", m.stack.GetName(), trimmed)
		require.Equal(t, "inferencestack.io/v1alpha2", s.apiVersion, "%s as stored when storedVersions was trimmed (revision %d)", m.stack.GetName(), trimmed)
		require.Less(t, s.revision, trimmed)
		t.Logf("etcd: %s stored as %s at revision %d, before storedVersions lost v1alpha1 at revision %d", m.stack.GetName(), s.apiVersion, s.revision, trimmed)
	}
	cancel()

	// Step 4 is OLM's to guard: after the trim, moving the CRD package to a
	// release that neither serves nor stores v1alpha2 (2.0.0; only an admin
	// vouching for the downgrade, SelfCertified, gets past the catalog's
	// edges) is refused by operator-controller's CRD upgrade-safety
	// preflight.
	require.NoError(t, cluster.Client.Get(ctx, client.ObjectKeyFromObject(crds), crds))
	require.NoError(t, unstructured.SetNestedField(crds.Object, "2.0.0", "spec", "source", "catalog", "version"))
	require.NoError(t, unstructured.SetNestedField(crds.Object, "SelfCertified", "spec", "source", "catalog", "upgradeConstraintPolicy"))
	require.NoError(t, cluster.Client.Update(ctx, crds))
	refusal, err := cluster.WaitFor(ctx, crds, installTimeout, func(conds []metav1.Condition) (metav1.Condition, bool) {
		c := meta.FindStatusCondition(conds, olm.TypeProgressing)
		if c == nil || c.ObservedGeneration != crds.GetGeneration() || c.Reason == olm.ReasonSucceeded {
			return metav1.Condition{}, false
		}
		return *c, strings.Contains(c.Message, "storedVersionRemoval")
	})
	require.NoError(t, err, "OLM's preflight refuses CRD package 2.0.0 over a CRD storing v1alpha2")
	t.Logf("OLM v1 refuses the CRD package 2.0.0: Progressing=%s reason %s: %s", refusal.Status, refusal.Reason, refusal.Message)
	require.Contains(t, refusal.Message, "v1alpha2")
	require.Equal(t, "3.0.0", installedVersionOf(crds), "2.0.0 is not installed")
	crd, err = ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crdName, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "v1alpha2", conversion.StorageVersion(crd), "the CRD still stores v1alpha2")
	require.Equal(t, []string{"v1alpha2"}, crd.Status.StoredVersions)
	// Back on 3.x.
	require.NoError(t, unstructured.SetNestedField(crds.Object, "3.x", "spec", "source", "catalog", "version"))
	require.NoError(t, unstructured.SetNestedField(crds.Object, "CatalogProvided", "spec", "source", "catalog", "upgradeConstraintPolicy"))
	require.NoError(t, cluster.Client.Update(ctx, crds))
	_, err = cluster.WaitCondition(ctx, crds, olm.TypeInstalled, installTimeout)
	require.NoError(t, err)

	// Every major reconciles a change to its stack, now stored as v1alpha2:
	// 1.x and 2.x read it through the webhook as v1alpha1.
	for _, m := range majors {
		patch := `{"spec":{"resources":{"models":[{"name":"llama3.2:1b","provider":"ollama"}]}}}`
		require.NoError(t, cluster.Client.Patch(ctx, m.stack, client.RawPatch(types.MergePatchType, []byte(patch))))
	}
	for _, m := range majors {
		waitReconciled(t, m)
	}
	writers.requireOwnMajorOnly(t, majors)
	requireAuditOwnMajor(t, majors, 0)
	for _, m := range majors {
		dep := &appsv1.Deployment{}
		require.NoError(t, cluster.Client.Get(ctx, client.ObjectKey{Namespace: stackNS.GetName(), Name: m.stack.GetName()}, dep))
		refs := dep.GetOwnerReferences()
		require.Len(t, refs, 1)
		require.Equal(t, m.apiVersion, refs[0].APIVersion, "the owner reference of %s's Deployment names the version operator %s reads", m.stack.GetName(), m.version)
	}
	stored = storedVersions(t)
	for _, m := range majors {
		require.Equal(t, "inferencestack.io/v1alpha2", stored[m.stack.GetName()].apiVersion)
	}
}

// storedStack is a stack as etcd holds it.
type storedStack struct {
	apiVersion string
	revision   int64
}

// storedVersions reads every stack of namespace e2e-migration from etcd, by
// name; "" holds the revision read at.
func storedVersions(t *testing.T) map[string]storedStack {
	t.Helper()
	kvs, at, err := cluster.EtcdRange(context.Background(), stacksKeyPrefix+"e2e-migration/", 0)
	require.NoError(t, err)
	out := map[string]storedStack{"": {revision: at}}
	for _, kv := range kvs {
		out[strings.TrimPrefix(string(kv.Key), stacksKeyPrefix+"e2e-migration/")] = storedStack{apiVersion: apiVersionOf(t, kv.Value), revision: kv.ModRevision}
	}
	return out
}

// apiVersionOf is the apiVersion of a custom resource as the API server
// stores it (JSON, in the CRD's storage version at the time of the write).
func apiVersionOf(t *testing.T, value []byte) string {
	t.Helper()
	var obj struct {
		APIVersion string `json:"apiVersion"`
	}
	require.NoError(t, json.Unmarshal(value, &obj), "a stack as etcd stores it: %.200s", value)
	return obj.APIVersion
}

// crdDecoder decodes a CRD as the API server stores it (protobuf, in
// apiextensions.k8s.io/v1beta1 as of Kubernetes 1.35, or JSON).
func crdDecoder(t *testing.T) runtime.Decoder {
	t.Helper()
	scheme := runtime.NewScheme()
	require.NoError(t, apiextensionsv1.AddToScheme(scheme))
	require.NoError(t, apiextensionsv1beta1.AddToScheme(scheme))
	return serializer.NewCodecFactory(scheme).UniversalDeserializer()
}

// storedVersionsOf is status.storedVersions of a CRD as etcd holds it.
func storedVersionsOf(t *testing.T, decoder runtime.Decoder, value []byte) []string {
	t.Helper()
	obj, gvk, err := decoder.Decode(value, nil, nil)
	require.NoError(t, err, "the CRD as etcd stores it")
	switch crd := obj.(type) {
	case *apiextensionsv1.CustomResourceDefinition:
		return crd.Status.StoredVersions
	case *apiextensionsv1beta1.CustomResourceDefinition:
		return crd.Status.StoredVersions
	}
	t.Fatalf("etcd holds the CRD as %s", gvk)
	return nil
}

// webhookEndpoint runs the CRD package's conversion webhook in the test
// process, as the ServiceAccount the package's CSV runs it as (so with
// exactly its rights), listening on an address of this machine that is not
// loopback (an EndpointSlice refuses loopback), and names that address in
// an EndpointSlice of the package's Service, which the API server
// (--enable-aggregator-routing) then calls. It waits until the webhook has
// written the CRD's caBundle.
func webhookEndpoint(t *testing.T, bundleRoot string, ext apiextensionsclient.Interface) {
	t.Helper()
	ctx := context.Background()
	ns := bundle.ConversionNamespace
	sa := csvServiceAccount(t, filepath.Join(bundleRoot, bundle.PackageCRDs, "2.1.0"))
	token, err := cluster.Token(ctx, ns, sa, time.Hour)
	require.NoError(t, err)
	kubeconfig, err := cluster.KubeconfigFor(token)
	require.NoError(t, err)
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	require.NoError(t, err)
	core, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	asWebhook, err := apiextensionsclient.NewForConfig(cfg)
	require.NoError(t, err)

	ip := hostIP(t)
	s := &conversion.Server{Core: core, Extensions: asWebhook, Namespace: ns, Service: bundle.ConversionName, SecretName: "inferencestack-conversion-tls",
		CRDName: crdName, DNSNames: []string{bundle.ConversionName + "." + ns + ".svc"}, Addr: net.JoinHostPort(ip.String(), "0"),
		Validity: time.Hour, CheckInterval: time.Second, SwitchAfter: time.Second, Log: testr.New(t)}
	addr, err := s.Listen()
	require.NoError(t, err)
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(sctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the conversion webhook: %v", err)
		}
	})

	svc := &unstructured.Unstructured{}
	svc.SetAPIVersion("v1")
	svc.SetKind("Service")
	require.NoError(t, cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: bundle.ConversionName}, svc), "the CRD package's Service")
	ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	require.Len(t, ports, 1)
	portName, _, _ := unstructured.NestedString(ports[0].(map[string]any), "name")
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: bundle.ConversionName + "-e2e", Labels: map[string]string{
			discoveryv1.LabelServiceName: bundle.ConversionName, discoveryv1.LabelManagedBy: "e2e.inferencestack.io"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip.String()}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To(portName), Port: ptr.To(int32(addr.(*net.TCPAddr).Port))}},
	}
	require.NoError(t, cluster.Client.Create(ctx, slice))
	t.Cleanup(func() { _ = cluster.Client.Delete(context.Background(), slice) })

	deadline := time.Now().Add(time.Minute)
	for {
		crd, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crdName, metav1.GetOptions{})
		require.NoError(t, err)
		if c := crd.Spec.Conversion; c != nil && c.Webhook != nil && c.Webhook.ClientConfig != nil && len(c.Webhook.ClientConfig.CABundle) > 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "the conversion webhook writes the CRD's caBundle")
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("conversion webhook serving at %s as ServiceAccount %s/%s, EndpointSlice %s/%s", addr, ns, sa, ns, slice.Name)
}

// hostIP is an IPv4 address of an interface of this machine that is up and
// not loopback.
func hostIP(t *testing.T) net.IP {
	t.Helper()
	ifaces, err := net.Interfaces()
	require.NoError(t, err)
	for _, iface := range ifaces {
		if iface.Flags&net.FlagUp == 0 || iface.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, err := iface.Addrs()
		require.NoError(t, err)
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && n.IP.IsGlobalUnicast() {
				return n.IP.To4()
			}
		}
	}
	t.Fatal("this machine has no IPv4 address but loopback, which an EndpointSlice refuses: the API server cannot reach a webhook in the test process; " +
		"give an interface an address (e.g. `ip link add e2e0 type dummy && ip addr add 192.0.2.1/32 dev e2e0 && ip link set e2e0 up`)")
	return nil
}

// startMajors runs each major's operator binary as the ServiceAccount OLM
// made for its bundle, with the arguments of the Deployment OLM installed
// (--api-version=v1alpha2 for 3.x and 4.x, --take-unlabeled-stacks=false
// for 2.x, 3.x and 4.x) and its pin ConfigMap, on local ports, one after
// the other. Every stack exists before the first starts, so each
// operator's first list holds all of them: once an operator reconciled
// its own stack (waitReconciled), the stacks of the majors not started yet
// are still without status.observedGeneration, which a reconcile by a
// running operator would have written.
func startMajors(t *testing.T, exts map[string]*unstructured.Unstructured, majors []*majorStack) {
	t.Helper()
	ctx := context.Background()
	for i, m := range majors {
		// The owner-reference admission plugin must know the stacks' kind
		// in the version the operator names (it learns new CRDs every 30 s).
		m.op = runOperator(t, exts[m.extension], m, i == 0 || m.apiVersion != majors[0].apiVersion)
		waitReconciled(t, m)
		for _, later := range majors[i+1:] {
			require.NoError(t, cluster.Client.Get(ctx, client.ObjectKeyFromObject(later.stack), later.stack))
			g, found, _ := unstructured.NestedInt64(later.stack.Object, "status", "observedGeneration")
			require.False(t, found, "%s (major %s) has status.observedGeneration %d before its operator %s runs: operators %s reconciled it",
				later.stack.GetName(), later.major(), g, later.version, versionsOf(majors[:i+1]))
		}
	}
}

// runOperator runs the operator of major m as the Deployment OLM installed
// for ce runs it: as its ServiceAccount (a TokenRequest token, so with
// exactly the rights OLM bound to it), with its arguments and the installed
// pin, which must name m.version; local ports and the leader election Lease
// in the install namespace. With waitOwnerRefs it first waits until the
// API server admits owner references to m's stack set by that identity.
func runOperator(t *testing.T, ce *unstructured.Unstructured, m *majorStack, waitOwnerRefs bool) *operatorProcess {
	t.Helper()
	ctx := context.Background()
	ns, _, _ := unstructured.NestedString(ce.Object, "spec", "namespace")
	dep := &appsv1.Deployment{}
	require.NoError(t, cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: bundle.PackageOperator}, dep))
	var args []string
	for _, a := range dep.Spec.Template.Spec.Containers[0].Args {
		if !strings.HasPrefix(a, "--metrics-bind-address") && !strings.HasPrefix(a, "--health-probe-bind-address") && !strings.HasPrefix(a, "--pin-file") {
			args = append(args, a)
		}
	}
	sa := dep.Spec.Template.Spec.ServiceAccountName
	m.user = "system:serviceaccount:" + ns + ":" + sa
	token, err := cluster.Token(ctx, ns, sa, time.Hour)
	require.NoError(t, err)
	kubeconfig, err := cluster.KubeconfigFor(token)
	require.NoError(t, err)
	if waitOwnerRefs {
		restConfig, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		require.NoError(t, err)
		as, err := client.New(restConfig, client.Options{})
		require.NoError(t, err)
		require.NoError(t, cluster.WaitOwnerReferences(ctx, as, m.stack, 60*time.Second))
	}
	pinFile, p := installedPin(t, ns)
	require.Equal(t, m.version, p.OperatorVersion, "the pin OLM installed in %s", ns)
	args = append(args, "--pin-file="+pinFile, "--leader-election-namespace="+ns)
	t.Logf("operator %s: %v", m.version, args)
	return startOperator(t, kubeconfig, args...)
}

// major is the major's label value ("1" for 1.x, whose stack is unlabelled).
func (m *majorStack) major() string { return strings.Split(m.version, ".")[0] }

func versionsOf(majors []*majorStack) string {
	var out []string
	for _, m := range majors {
		out = append(out, m.version)
	}
	return strings.Join(out, ", ")
}

// waitReconciled waits until the major's operator reconciled the stack's
// current generation (status.observedGeneration): ConfigGenerated for that
// generation and the status naming the operator release.
func waitReconciled(t *testing.T, m *majorStack) {
	t.Helper()
	require.NoError(t, cluster.Client.Get(context.Background(), client.ObjectKeyFromObject(m.stack), m.stack))
	start := time.Now()
	_, err := cluster.WaitFor(context.Background(), m.stack, reconcileTimeout, func(conds []metav1.Condition) (metav1.Condition, bool) {
		if g, _, _ := unstructured.NestedInt64(m.stack.Object, "status", "observedGeneration"); g != m.stack.GetGeneration() {
			return metav1.Condition{}, false
		}
		c := meta.FindStatusCondition(conds, v1alpha2.TypeConfigGenerated)
		if c == nil || c.ObservedGeneration != m.stack.GetGeneration() {
			return metav1.Condition{}, false
		}
		operator, _, _ := unstructured.NestedString(m.stack.Object, "status", "resolvedDistribution", "operatorVersion")
		return metav1.Condition{}, c.Status == metav1.ConditionTrue && operator == m.version
	})
	require.NoError(t, err, "operator %s reconciles %s (generation %d)", m.version, m.stack.GetName(), m.stack.GetGeneration())
	t.Logf("%s (generation %d) reconciled by operator %s (Llama Stack %s) in %s: run config generated", m.stack.GetName(), m.stack.GetGeneration(), m.version, m.llamaStack, time.Since(start).Round(100*time.Millisecond))
}

// stackWriters records, for every write to a stack of a namespace, the
// operator releases the written status names: its
// status.resolvedDistribution.operatorVersion and the release a condition
// message starts with ("operator 3.0.0: ..."), by stack name.
type stackWriters struct {
	mu     sync.Mutex
	writes map[string]int
	named  map[string]map[string]bool
	// rv is the resourceVersion of the last write seen of each stack.
	rv map[string]string
	// restarts counts the watches that ended and were made again (the API
	// server ends a custom resource's watches when its CRD changes).
	restarts int
}

// operatorInMessage is the release a condition message of the operator
// names first ("operator 3.0.0: Llama Stack version ...").
var operatorInMessage = regexp.MustCompile(`^operator ([0-9]+\.[0-9]+\.[0-9]+[^:]*):`)

// watchWriters watches the InferenceStacks of ns from now on until the test
// ends: every write, in etcd's order, resumed where a watch ends; when the
// API server ends it for good (a CRD update), from a new list, whose items
// count as writes (a write in between that a later one overwrote is then
// unseen; the check at the end reads every stack's last write).
func watchWriters(t *testing.T, ns string) *stackWriters {
	t.Helper()
	dyn, err := dynamic.NewForConfig(cluster.Config)
	require.NoError(t, err)
	res := dyn.Resource(v1alpha2.GroupVersion.WithResource("inferencestacks")).Namespace(ns)
	list, err := res.List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	require.Empty(t, list.Items, "stacks in %s before the test made any", ns)
	ctx, cancel := context.WithCancel(context.Background())
	sw := &stackWriters{writes: map[string]int{}, named: map[string]map[string]bool{}, rv: map[string]string{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		from := list.GetResourceVersion()
		for ctx.Err() == nil {
			w, err := watchtools.NewRetryWatcherWithContext(ctx, from, &cache.ListWatch{
				WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return res.Watch(ctx, o) },
			})
			if err != nil {
				t.Errorf("watching the stacks of %s: %v", ns, err)
				return
			}
			for ev := range w.ResultChan() {
				if u, ok := ev.Object.(*unstructured.Unstructured); ok && ev.Type != watch.Deleted && ev.Type != watch.Error {
					sw.record(u)
				}
			}
			w.Stop()
			if ctx.Err() != nil {
				return
			}
			l, err := res.List(ctx, metav1.ListOptions{})
			if err != nil {
				if ctx.Err() == nil {
					t.Errorf("listing the stacks of %s: %v", ns, err)
				}
				return
			}
			for i := range l.Items {
				sw.record(&l.Items[i])
			}
			sw.mu.Lock()
			sw.restarts++
			sw.mu.Unlock()
			from = l.GetResourceVersion()
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return sw
}

// record notes a write of a stack and the operator releases its status names.
func (sw *stackWriters) record(u *unstructured.Unstructured) {
	names := map[string]bool{}
	if v, _, _ := unstructured.NestedString(u.Object, "status", "resolvedDistribution", "operatorVersion"); v != "" {
		names[v] = true
	}
	conds, _ := olm.Conditions(u)
	for _, c := range conds {
		if m := operatorInMessage.FindStringSubmatch(c.Message); m != nil {
			names[m[1]] = true
		}
	}
	sw.mu.Lock()
	defer sw.mu.Unlock()
	sw.writes[u.GetName()]++
	sw.rv[u.GetName()] = u.GetResourceVersion()
	if sw.named[u.GetName()] == nil {
		sw.named[u.GetName()] = map[string]bool{}
	}
	maps.Copy(sw.named[u.GetName()], names)
}

// requireOwnMajorOnly fails if a write to a major's stack named an operator
// release of another major, or if no write named its own.
func (sw *stackWriters) requireOwnMajorOnly(t *testing.T, majors []*majorStack) {
	t.Helper()
	// The watch may trail the reads of waitReconciled: wait until it has
	// seen each stack's current write.
	for _, m := range majors {
		require.Eventually(t, func() bool {
			if err := cluster.Client.Get(context.Background(), client.ObjectKeyFromObject(m.stack), m.stack); err != nil {
				return false
			}
			sw.mu.Lock()
			defer sw.mu.Unlock()
			// A stack Degraded before its config names no operator
			// release unless the reason does (UnsupportedOperandVersion).
			return sw.rv[m.stack.GetName()] == m.stack.GetResourceVersion() && sw.named[m.stack.GetName()][m.version]
		}, time.Minute, 100*time.Millisecond, "the watch saw no write of %s at its current resourceVersion naming operator %s", m.stack.GetName(), m.version)
	}
	sw.mu.Lock()
	defer sw.mu.Unlock()
	for _, m := range majors {
		names := slices.Sorted(maps.Keys(sw.named[m.stack.GetName()]))
		for _, v := range names {
			require.Equal(t, m.major(), strings.Split(v, ".")[0], "a write to %s (major %s) names operator %s: another major reconciled it (releases named: %v)",
				m.stack.GetName(), m.major(), v, names)
		}
		t.Logf("%s: %d writes watched (up to resourceVersion %s), naming operator %v only", m.stack.GetName(), sw.writes[m.stack.GetName()], sw.rv[m.stack.GetName()], names)
	}
	t.Logf("stack watch: %d restarts from a new list", sw.restarts)
}
