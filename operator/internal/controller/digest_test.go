package controller_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	"github.com/inferencestack/inferencestack/operator/apply"
	"github.com/inferencestack/inferencestack/operator/runconfig"
	"github.com/inferencestack/inferencestack/operator/runconfig/stackconfig"
	"github.com/inferencestack/inferencestack/test/testutil"
)

// TestCachedDigestsAreTheLiveObjectsOwn: the digest of the fields the
// operator owns that its cache keeps on each of its objects (the one its
// own apply left, or the one read from the managed fields) is the digest
// read from the object's managed fields on the API server, for every kind
// the feature mix makes.
func TestCachedDigestsAreTheLiveObjectsOwn(t *testing.T) {
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
	for i := range testutil.FeatureVariants {
		names = append(names, fmt.Sprintf("feature%d", i))
		create(t, testutil.FeatureStack(ns, names[i], i))
	}
	for _, name := range names {
		converged(t, ns, name)
	}
	checked := map[string]int{}
	checkKind(t, op, ns, apply.ConfigMap, &corev1.ConfigMapList{}, checked)
	checkKind(t, op, ns, apply.Secret, &corev1.SecretList{}, checked)
	checkKind(t, op, ns, apply.ServiceAccount, &corev1.ServiceAccountList{}, checked)
	checkKind(t, op, ns, apply.Service, &corev1.ServiceList{}, checked)
	checkKind(t, op, ns, apply.PersistentVolumeClaim, &corev1.PersistentVolumeClaimList{}, checked)
	checkKind(t, op, ns, apply.Deployment, &appsv1.DeploymentList{}, checked)
	checkKind(t, op, ns, apply.NetworkPolicy, &networkingv1.NetworkPolicyList{}, checked)
	checkKind(t, op, ns, apply.HorizontalPodAutoscaler, &autoscalingv2.HorizontalPodAutoscalerList{}, checked)
	checkKind(t, op, ns, apply.PodDisruptionBudget, &policyv1.PodDisruptionBudgetList{}, checked)
	t.Logf("objects checked, by kind: %v", checked)
	for _, kind := range []string{"ConfigMap", "Secret", "ServiceAccount", "Service", "Deployment", "NetworkPolicy", "HorizontalPodAutoscaler", "PodDisruptionBudget", "PersistentVolumeClaim"} {
		if checked[kind] == 0 {
			t.Errorf("the feature mix made no %s of the operator's to check", kind)
		}
	}
}

// checkKind compares, for each object of the operator's of one kind in ns
// that its cache holds, the cached digest with the live object's.
func checkKind[O client.Object, C apply.Config](t *testing.T, op *operator, ns string, kind apply.Kind[O, C], list client.ObjectList, checked map[string]int) {
	t.Helper()
	ctx := context.Background()
	if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		t.Fatal(err)
	}
	for _, live := range items {
		o := live.(O)
		if o.GetLabels()["app.kubernetes.io/managed-by"] != "inferencestack-operator" {
			continue
		}
		cached := kind.New()
		if err := op.cache.Get(ctx, client.ObjectKeyFromObject(o), cached); err != nil {
			t.Fatalf("%T %s is not in the cache: %v", o, o.GetName(), err)
		}
		if cached.GetResourceVersion() != o.GetResourceVersion() {
			continue // the cache has not seen this version yet
		}
		want, err := kind.Digest(o)
		if err != nil {
			t.Fatal(err)
		}
		if got := cached.GetAnnotations()[apply.DigestAnnotation]; got != want {
			t.Errorf("%T %s: the cache's digest of the operator's fields is %s, the API server's object's %s", o, o.GetName(), got, want)
		}
		checked[reflect.TypeOf(o).Elem().Name()]++
	}
}
