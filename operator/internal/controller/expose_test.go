package controller_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/apply"
	"github.com/inferencestack/inferencestack/operator/components/network"
)

// v2Stack is a starter stack with v1alpha2 networking, as a v1alpha2
// client writes it and the operator reads it (v1alpha1, the annotation).
func v2Stack(t *testing.T, ns, name string, networking *v1alpha2.NetworkingSpec) *v1alpha1.InferenceStack {
	t.Helper()
	v2 := &v1alpha2.InferenceStack{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha2.InferenceStackSpec{Distribution: v1alpha2.DistributionSpec{Name: "starter"}, Networking: networking}}
	stack := &v1alpha1.InferenceStack{}
	if err := stack.ConvertFrom(v2); err != nil {
		t.Fatal(err)
	}
	return stack
}

// setV2Networking rewrites the stack's v1alpha2 networking (through the
// annotation, as the conversion would).
func setV2Networking(t *testing.T, ns, name string, networking *v1alpha2.NetworkingSpec) {
	t.Helper()
	update(t, ns, name, func(s *v1alpha1.InferenceStack) {
		want := v2Stack(t, ns, name, networking)
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		if a, ok := want.Annotations[v1alpha2.SpecAnnotation]; ok {
			s.Annotations[v1alpha2.SpecAnnotation] = a
		} else {
			delete(s.Annotations, v1alpha2.SpecAnnotation)
		}
	})
}

// writesOf are the writes, of those counted, whose line contains what.
func writesOf(op *operator, what string) []string {
	var out []string
	for _, w := range op.writes.Writes() {
		if strings.Contains(w, what) {
			out = append(out, w)
		}
	}
	return out
}

// steady reconciles the stack three more times after it settled and fails
// on any write.
func steady(t *testing.T, op *operator, ns, name string) {
	t.Helper()
	for round := 1; ; round++ {
		op.writes.Reset()
		op.reconcileAll(t, ns, []string{name}, fmt.Sprintf("settle-%d", round))
		if len(op.writes.In(ns)) == 0 {
			break
		}
		if round == 5 {
			t.Fatalf("%d rounds of reconciles still write:\n%s", round, strings.Join(op.writes.In(ns), "\n"))
		}
	}
	for round := range 3 {
		op.reconcileAll(t, ns, []string{name}, fmt.Sprint("steady-", round))
	}
	if w := op.writes.In(ns); len(w) != 0 {
		t.Errorf("reconciling the unchanged stack %s made %d writes, want 0:\n%s", name, len(w), strings.Join(w, "\n"))
	}
}

// TestIngressExposesTheServer: networking.ingress makes one Ingress (one
// write), owned by the stack, for the host to the server Service's port,
// with its class and TLS; status.ingressURL is https://<host>. Reconciled
// again unchanged, nothing is written; a new host changes the Ingress and
// the URL; dropping networking.ingress deletes the Ingress and clears the
// URL.
func TestIngressExposesTheServer(t *testing.T) {
	op := startOperator(t)
	ns := namespace(t)
	create(t, v2Stack(t, ns, "ing", &v1alpha2.NetworkingSpec{Port: 9000, Ingress: &v1alpha2.IngressSpec{
		Host: "llama.example.com", ClassName: "nginx", TLS: &v1alpha2.IngressTLSSpec{SecretName: "llama-tls"},
		Annotations: map[string]string{"nginx.ingress.kubernetes.io/proxy-read-timeout": "600"}}}))
	stack := converged(t, ns, "ing")
	if got := stack.Status.IngressURL; got != "https://llama.example.com" {
		t.Errorf("status.ingressURL %q, want https://llama.example.com", got)
	}
	ing, err := get(t, &networkingv1.Ingress{}, ns, "ing")
	if err != nil {
		t.Fatal(err)
	}
	if !metav1.IsControlledBy(ing, stack) {
		t.Errorf("the Ingress is not controlled by the stack: %v", ing.OwnerReferences)
	}
	rule := ing.Spec.Rules[0]
	backend := rule.HTTP.Paths[0].Backend.Service
	if rule.Host != "llama.example.com" || backend.Name != "ing" || backend.Port.Number != 9000 ||
		*ing.Spec.IngressClassName != "nginx" || ing.Spec.TLS[0].SecretName != "llama-tls" ||
		ing.Annotations["nginx.ingress.kubernetes.io/proxy-read-timeout"] != "600" {
		t.Errorf("Ingress spec %+v, annotations %v: want llama.example.com to ing:9000, class nginx, TLS llama-tls, the user's annotation", ing.Spec, ing.Annotations)
	}
	if w := writesOf(op, "IngressApplyConfiguration"); len(w) != 1 {
		t.Errorf("the Ingress was written %d times at creation, want once:\n%s", len(w), strings.Join(w, "\n"))
	}
	// The cache holds the Ingress's metadata and the digest of what the
	// operator owns on it, no spec and no managed fields.
	cached := &networkingv1.Ingress{}
	eventually(t, timeout, func() error {
		return op.cache.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "ing"}, cached)
	})
	if len(cached.ManagedFields) != 0 || cached.Annotations[apply.DigestAnnotation] == "" || len(cached.Spec.Rules) != 0 {
		t.Errorf("the cached Ingress has %d managed fields entries, annotations %v, spec %+v: want none, the digest, none",
			len(cached.ManagedFields), cached.Annotations, cached.Spec)
	}
	steady(t, op, ns, "ing")

	// A hand edit of the host is set back.
	edit(t, &networkingv1.Ingress{}, ns, "ing", func(i *networkingv1.Ingress) { i.Spec.Rules[0].Host = "edited.example.com" })
	eventually(t, timeout, func() error {
		ing, err := get(t, &networkingv1.Ingress{}, ns, "ing")
		if err != nil {
			return err
		}
		if h := ing.Spec.Rules[0].Host; h != "llama.example.com" {
			return fmt.Errorf("the Ingress's host is %s, want llama.example.com back", h)
		}
		return nil
	})

	setV2Networking(t, ns, "ing", &v1alpha2.NetworkingSpec{Port: 9000, Ingress: &v1alpha2.IngressSpec{Host: "chat.example.com"}})
	eventually(t, timeout, func() error {
		s, err := get(t, &v1alpha1.InferenceStack{}, ns, "ing")
		if err != nil {
			return err
		}
		ing, err := get(t, &networkingv1.Ingress{}, ns, "ing")
		if err != nil {
			return err
		}
		if s.Status.IngressURL != "http://chat.example.com" || ing.Spec.Rules[0].Host != "chat.example.com" || len(ing.Spec.TLS) != 0 || ing.Spec.IngressClassName != nil {
			return fmt.Errorf("status.ingressURL %q, Ingress %+v: want http://chat.example.com, no TLS, no class", s.Status.IngressURL, ing.Spec)
		}
		return nil
	})

	setV2Networking(t, ns, "ing", &v1alpha2.NetworkingSpec{Port: 9000})
	eventually(t, timeout, func() error {
		if _, err := get(t, &networkingv1.Ingress{}, ns, "ing"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the Ingress is still there (%w)", err)
		}
		s, err := get(t, &v1alpha1.InferenceStack{}, ns, "ing")
		if err != nil {
			return err
		}
		if s.Status.IngressURL != "" {
			return fmt.Errorf("status.ingressURL is still %q", s.Status.IngressURL)
		}
		return nil
	})
}

// TestRouteWhereTheAPIIsServed: a stack asks for a Route on a cluster
// without the Route API: it is Degraded (RouteNotServed) with one Warning
// Event, its other objects are made, and its reconciles end without error
// and only when something brings them (no loop). Once the API server
// serves OpenShift's own Route CRD (testdata/openshift-api), the operator
// finds it without a restart and makes the Route (one write), edge
// terminated, to the Service's http port, with the host asked; when a
// router admits it (the test sets its status, as a router would),
// status.routeURL is https://<host>. Reconciled again unchanged, nothing is
// written; dropping networking.route deletes the Route and clears the URL.
func TestRouteWhereTheAPIIsServed(t *testing.T) {
	ctx := context.Background()
	op := startOperator(t, withRouteCheckInterval(time.Hour))
	ns := namespace(t)
	key := types.NamespacedName{Namespace: ns, Name: "rt"}
	create(t, v2Stack(t, ns, "rt", &v1alpha2.NetworkingSpec{Route: &v1alpha2.RouteSpec{Host: "llama.apps.example.com"}}))
	eventually(t, timeout, func() error {
		c, _ := degradedOf(t, ns, "rt")
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha2.ReasonRouteNotServed ||
			!strings.Contains(c.Message, "does not serve route.openshift.io/v1") {
			return fmt.Errorf("Degraded %+v, want True, RouteNotServed", c)
		}
		return nil
	})
	if _, err := get(t, &networkingv1.NetworkPolicy{}, ns, "rt-server"); err != nil {
		t.Errorf("the stack's other objects were not made: %v", err)
	}
	op.reconcileAll(t, ns, []string{"rt"}, "not-served") // ends without error, or it would not count
	before := op.reconciles.Finished(key)
	for round := range 3 {
		op.reconcileAll(t, ns, []string{"rt"}, fmt.Sprint("not-served-", round))
	}
	if n := op.reconciles.Finished(key) - before; n != 3 {
		t.Errorf("3 changes of the stack brought %d reconciles, want 3: the RouteNotServed condition loops", n)
	}
	if got := slices.Collect(func(yield func(string) bool) {
		for _, r := range op.events.of(ns, "rt") {
			if r == v1alpha2.ReasonRouteNotServed && !yield(r) {
				return
			}
		}
	}); len(got) != 1 {
		t.Errorf("%d RouteNotServed Events, want 1", len(got))
	}
	op.stop()

	// An operator that asks again every 200ms, still without the API.
	op = startOperator(t, withRouteCheckInterval(200*time.Millisecond))
	op.reconcileAll(t, ns, []string{"rt"}, "restarted")
	op.writes.Reset()
	crds, err := envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{Paths: []string{filepath.Join("testdata", "openshift-api", "routes.crd.yaml")}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := envtest.UninstallCRDs(env.Config, envtest.CRDInstallOptions{CRDs: crds}); err != nil {
			t.Errorf("removing the Route CRD: %v", err)
		}
	})
	route := &unstructured.Unstructured{}
	route.SetGroupVersionKind(network.RouteGVK)
	eventually(t, timeout, func() error {
		return env.Client.Get(ctx, key, route)
	})
	stack := converged(t, ns, "rt")
	if !metav1.IsControlledBy(route, stack) {
		t.Errorf("the Route is not controlled by the stack: %v", route.GetOwnerReferences())
	}
	for path, want := range map[string]any{
		"spec.host": "llama.apps.example.com", "spec.to.kind": "Service", "spec.to.name": "rt", "spec.port.targetPort": "http",
		"spec.tls.termination": "edge", "spec.tls.insecureEdgeTerminationPolicy": "Redirect",
	} {
		if got, _, _ := unstructured.NestedFieldNoCopy(route.Object, strings.Split(path, ".")...); got != want {
			t.Errorf("Route %s is %v, want %v", path, got, want)
		}
	}
	if w := writesOf(op, " "+ns+"/rt"); !slices.ContainsFunc(w, func(s string) bool { return strings.Contains(s, "unstructuredApplyConfiguration") }) ||
		len(slices.DeleteFunc(slices.Clone(w), func(s string) bool { return !strings.Contains(s, "unstructuredApplyConfiguration") })) != 1 {
		t.Errorf("the Route was not written exactly once:\n%s", strings.Join(w, "\n"))
	}
	if stack.Status.RouteURL != "" {
		t.Errorf("status.routeURL is %q before a router admitted the Route", stack.Status.RouteURL)
	}

	// A router admits it.
	admitted := route.DeepCopy()
	if err := unstructured.SetNestedSlice(admitted.Object, []any{map[string]any{
		"host": "llama.apps.example.com", "routerName": "default", "wildcardPolicy": "None",
		"conditions": []any{map[string]any{"type": "Admitted", "status": "True", "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}},
	}}, "status", "ingress"); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Status().Update(ctx, admitted); err != nil {
		t.Fatal(err)
	}
	eventually(t, timeout, func() error {
		s, err := get(t, &v1alpha1.InferenceStack{}, ns, "rt")
		if err != nil {
			return err
		}
		if s.Status.RouteURL != "https://llama.apps.example.com" {
			return fmt.Errorf("status.routeURL %q, want https://llama.apps.example.com", s.Status.RouteURL)
		}
		return nil
	})
	steady(t, op, ns, "rt")

	// A hand edit of the Route's target port is set back.
	edit(t, route, key.Namespace, key.Name, func(r *unstructured.Unstructured) {
		if err := unstructured.SetNestedField(r.Object, "other", "spec", "port", "targetPort"); err != nil {
			t.Fatal(err)
		}
	})
	eventually(t, timeout, func() error {
		if err := env.Client.Get(ctx, key, route); err != nil {
			return err
		}
		if p, _, _ := unstructured.NestedString(route.Object, "spec", "port", "targetPort"); p != "http" {
			return fmt.Errorf("the Route's target port is %s, want http back", p)
		}
		return nil
	})

	setV2Networking(t, ns, "rt", nil)
	eventually(t, timeout, func() error {
		if err := env.Client.Get(ctx, key, route); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the Route is still there (%w)", err)
		}
		s, err := get(t, &v1alpha1.InferenceStack{}, ns, "rt")
		if err != nil {
			return err
		}
		if s.Status.RouteURL != "" || !meta.IsStatusConditionFalse(s.Status.Conditions, v1alpha2.TypeDegraded) {
			return fmt.Errorf("status.routeURL %q, conditions %+v: want none, not Degraded", s.Status.RouteURL, s.Status.Conditions)
		}
		return nil
	})
}
