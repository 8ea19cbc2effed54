package controller_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/components"
	"github.com/inferencestack/inferencestack/operator/components/cache"
	"github.com/inferencestack/inferencestack/operator/components/config"
	"github.com/inferencestack/inferencestack/operator/components/network"
	"github.com/inferencestack/inferencestack/operator/internal/controller"
	"github.com/inferencestack/inferencestack/operator/runconfig"
	"github.com/inferencestack/inferencestack/operator/runconfig/stackconfig"
	"github.com/inferencestack/inferencestack/test/testutil"
)

const timeout = 30 * time.Second

func secret(ns, name string, data map[string]string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, StringData: data}
}

// fullStack uses every component: an API-key Secret, the cache, auth,
// autoscaling and a disruption budget.
func fullStack(ns, name, keySecret string) *v1alpha1.InferenceStack {
	return testutil.Stack(name, testutil.WithNamespace(ns),
		testutil.WithDistribution(v1alpha1.DistributionRemoteVLLM),
		testutil.WithProviders("inference", testutil.Provider("vllm",
			testutil.WithEndpoint("http://vllm:8000/v1"), testutil.WithAPIKey(keySecret, "token"))),
		testutil.WithModel("llama-3", "vllm"),
		testutil.WithCache(),
		testutil.WithKV(v1alpha1.KVStoreSpec{Type: v1alpha1.KVStoreRedis, Endpoint: "redis:6379"}),
		testutil.WithKubernetesAuth("system:authenticated"),
		testutil.WithAutoscaling(1, 3, 70),
		testutil.WithPodDisruptionBudget(ptr.To(intstr.FromInt32(1)), nil),
	)
}

// converged waits until the stack's status describes its generation with
// the config generated and nothing degraded.
func converged(t *testing.T, ns, name string) *v1alpha1.InferenceStack {
	t.Helper()
	var stack *v1alpha1.InferenceStack
	eventually(t, timeout, func() error {
		var err error
		stack, err = get(t, &v1alpha1.InferenceStack{}, ns, name)
		if err != nil {
			return err
		}
		st := stack.Status
		switch {
		case st.ObservedGeneration != stack.Generation:
			return fmt.Errorf("status is of generation %d, spec is %d", st.ObservedGeneration, stack.Generation)
		case !meta.IsStatusConditionTrue(st.Conditions, v1alpha2.TypeConfigGenerated):
			return fmt.Errorf("ConfigGenerated is not True: %+v", st.Conditions)
		case !meta.IsStatusConditionFalse(st.Conditions, v1alpha2.TypeDegraded):
			return fmt.Errorf("Degraded is not False: %+v", st.Conditions)
		}
		return nil
	})
	return stack
}

// reconciledAfterNow makes the operator reconcile stack name once more and
// waits until that reconcile has finished: it changes
// spec.cache.retainOnDelete (which only matters when the stack is deleted,
// so no object changes) and waits until the status describes the new
// generation. That reconcile began after the change reached the operator's
// cache, so it saw every object the cache held by then (the caller makes
// sure the one that matters is among them): whatever those make the operator
// write to the stack's objects has been written when this returns, and a
// test can assert that nothing was, without sleeping.
func reconciledAfterNow(t *testing.T, ns, name string) {
	t.Helper()
	update(t, ns, name, func(s *v1alpha1.InferenceStack) {
		if s.Spec.Cache == nil {
			t.Fatalf("stack %s has no spec.cache to change", name)
		}
		s.Spec.Cache.RetainOnDelete = ptr.To(!cache.Retained(testutil.Hub(s)))
	})
	converged(t, ns, name)
}

func TestCreateMakesEveryObjectAndStatus(t *testing.T) {
	startOperator(t)
	ns := namespace(t)
	create(t, secret(ns, "vllm-key", map[string]string{"token": "s3cret"}))
	create(t, fullStack(ns, "full", "vllm-key"))
	stack := converged(t, ns, "full")

	st := stack.Status
	if st.Phase != v1alpha2.PhaseDeploying {
		t.Errorf("phase = %s, want Deploying (no kubelet runs pods here)", st.Phase)
	}
	// The status describes the Deployment once the operator's cache holds it.
	eventually(t, timeout, func() error {
		stack, _ = get(t, &v1alpha1.InferenceStack{}, ns, "full")
		st = stack.Status
		want := v1alpha1.ResolvedDistribution{Name: "remote-vllm", Image: testPin.Operands["starter"],
			OperandVersion: testPin.LlamaStackVersion, OperatorVersion: testPin.OperatorVersion}
		if st.ResolvedDistribution == nil || *st.ResolvedDistribution != want {
			return fmt.Errorf("resolvedDistribution = %+v, want %+v", st.ResolvedDistribution, want)
		}
		if want := "http://full." + ns + ".svc:8321"; st.URL != want {
			return fmt.Errorf("url = %q, want %q", st.URL, want)
		}
		// The autoscaler owns the replicas: the API server defaults them to 1.
		if st.Replicas != 1 || st.ReadyReplicas != 0 || st.AvailableReplicas != 0 {
			return fmt.Errorf("replicas %d, ready %d, available %d; want 1, 0, 0 (no kubelet runs pods here)",
				st.Replicas, st.ReadyReplicas, st.AvailableReplicas)
		}
		return nil
	})
	// ProvidersHealthy comes only once the server is Available
	// (TestLiveServerStatus).
	if want := slices.DeleteFunc(slices.Clone(v1alpha2.ConditionTypes), func(c string) bool { return c == v1alpha2.TypeProvidersHealthy }); len(st.Conditions) != len(want) {
		t.Errorf("conditions %+v, want one of each of %v", st.Conditions, want)
	}

	cm, err := get(t, &corev1.ConfigMap{}, ns, config.ConfigMapName("full"))
	if err != nil {
		t.Fatal(err)
	}
	if st.Config == nil || st.Config.Hash != cm.Annotations[components.AnnotationConfigHash] || st.Config.ConfigMapName != cm.Name {
		t.Errorf("status.config %+v does not match ConfigMap %s (hash %s)", st.Config, cm.Name, cm.Annotations[components.AnnotationConfigHash])
	}
	if strings.Contains(cm.Data["run.yaml"], "s3cret") {
		t.Error("the run config holds the API key's value")
	}

	dep, err := get(t, &appsv1.Deployment{}, ns, "full")
	if err != nil {
		t.Fatal(err)
	}
	pod := dep.Spec.Template.Spec
	c := pod.Containers[0]
	if c.Image != testPin.Operands["starter"] {
		t.Errorf("server image %s", c.Image)
	}
	if sc := pod.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot ||
		sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod security context %+v is not restricted", sc)
	}
	if sc := c.SecurityContext; sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
		t.Errorf("container security context %+v is not restricted", sc)
	}
	if c.ReadinessProbe == nil || c.LivenessProbe == nil {
		t.Error("server has no probes")
	}
	foundKey := false
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name == "vllm-key" {
			foundKey = true
		}
	}
	if !foundKey {
		t.Errorf("server env %+v does not take the API key from Secret vllm-key", c.Env)
	}

	for _, o := range []struct {
		obj  client.Object
		name string
	}{
		{&corev1.ServiceAccount{}, "full-server"},
		{&corev1.Service{}, "full"},
		{&corev1.Secret{}, cache.SecretName(stack)},
		{&corev1.PersistentVolumeClaim{}, cache.PVCName(stack)},
		{&appsv1.Deployment{}, cache.Name(stack)},
		{&corev1.Service{}, cache.Name(stack)},
		{&networkingv1.NetworkPolicy{}, "full-server"},
		{&networkingv1.NetworkPolicy{}, "full-cache"},
		{&autoscalingv2.HorizontalPodAutoscaler{}, "full"},
		{&policyv1.PodDisruptionBudget{}, "full"},
	} {
		if _, err := get(t, o.obj, ns, o.name); err != nil {
			t.Errorf("%T %s: %v", o.obj, o.name, err)
		}
	}
	// Kubernetes auth needs no RBAC of the server (SelfSubjectReviews go
	// with the caller's token): the operator grants nothing for it.
	for _, list := range []client.ObjectList{&rbacv1.ClusterRoleList{}, &rbacv1.ClusterRoleBindingList{}} {
		if err := env.Client.List(context.Background(), list, client.MatchingLabels{components.LabelManagedBy: components.ManagedBy}); err != nil {
			t.Fatal(err)
		}
		if n := meta.LenList(list); n != 0 {
			t.Errorf("the operator made %d %T objects for a stack with auth.kubernetes", n, list)
		}
	}
	pvc, _ := get(t, &corev1.PersistentVolumeClaim{}, ns, cache.PVCName(stack))
	if len(pvc.OwnerReferences) != 0 {
		t.Errorf("the cache volume claim has owner references %v: garbage collection would delete its data", pvc.OwnerReferences)
	}
}

// TestSteadyStateMakesNoWrites: stacks that together use every feature
// (testutil.FeatureStack), once converged, are reconciled again and again
// (each stack's reconcile after each change waited for: reconcileAll)
// without a single API write.
func TestSteadyStateMakesNoWrites(t *testing.T) {
	op := startOperator(t)
	ns := namespace(t)
	override, err := runconfig.Base(stackconfig.Line02, string(v1alpha1.DistributionStarter)) // testPin pins 0.2.23
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range testutil.FeatureObjects(ns, override) {
		create(t, obj)
	}
	var names []string
	for i := range 2 * testutil.FeatureVariants {
		names = append(names, fmt.Sprintf("calm-%d", i))
		create(t, testutil.FeatureStack(ns, names[i], i))
	}
	for _, name := range names {
		converged(t, ns, name)
	}
	// The operator's own writes come back as events and reconciles (status
	// updates as its objects reach its cache): rounds of reconciles until
	// one writes nothing.
	for round := 1; ; round++ {
		op.writes.Reset()
		op.reconcileAll(t, ns, names, fmt.Sprintf("settle-%d", round))
		if len(op.writes.In(ns)) == 0 {
			break
		}
		if round == 5 {
			t.Fatalf("%d rounds of reconciles still write:\n%s", round, strings.Join(op.writes.In(ns), "\n"))
		}
	}
	op.writes.Reset()
	for round := range 5 {
		op.reconcileAll(t, ns, names, fmt.Sprint(round))
	}
	if w := op.writes.In(ns); len(w) != 0 {
		t.Errorf("reconciling %d unchanged stacks 5 times each made %d writes, want 0:\n%s",
			len(names), len(w), strings.Join(w, "\n"))
	}
}

// reconcileAll changes an annotation of each named stack, which makes the
// operator reconcile it once more, and waits until, for each, a reconcile
// that read the stack as changed (or later) has finished without error.
// That reconcile began after the change reached the operator's cache, so it
// saw every object the cache held by then: whatever those make the operator
// write has been written when this returns. (A reconcile of the stack that
// was running when the annotation changed does not count: it read an older
// version, and one stack's reconciles never overlap.)
func (op *operator) reconcileAll(t *testing.T, ns string, names []string, round string) {
	t.Helper()
	changed := map[types.NamespacedName]string{}
	// A value of its own, so the patch changes the stack even when a test
	// names two rounds alike.
	value := fmt.Sprintf("%s #%d", round, op.rounds.Add(1))
	for _, name := range names {
		patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"annotations":{"test/round":%q}}}`, value))
		stack := &v1alpha1.InferenceStack{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		if err := env.Client.Patch(context.Background(), stack, patch); err != nil {
			t.Fatal(err)
		}
		changed[client.ObjectKeyFromObject(stack)] = stack.ResourceVersion
	}
	eventually(t, timeout, func() error {
		for key, rv := range changed {
			read, err := op.reconciles.Read(key, rv)
			if err != nil {
				t.Fatal(err)
			}
			if !read {
				return fmt.Errorf("round %s: no reconcile of stack %s that read resourceVersion %s or later has finished", round, key, rv)
			}
		}
		return nil
	})
}

// TestStatusReportsTheDeployedServer: url (https with TLS), replica counts
// from the server Deployment's status, and the image it runs.
func TestStatusReportsTheDeployedServer(t *testing.T) {
	startOperator(t)
	ns := namespace(t)
	for _, obj := range testutil.FeatureObjects(ns, nil) {
		create(t, obj)
	}
	create(t, testutil.Stack("tls", testutil.WithNamespace(ns), testutil.WithReplicas(3), testutil.WithPort(443),
		// Three replicas share their state: Redis and an external PostgreSQL.
		testutil.WithKV(v1alpha1.KVStoreSpec{Type: v1alpha1.KVStoreRedis, Endpoint: "redis:6379"}),
		testutil.WithSQL(v1alpha1.SQLStoreSpec{Type: v1alpha1.SQLStorePostgres, ConnectionString: testutil.SecretKey(testutil.FeatureSQLSecret, "uri")}),
		testutil.WithTLS(v1alpha1.TLSSpec{Enabled: true, SecretName: testutil.FeatureTLSSecret})))
	create(t, testutil.FeatureStack(ns, "custom", 3))
	converged(t, ns, "tls")
	converged(t, ns, "custom")

	var dep *appsv1.Deployment
	eventually(t, timeout, func() error {
		var err error
		dep, err = get(t, &appsv1.Deployment{}, ns, "tls")
		return err
	})
	// What the Deployment controller would write once two pods run.
	dep.Status = appsv1.DeploymentStatus{ObservedGeneration: dep.Generation, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 2, AvailableReplicas: 2}
	if err := env.Client.Status().Update(context.Background(), dep); err != nil {
		t.Fatal(err)
	}
	eventually(t, timeout, func() error {
		stack, _ := get(t, &v1alpha1.InferenceStack{}, ns, "tls")
		st := stack.Status
		if want := "https://tls." + ns + ".svc:443"; st.URL != want {
			return fmt.Errorf("url = %q, want %q", st.URL, want)
		}
		if st.Replicas != 3 || st.ReadyReplicas != 2 || st.AvailableReplicas != 2 {
			return fmt.Errorf("replicas %d, ready %d, available %d; want 3, 2, 2", st.Replicas, st.ReadyReplicas, st.AvailableReplicas)
		}
		if !meta.IsStatusConditionTrue(st.Conditions, v1alpha2.TypeAvailable) {
			return fmt.Errorf("Available is not True with 2 replicas available: %+v", st.Conditions)
		}
		if rd := st.ResolvedDistribution; rd == nil || rd.OperandVersion != testPin.LlamaStackVersion {
			return fmt.Errorf("resolvedDistribution %+v, want operand version %s", rd, testPin.LlamaStackVersion)
		}
		return nil
	})
	eventually(t, timeout, func() error {
		stack, _ := get(t, &v1alpha1.InferenceStack{}, ns, "custom")
		want := v1alpha1.ResolvedDistribution{Name: v1alpha1.CustomDistributionName, Image: stack.Spec.Distribution.Image,
			OperandVersion: v1alpha1.UnknownVersion, OperatorVersion: testPin.OperatorVersion}
		if rd := stack.Status.ResolvedDistribution; rd == nil || *rd != want {
			return fmt.Errorf("resolvedDistribution %+v, want %+v", rd, want)
		}
		if stack.Status.Replicas != 0 {
			return fmt.Errorf("replicas %d of a stack scaled to zero", stack.Status.Replicas)
		}
		return nil
	})
}

func TestSpecChangeRollsOutOnlyTheServer(t *testing.T) {
	startOperator(t)
	ns := namespace(t)
	create(t, secret(ns, "vllm-key", map[string]string{"token": "s3cret"}))
	create(t, fullStack(ns, "roll", "vllm-key"))
	converged(t, ns, "roll")
	server, _ := get(t, &appsv1.Deployment{}, ns, "roll")
	pg, _ := get(t, &appsv1.Deployment{}, ns, "roll-cache")

	// A config change: another model.
	update(t, ns, "roll", func(s *v1alpha1.InferenceStack) {
		s.Spec.Resources.Models = append(s.Spec.Resources.Models, v1alpha1.ModelSpec{Name: "llama-4", Provider: "vllm", ModelType: v1alpha1.ModelTypeLLM})
	})
	converged(t, ns, "roll")
	var server2 *appsv1.Deployment
	eventually(t, timeout, func() error {
		server2, _ = get(t, &appsv1.Deployment{}, ns, "roll")
		if server2.Spec.Template.Annotations[components.AnnotationConfigHash] == server.Spec.Template.Annotations[components.AnnotationConfigHash] {
			return errors.New("the server's pod template still carries the old config hash")
		}
		return nil
	})
	if pg2, _ := get(t, &appsv1.Deployment{}, ns, "roll-cache"); pg2.Generation != pg.Generation {
		t.Errorf("the cache Deployment went from generation %d to %d on a server config change", pg.Generation, pg2.Generation)
	}

	// A config-neutral change: keep the cache's data on delete or not. Once
	// the status describes it, the reconcile of the change has written all
	// it would write.
	update(t, ns, "roll", func(s *v1alpha1.InferenceStack) { s.Spec.Cache.RetainOnDelete = ptr.To(false) })
	converged(t, ns, "roll")
	if server3, _ := get(t, &appsv1.Deployment{}, ns, "roll"); server3.Generation != server2.Generation {
		t.Errorf("a config-neutral change rolled the server out (generation %d -> %d)", server2.Generation, server3.Generation)
	}
}

func TestSecretRotationRestartsOnlyItsUsers(t *testing.T) {
	startOperator(t)
	ns := namespace(t)
	create(t, secret(ns, "key-a", map[string]string{"token": "a1"}))
	create(t, secret(ns, "key-b", map[string]string{"token": "b1"}))
	create(t, fullStack(ns, "a", "key-a"))
	create(t, fullStack(ns, "b", "key-b"))
	converged(t, ns, "a")
	converged(t, ns, "b")
	var a, b *appsv1.Deployment
	eventually(t, timeout, func() error {
		var err error
		a, err = get(t, &appsv1.Deployment{}, ns, "a")
		if err != nil {
			return err
		}
		b, err = get(t, &appsv1.Deployment{}, ns, "b")
		return err
	})
	pg, _ := get(t, &appsv1.Deployment{}, ns, "a-cache")

	rotated := edit(t, &corev1.Secret{}, ns, "key-a", func(s *corev1.Secret) { s.Data["token"] = []byte("a2") })
	if rotated.Labels[components.LabelWatched] != "true" {
		t.Errorf("the referenced Secret has labels %v, want %s=true", rotated.Labels, components.LabelWatched)
	}
	eventually(t, timeout, func() error {
		a2, _ := get(t, &appsv1.Deployment{}, ns, "a")
		if a2.Spec.Template.Annotations[components.AnnotationSecretsHash] == a.Spec.Template.Annotations[components.AnnotationSecretsHash] {
			return errors.New("stack a's server did not restart after its Secret changed")
		}
		return nil
	})
	// a's restart shows the rotated Secret is in the operator's cache; a
	// reconcile of each stack after that has written all the rotation makes
	// it write.
	reconciledAfterNow(t, ns, "b")
	reconciledAfterNow(t, ns, "a")
	if b2, _ := get(t, &appsv1.Deployment{}, ns, "b"); b2.Generation != b.Generation {
		t.Errorf("stack b's server restarted (generation %d -> %d) for a Secret it does not use", b.Generation, b2.Generation)
	}
	if pg2, _ := get(t, &appsv1.Deployment{}, ns, "a-cache"); pg2.Generation != pg.Generation {
		t.Errorf("stack a's cache restarted for the API key's rotation")
	}
}

func TestHandEditsAreRepaired(t *testing.T) {
	startOperator(t)
	ns := namespace(t)
	create(t, testutil.Stack("fix", testutil.WithNamespace(ns)))
	converged(t, ns, "fix")
	var svc *corev1.Service
	eventually(t, timeout, func() error {
		var err error
		svc, err = get(t, &corev1.Service{}, ns, "fix")
		return err
	})
	if err := env.Client.Delete(context.Background(), svc); err != nil {
		t.Fatal(err)
	}
	eventually(t, timeout, func() error {
		again, err := get(t, &corev1.Service{}, ns, "fix")
		if err != nil {
			return err
		}
		if again.UID == svc.UID {
			return errors.New("the Service was not deleted yet")
		}
		return nil
	})

	edit(t, &appsv1.Deployment{}, ns, "fix", func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To(int32(7)) })
	eventually(t, timeout, func() error {
		again, _ := get(t, &appsv1.Deployment{}, ns, "fix")
		if *again.Spec.Replicas != 1 {
			return fmt.Errorf("replicas still %d", *again.Spec.Replicas)
		}
		return nil
	})
}

func TestMissingSecretSetsConditionThenRecovers(t *testing.T) {
	startOperator(t)
	ns := namespace(t)
	create(t, testutil.Stack("wait", testutil.WithNamespace(ns),
		testutil.WithProviders("inference", testutil.Provider("openai", testutil.WithAPIKey("openai-key", "key")))))
	eventually(t, timeout, func() error {
		stack, err := get(t, &v1alpha1.InferenceStack{}, ns, "wait")
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(stack.Status.Conditions, v1alpha2.TypeDegraded)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha2.ReasonSecretNotFound ||
			!strings.Contains(c.Message, "Secret openai-key") {
			return fmt.Errorf("Degraded condition %+v, want True/SecretNotFound naming Secret openai-key", c)
		}
		return nil
	})
	if _, err := get(t, &appsv1.Deployment{}, ns, "wait"); !apierrors.IsNotFound(err) {
		t.Errorf("the server was deployed without its Secret (err %v)", err)
	}
	create(t, secret(ns, "openai-key", map[string]string{"key": "sk-1"}))
	converged(t, ns, "wait")
	eventually(t, timeout, func() error {
		_, err := get(t, &appsv1.Deployment{}, ns, "wait")
		return err
	})
}

// TestDeletionCleansUpAndKeepsTheCacheVolume: no stack gets a finalizer; a
// cache volume and password kept by retainOnDelete (the default) have no
// owner reference and outlive the stack, which an event says; with
// retainOnDelete: false the stack owns them and the garbage collector
// deletes them with it. Switching retainOnDelete over moves the owner
// reference; the user's Secret stays.
func TestDeletionCleansUpAndKeepsTheCacheVolume(t *testing.T) {
	startOperator(t)
	ns := namespace(t)
	create(t, secret(ns, "vllm-key", map[string]string{"token": "s3cret"}))
	keep := fullStack(ns, "keep", "vllm-key")
	drop := fullStack(ns, "drop", "vllm-key")
	drop.Spec.Cache.RetainOnDelete = ptr.To(false)
	create(t, keep)
	create(t, drop)
	ownedBy := func(name string, want bool) {
		t.Helper()
		stack := converged(t, ns, name)
		eventually(t, timeout, func() error {
			for _, obj := range []client.Object{&corev1.PersistentVolumeClaim{}, &corev1.Secret{}} {
				objName := cache.PVCName(stack)
				if _, ok := obj.(*corev1.Secret); ok {
					objName = cache.SecretName(stack)
				}
				if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: objName}, obj); err != nil {
					return err
				}
				owned := slices.ContainsFunc(obj.GetOwnerReferences(), func(r metav1.OwnerReference) bool { return r.UID == stack.UID })
				if owned != want {
					return fmt.Errorf("%T %s of stack %s: owned by it %v, want %v (owner references %v)", obj, objName, name, owned, want, obj.GetOwnerReferences())
				}
			}
			return nil
		})
	}
	ownedBy("keep", false)
	ownedBy("drop", true)
	// Over and back: the owner reference follows retainOnDelete.
	update(t, ns, "drop", func(s *v1alpha1.InferenceStack) { s.Spec.Cache.RetainOnDelete = nil })
	ownedBy("drop", false)
	update(t, ns, "drop", func(s *v1alpha1.InferenceStack) { s.Spec.Cache.RetainOnDelete = ptr.To(false) })
	ownedBy("drop", true)
	for _, name := range []string{"keep", "drop"} {
		stack := converged(t, ns, name)
		if len(stack.Finalizers) != 0 {
			t.Fatalf("stack %s has finalizers %v, want none", name, stack.Finalizers)
		}
		if err := env.Client.Delete(context.Background(), stack); err != nil {
			t.Fatal(err)
		}
	}
	for _, stack := range []*v1alpha1.InferenceStack{keep, drop} {
		eventually(t, timeout, func() error {
			if _, err := get(t, &v1alpha1.InferenceStack{}, ns, stack.Name); !apierrors.IsNotFound(err) {
				return fmt.Errorf("stack %s still exists (%w)", stack.Name, err)
			}
			if _, err := get(t, &appsv1.Deployment{}, ns, stack.Name); !apierrors.IsNotFound(err) {
				return fmt.Errorf("Deployment %s was not garbage-collected (%w)", stack.Name, err)
			}
			return nil
		})
	}
	eventually(t, timeout, func() error {
		if !slices.Contains(eventReasonsOf(t, ns, "keep"), "CacheRetained") {
			return errors.New("no CacheRetained event on the deleted stack keep")
		}
		return nil
	})
	if slices.Contains(eventReasonsOf(t, ns, "drop"), "CacheRetained") {
		t.Error("a CacheRetained event on the stack drop, whose cache was not retained")
	}
	if _, err := get(t, &corev1.PersistentVolumeClaim{}, ns, cache.PVCName(keep)); err != nil {
		t.Errorf("the retained cache volume claim is gone: %v", err)
	}
	if _, err := get(t, &corev1.Secret{}, ns, cache.SecretName(keep)); err != nil {
		t.Errorf("the retained cache password is gone: %v", err)
	}
	eventually(t, timeout, func() error {
		// Deleted: gone, or held only by the kubernetes.io/pvc-protection
		// finalizer (its controller does not run here).
		pvc, err := get(t, &corev1.PersistentVolumeClaim{}, ns, cache.PVCName(drop))
		if apierrors.IsNotFound(err) || (err == nil && pvc.DeletionTimestamp != nil) {
			if _, err := get(t, &corev1.Secret{}, ns, cache.SecretName(drop)); !apierrors.IsNotFound(err) {
				return fmt.Errorf("retainOnDelete=false: the cache password is still there (err %w)", err)
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading the volume claim: %w", err)
		}
		return errors.New("retainOnDelete=false: the volume claim is still there")
	})
	if _, err := get(t, &corev1.Secret{}, ns, "vllm-key"); err != nil {
		t.Errorf("the user's Secret was deleted: %v", err)
	}
}

// TestStackWithTheOldFinalizerIsFinalized: a stack that still carries the
// finalizer an earlier release added, deleted before this release gave its
// volumes owner references, is cleaned up as that release did it (its
// retainOnDelete: false volume deleted) and let go.
func TestStackWithTheOldFinalizerIsFinalized(t *testing.T) {
	ns := namespace(t)
	create(t, secret(ns, "vllm-key", map[string]string{"token": "s3cret"}))
	old := fullStack(ns, "old", "vllm-key")
	old.Spec.Cache.RetainOnDelete = ptr.To(false)
	old.Finalizers = []string{controller.Finalizer}
	create(t, old)
	// Its volume as the earlier release made it: no owner reference.
	create(t, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cache.PVCName(old), Labels: map[string]string{
			components.LabelManagedBy: components.ManagedBy, components.LabelInstance: old.Name}},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
	})
	if err := env.Client.Delete(context.Background(), old); err != nil {
		t.Fatal(err)
	}
	startOperator(t)
	eventually(t, timeout, func() error {
		if _, err := get(t, &v1alpha1.InferenceStack{}, ns, old.Name); !apierrors.IsNotFound(err) {
			return fmt.Errorf("stack %s still exists (err %w)", old.Name, err)
		}
		pvc, err := get(t, &corev1.PersistentVolumeClaim{}, ns, cache.PVCName(old))
		if apierrors.IsNotFound(err) || (err == nil && pvc.DeletionTimestamp != nil) {
			return nil
		}
		return fmt.Errorf("retainOnDelete=false: the volume claim is still there (err %w)", err)
	})
}

// TestLabelsOfStacksDeletedWhileTheOperatorWasDownGo: a stack deleted while
// no operator runs leaves the watched label on its Secret; with no stack
// left in the namespace (whose reconciles would remove it), the next
// operator's sweep at start-up does.
func TestLabelsOfStacksDeletedWhileTheOperatorWasDownGo(t *testing.T) {
	first := startOperator(t)
	ns := namespace(t)
	create(t, secret(ns, "gone-key", map[string]string{"token": "a"}))
	gone := testutil.Stack("gone", testutil.WithNamespace(ns),
		testutil.WithProviders("inference", testutil.Provider("openai", testutil.WithAPIKey("gone-key", "token"))))
	create(t, gone)
	converged(t, ns, gone.Name)
	first.stop()
	if err := env.Client.Delete(context.Background(), gone); err != nil {
		t.Fatal(err)
	}
	eventually(t, timeout, func() error {
		if _, err := get(t, &v1alpha1.InferenceStack{}, ns, gone.Name); !apierrors.IsNotFound(err) {
			return fmt.Errorf("stack %s still exists (err %w)", gone.Name, err)
		}
		return nil
	})
	if s, err := get(t, &corev1.Secret{}, ns, "gone-key"); err != nil || s.Labels[components.LabelWatched] != "true" {
		t.Fatalf("with no operator running, the Secret has labels %v (err %v), want %s=true still", s.Labels, err, components.LabelWatched)
	}
	startOperator(t)
	eventually(t, timeout, func() error {
		s, err := get(t, &corev1.Secret{}, ns, "gone-key")
		if err != nil {
			return err
		}
		if _, ok := s.Labels[components.LabelWatched]; ok {
			return errors.New("the Secret of the stack deleted while the operator was down is still labelled")
		}
		return nil
	})
}

func TestOperatorRestartConverges(t *testing.T) {
	first := startOperator(t)
	ns := namespace(t)
	create(t, secret(ns, "vllm-key", map[string]string{"token": "s3cret"}))
	for i := range 5 {
		create(t, fullStack(ns, fmt.Sprintf("r%d", i), "vllm-key"))
	}
	// Stop mid-way: as soon as the first objects appear.
	eventually(t, timeout, func() error {
		_, err := get(t, &corev1.ConfigMap{}, ns, config.ConfigMapName("r0"))
		return err
	})
	first.stop()
	second := startOperator(t)
	for i := range 5 {
		converged(t, ns, fmt.Sprintf("r%d", i))
		eventually(t, timeout, func() error {
			_, err := get(t, &policyv1.PodDisruptionBudget{}, ns, fmt.Sprintf("r%d", i))
			return err
		})
	}
	// The second operator is idle once a round of reconciles writes nothing.
	names := []string{"r0", "r1", "r2", "r3", "r4"}
	for round := 1; ; round++ {
		second.writes.Reset()
		second.reconcileAll(t, ns, names, fmt.Sprintf("settle-%d", round))
		if len(second.writes.In(ns)) == 0 {
			break
		}
		if round == 5 {
			t.Fatalf("%d rounds of reconciles still write:\n%s", round, strings.Join(second.writes.In(ns), "\n"))
		}
	}
	// The third operator's informers list the 5 stacks at start: it
	// reconciles each once.
	third := startOperator(t)
	eventually(t, timeout, func() error {
		for _, name := range names {
			if third.reconciles.Finished(types.NamespacedName{Namespace: ns, Name: name}) == 0 {
				return fmt.Errorf("the restarted operator has not reconciled stack %s", name)
			}
		}
		return nil
	})
	second.stop()
	third.reconcileAll(t, ns, names, "after-restart")
	if w := third.writes.In(ns); len(w) != 0 {
		t.Errorf("a restarted operator wrote to converged stacks:\n%s", strings.Join(w, "\n"))
	}
	// Once at start and once for the annotation: its writes (none) brought
	// no stack back.
	for _, name := range names {
		if n := third.reconciles.Finished(types.NamespacedName{Namespace: ns, Name: name}); n != 2 {
			t.Errorf("the restarted operator reconciled stack %s %d times, want 2 (at start, after the annotation)", name, n)
		}
	}
}

func update(t *testing.T, ns, name string, change func(*v1alpha1.InferenceStack)) {
	t.Helper()
	edit(t, &v1alpha1.InferenceStack{}, ns, name, change)
}

// TestAutoscalingOnMemory: a stack whose autoscaling a v1alpha2 client
// wrote (memory and CPU; the operator reads v1alpha1, where the list is in
// the annotation) gets an autoscaler on both; an annotation v1alpha2 would
// refuse makes the stack Degraded, naming it, and the autoscaler stays as
// it was.
func TestAutoscalingOnMemory(t *testing.T) {
	startOperator(t)
	ns := namespace(t)
	v2 := &v1alpha2.InferenceStack{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mem"},
		Spec: v1alpha2.InferenceStackSpec{Distribution: v1alpha2.DistributionSpec{Name: "starter"},
			Scaling: &v1alpha2.ScalingSpec{Autoscaling: &v1alpha2.AutoscalingSpec{MaxReplicas: 3, Metrics: []v1alpha2.ResourceMetric{
				{Resource: v1alpha2.ResourceMemory, AverageUtilization: 60}, {Resource: v1alpha2.ResourceCPU, AverageUtilization: 70}}}}}}
	stack := &v1alpha1.InferenceStack{}
	if err := stack.ConvertFrom(v2); err != nil {
		t.Fatal(err)
	}
	// State shared by the replicas.
	testutil.WithCache()(stack)
	testutil.WithKV(v1alpha1.KVStoreSpec{Type: v1alpha1.KVStoreRedis, Endpoint: "redis:6379"})(stack)
	create(t, stack)
	converged(t, ns, "mem")
	aims := func() string {
		hpa, err := get(t, &autoscalingv2.HorizontalPodAutoscaler{}, ns, "mem")
		if err != nil {
			return err.Error()
		}
		var got []string
		for _, m := range hpa.Spec.Metrics {
			got = append(got, fmt.Sprintf("%s=%d", m.Resource.Name, *m.Resource.Target.AverageUtilization))
		}
		return strings.Join(got, ",")
	}
	eventually(t, timeout, func() error {
		if got := aims(); got != "memory=60,cpu=70" {
			return fmt.Errorf("autoscaler aims at %s, want memory=60,cpu=70", got)
		}
		return nil
	})

	update(t, ns, "mem", func(s *v1alpha1.InferenceStack) {
		s.Annotations[v1alpha2.MetricsAnnotation] = `[{"resource":"gpu","averageUtilization":50}]`
	})
	eventually(t, timeout, func() error {
		c, _ := degradedOf(t, ns, "mem")
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha2.ReasonInvalidSpec ||
			!strings.Contains(c.Message, "spec.scaling.autoscaling.metrics[") || !strings.Contains(c.Message, v1alpha2.MetricsAnnotation) {
			return fmt.Errorf("Degraded %+v, want True (InvalidSpec) naming the v1alpha2 field and the annotation", c)
		}
		return nil
	})
	if got := aims(); got != "memory=60,cpu=70" {
		t.Errorf("the autoscaler changed to %s on a refused annotation", got)
	}
}

// TestAllowedFromNarrowsTheServerPolicy: a stack whose networking.allowedFrom
// a v1alpha2 client wrote (the operator reads v1alpha1: the annotation) gets
// a server NetworkPolicy admitting its own namespace, the named one and
// the operator's own pods (its namespace and labels in one peer, for its
// prober) only, which the API server accepts. (Whether a CNI enforces it
// is the cluster's: the node tests show one that does, docs/node.md.)
func TestAllowedFromNarrowsTheServerPolicy(t *testing.T) {
	operatorPods, err := network.NewOperatorPeer("inferencestack-system", network.DefaultOperatorPodLabels)
	if err != nil {
		t.Fatal(err)
	}
	startOperator(t, withOperatorPeer(operatorPods))
	ns := namespace(t)
	v2 := &v1alpha2.InferenceStack{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "narrow"},
		Spec: v1alpha2.InferenceStackSpec{Distribution: v1alpha2.DistributionSpec{Name: "starter"},
			Networking: &v1alpha2.NetworkingSpec{AllowedFrom: &v1alpha2.AllowedFromSpec{Namespaces: []string{"clients"}}}}}
	stack := &v1alpha1.InferenceStack{}
	if err := stack.ConvertFrom(v2); err != nil {
		t.Fatal(err)
	}
	create(t, stack)
	converged(t, ns, "narrow")
	eventually(t, timeout, func() error {
		np, err := get(t, &networkingv1.NetworkPolicy{}, ns, "narrow-server")
		if err != nil {
			return err
		}
		from := np.Spec.Ingress[0].From
		if len(from) != 3 || from[0].PodSelector == nil || from[0].NamespaceSelector != nil ||
			from[1].NamespaceSelector == nil || from[1].NamespaceSelector.MatchLabels[corev1.LabelMetadataName] != "clients" ||
			from[2].NamespaceSelector == nil || from[2].NamespaceSelector.MatchLabels[corev1.LabelMetadataName] != "inferencestack-system" ||
			from[2].PodSelector == nil || !maps.Equal(from[2].PodSelector.MatchLabels, network.DefaultOperatorPodLabels) {
			return fmt.Errorf("server NetworkPolicy admits %+v, want the stack's namespace, clients and the operator's pods", from)
		}
		return nil
	})
}

// TestStatusChangesAreEvents: a new stack whose Secret is missing is
// Degraded and records one Warning naming the cause; once the Secret
// exists it deploys and records the phase change; reconciled again with
// nothing changed, it records nothing more. A stack that deploys at once
// records no Event of its own (TestCreationWritesEachObjectOnce counts them).
func TestStatusChangesAreEvents(t *testing.T) {
	op := startOperator(t)
	ns := namespace(t)
	create(t, testutil.Stack("ev", testutil.WithNamespace(ns),
		testutil.WithProviders("inference", testutil.Provider("openai", testutil.WithAPIKey("openai-key", "key")))))
	eventually(t, timeout, func() error {
		if got := op.events.of(ns, "ev"); !slices.Equal(got, []string{v1alpha2.ReasonSecretNotFound}) {
			return fmt.Errorf("events %q, want [%s]", got, v1alpha2.ReasonSecretNotFound)
		}
		return nil
	})
	create(t, secret(ns, "openai-key", map[string]string{"key": "sk-1"}))
	converged(t, ns, "ev")
	want := []string{v1alpha2.ReasonSecretNotFound, "Phase" + string(v1alpha2.PhaseDeploying)}
	eventually(t, timeout, func() error { // recorded right after the status write the test saw
		if got := op.events.of(ns, "ev"); !slices.Equal(got, want) {
			return fmt.Errorf("events %q, want %q", got, want)
		}
		return nil
	})
	op.reconcileAll(t, ns, []string{"ev"}, "idle")
	op.reconcileAll(t, ns, []string{"ev"}, "idle-again")
	if got := op.events.of(ns, "ev"); !slices.Equal(got, want) {
		t.Errorf("an idle stack recorded events: %q, want %q", got, want)
	}
}
