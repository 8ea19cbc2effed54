package cache_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	"github.com/inferencestack/inferencestack/operator/components/cache"
	"github.com/inferencestack/inferencestack/operator/internal/testutil"
)

func TestDataOutlivesTheStack(t *testing.T) {
	stack := testutil.Stack("s", testutil.WithCache(), testutil.WithSpec(func(s *v1alpha1.InferenceStackSpec) {
		s.Cache.StorageSize = ptr(resource.MustParse("5Gi"))
	}))
	pvc := cache.PVC(stack)
	if len(pvc.OwnerReferences) != 0 {
		t.Error("the cache volume claim has an owner reference: garbage collection would delete its data")
	}
	if got := pvc.Spec.Resources.Requests.Storage().String(); got != "5Gi" {
		t.Errorf("storage %s, want 5Gi", got)
	}
	secret, err := cache.PasswordSecret(stack)
	if err != nil {
		t.Fatal(err)
	}
	if len(secret.OwnerReferences) != 0 || len(secret.Data["password"]) < 24 {
		t.Errorf("password Secret %+v", secret)
	}
	other, _ := cache.PasswordSecret(stack)
	if string(other.Data["password"]) == string(secret.Data["password"]) {
		t.Error("two password Secrets share a password")
	}
	if !cache.Retained(stack) {
		t.Error("retainOnDelete defaults to true")
	}
}

func ptr[T any](v T) *T { return &v }
