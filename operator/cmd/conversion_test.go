package main_test

import (
	"context"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/conversion"
	"github.com/inferencestack/inferencestack/test/local"
	"github.com/inferencestack/inferencestack/test/testenv"
)

// TestStackThroughV1alpha2ReconciledByAV1alpha1Operator: with the CRD
// serving both versions through the conversion webhook, a stack created
// through v1alpha2 is reconciled by an operator that reads v1alpha1, with
// the fields v1alpha2 moved (scaling.replicas) in force.
func TestStackThroughV1alpha2ReconciledByAV1alpha1Operator(t *testing.T) {
	ctx := context.Background()
	const ns = "conversion-check"
	createObject(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	servesBothVersions(t, ns)

	// An operator of major 8, as ServiceAccount operator-8 with the
	// operator's ClusterRole.
	kubeconfig := operatorAccount(t, ns, "operator-8")
	op, err := local.StartOperator(buildOperator(t), kubeconfig, filepath.Join(t.TempDir(), "operator.log"), local.DemoPin("8.0.0"), "--take-unlabeled-stacks=false")
	require.NoError(t, err)
	t.Cleanup(func() {
		op.Stop(10 * time.Second)
		if t.Failed() {
			t.Logf("---- operator log ----\n%s", testenv.LastLines(op.Log(), 40))
		}
	})

	scheme, err := conversion.Scheme()
	require.NoError(t, err)
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	require.NoError(t, err)
	s2 := &v1alpha2.InferenceStack{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "through-v2", Labels: map[string]string{"inferencestack.io/operator-major": "8"}},
		Spec: v1alpha2.InferenceStackSpec{Distribution: v1alpha2.DistributionSpec{Name: "starter"},
			Workload: &v1alpha2.WorkloadSpec{ServiceAccountName: "custom-sa"}, Scaling: &v1alpha2.ScalingSpec{Replicas: ptr.To(int32(0))}},
	}
	waitFor(t, "the API server to convert through the webhook", func() bool { return c.Create(ctx, s2) == nil })
	t.Cleanup(func() { _ = c.Delete(context.Background(), s2) })

	// The operator reads it as v1alpha1 (workload.replicas: 0) and makes
	// a server Deployment of 0 replicas.
	waitFor(t, "the server Deployment with scaling.replicas", func() bool {
		var list appsv1.DeploymentList
		if err := env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return false
		}
		for _, d := range list.Items {
			if d.Spec.Replicas != nil && *d.Spec.Replicas == 0 && d.Spec.Template.Spec.ServiceAccountName == "custom-sa" {
				return true
			}
		}
		return false
	})
	// The operator writes the status after the objects: wait for it, read
	// through v1alpha2.
	waitFor(t, "the status the operator wrote through v1alpha1 to read through v1alpha2", func() bool {
		var got v1alpha2.InferenceStack
		return c.Get(ctx, client.ObjectKeyFromObject(s2), &got) == nil && got.Status.Phase != ""
	})
	require.False(t, op.Exited())
}

// reverseNS holds TestStackThroughV1alpha1ReconciledByAV1alpha2Operator's
// operator account (the audit policy logs its writes) and stack.
const reverseNS = "conversion-reverse"

// TestStackThroughV1alpha1ReconciledByAV1alpha2Operator is the reverse: an
// operator that reads v1alpha2 (--api-version=v1alpha2, a release whose
// api.reads is v1alpha2) reconciles a stack created through v1alpha1. Its
// writes to the stack (its status) reach the API server in v1alpha2
// (the audit log), its objects name the stack in v1alpha2 as their owner,
// and what it wrote reads back through v1alpha1.
func TestStackThroughV1alpha1ReconciledByAV1alpha2Operator(t *testing.T) {
	ctx := context.Background()
	createObject(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: reverseNS}})
	webhookUp := servesBothVersions(t, reverseNS)
	kubeconfig := operatorAccount(t, reverseNS, "operator-9")
	offset := auditSize(t)
	op, err := local.StartOperator(buildOperator(t), kubeconfig, filepath.Join(t.TempDir(), "operator.log"), local.DemoPin("9.0.0"),
		"--take-unlabeled-stacks=false", "--api-version=v1alpha2", "--api-check-interval=200ms")
	require.NoError(t, err)
	t.Cleanup(func() {
		op.Stop(10 * time.Second)
		if t.Failed() {
			t.Logf("---- operator log ----\n%s", testenv.LastLines(op.Log(), 40))
		}
	})

	// Through v1alpha1: workload.replicas, which v1alpha2 keeps under scaling.
	s1 := &v1alpha1.InferenceStack{
		ObjectMeta: metav1.ObjectMeta{Namespace: reverseNS, Name: "through-v1", Labels: map[string]string{v1alpha2.LabelOperatorMajor: "9"}},
		Spec: v1alpha1.InferenceStackSpec{Distribution: v1alpha1.DistributionSpec{Name: "starter"},
			Workload: &v1alpha1.WorkloadSpec{ServiceAccountName: "custom-sa", Replicas: ptr.To(int32(0))}},
	}
	createObject(t, s1)
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), s1) })
	var dep appsv1.Deployment
	waitFor(t, "the server Deployment with workload.replicas", func() bool {
		var list appsv1.DeploymentList
		if err := env.Client.List(ctx, &list, client.InNamespace(reverseNS)); err != nil {
			return false
		}
		for _, d := range list.Items {
			if d.Spec.Replicas != nil && *d.Spec.Replicas == 0 && d.Spec.Template.Spec.ServiceAccountName == "custom-sa" {
				dep = d
				return true
			}
		}
		return false
	})
	require.Len(t, dep.OwnerReferences, 1)
	require.Equal(t, "inferencestack.io/v1alpha2", dep.OwnerReferences[0].APIVersion, "the operator names its stack in the version it reads")
	waitFor(t, "the status the operator wrote through v1alpha2 to read through v1alpha1", func() bool {
		var got v1alpha1.InferenceStack
		return env.Client.Get(ctx, client.ObjectKeyFromObject(s1), &got) == nil && got.Status.Phase != ""
	})
	var stackWrites []string
	// The audit log is written as the API server answers: wait for it to
	// show the writes whose result the test just read.
	waitFor(t, "the operator's writes to the stack (its status) in the audit log", func() bool {
		stackWrites = nil
		for _, e := range operatorWrites(t, offset, "system:serviceaccount:"+reverseNS+":operator-9") {
			if e.ObjectRef.Resource == "inferencestacks" {
				stackWrites = append(stackWrites, e.Verb+" "+e.ObjectRef.Subresource+" "+e.ObjectRef.APIVersion)
			}
		}
		return len(stackWrites) > 0
	})
	for _, w := range stackWrites {
		require.True(t, strings.HasSuffix(w, " v1alpha2"), "a write to the stack in another version than the one the operator reads: %q", w)
	}

	// The webhook down: every read of this operator needs it (the stack is
	// stored as v1alpha1), and its watch would just go quiet. It says so in
	// its log and metrics; a change made meanwhile (through the stored
	// version, which needs no conversion) is reconciled once the webhook is
	// back.
	const readable = `inferencestack_operator_api_readable{group_version="inferencestack.io/v1alpha2"} `
	require.Contains(t, metricsText(t, op), readable+"1")
	webhookUp(false)
	waitFor(t, "the operator to report that it cannot read the stacks", func() bool {
		return strings.Contains(op.Log(), "the conversion webhook of the inferencestack-crds package is down or unreachable") &&
			strings.Contains(metricsText(t, op), readable+"0")
	})
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var s v1alpha1.InferenceStack
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(s1), &s); err != nil {
			return err
		}
		s.Spec.Workload.ServiceAccountName = "changed-while-down"
		return env.Client.Update(ctx, &s)
	}))
	webhookUp(true)
	waitFor(t, "the operator to read the stacks again and reconcile the change made while it could not", func() bool {
		var d appsv1.Deployment
		return strings.Contains(op.Log(), "reads of InferenceStacks work again") &&
			strings.Contains(metricsText(t, op), readable+"1") &&
			env.Client.Get(ctx, client.ObjectKeyFromObject(&dep), &d) == nil && d.Spec.Template.Spec.ServiceAccountName == "changed-while-down"
	})
	require.Equal(t, 1, strings.Count(op.Log(), "is down or unreachable"), "one line while the cause stays the same")
	require.False(t, op.Exited())
}

// operatorAccount makes ServiceAccount ns/name with the operator's
// ClusterRole (config/rbac/role.yaml) and returns a kubeconfig with its token.
func operatorAccount(t *testing.T, ns, name string) string {
	t.Helper()
	createObject(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
	role := &rbacv1.ClusterRole{}
	readYAML(t, filepath.Join("..", "config", "rbac", "role.yaml"), role)
	role.Name += "-" + ns
	createObject(t, role)
	createObject(t, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}},
	})
	token, err := env.Token(context.Background(), ns, name, time.Hour)
	require.NoError(t, err)
	kubeconfig, err := env.KubeconfigFor(token)
	require.NoError(t, err)
	return kubeconfig
}

// servesBothVersions makes the test CRD serve v1alpha1 and v1alpha2, converted
// by the conversion webhook running in the test process (its Secret in ns),
// until the test ends. up(false) stops the webhook (its port then refuses
// connections), up(true) starts it again.
func servesBothVersions(t *testing.T, ns string) (up func(bool)) {
	ctx := context.Background()
	ext, err := apiextensionsclient.NewForConfig(env.Config)
	require.NoError(t, err)
	core, err := kubernetes.NewForConfig(env.Config)
	require.NoError(t, err)
	ports, err := testenv.FreePorts(1)
	require.NoError(t, err)
	addr := "127.0.0.1:" + strconv.Itoa(ports[0])

	setCRD := func(both bool) {
		t.Helper()
		require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
			crd, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "inferencestacks.inferencestack.io", metav1.GetOptions{})
			require.NoError(t, err)
			for i := range crd.Spec.Versions {
				crd.Spec.Versions[i].Served = both || crd.Spec.Versions[i].Name == "v1alpha1"
			}
			crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter}
			if both {
				crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter,
					Webhook: &apiextensionsv1.WebhookConversion{ConversionReviewVersions: []string{"v1"},
						ClientConfig: &apiextensionsv1.WebhookClientConfig{URL: ptr.To("https://" + addr + conversion.Path)}}}
			}
			_, err = ext.ApiextensionsV1().CustomResourceDefinitions().Update(ctx, crd, metav1.UpdateOptions{})
			return err
		}))
	}
	stop := func() {}
	up = func(on bool) {
		t.Helper()
		if !on {
			stop()
			stop = func() {}
			return
		}
		s := &conversion.Server{Core: core, Extensions: ext, Namespace: ns, SecretName: "conversion-tls", CRDName: "inferencestacks.inferencestack.io",
			IPs: []net.IP{net.ParseIP("127.0.0.1")}, Addr: addr, Validity: time.Hour, CheckInterval: 200 * time.Millisecond, Log: testr.New(t)}
		_, err := s.Listen()
		require.NoError(t, err)
		sctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- s.Run(sctx) }()
		stop = func() {
			cancel()
			require.NoError(t, <-done)
		}
	}
	setCRD(true)
	up(true)
	t.Cleanup(func() {
		setCRD(false)
		stop()
	})
	return up
}
