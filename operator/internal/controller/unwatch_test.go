package controller_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/inferencestack/inferencestack/operator/components"
	"github.com/inferencestack/inferencestack/operator/internal/controller"
)

// BenchmarkWatchedUserObjects: every reconcile looks up the user Secrets
// and ConfigMaps its namespace watches, in the operator's cache, which also
// holds the ConfigMap of every stack there. The lookup must not go through
// them: its bytes a lookup stay the same from 1,000 to 4,000 stacks (B/op;
// on 2026-11-27: 2,704 at both sizes; with the label selector the index
// replaced, 35,364 and 133,690, and 6.5 ms and 48.8 ms a lookup: a slice of
// every object of the namespace, each matched against the selector).
func BenchmarkWatchedUserObjects(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	opts := controller.CacheOptions(nil)
	opts.Scheme = scheme()
	c, err := cache.New(env.Config, opts)
	if err != nil {
		b.Fatal(err)
	}
	if err := controller.IndexUserWatched(ctx, c); err != nil {
		b.Fatal(err)
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		b.Fatal("the cache did not sync")
	}
	reader, err := client.New(env.Config, client.Options{Scheme: opts.Scheme, Cache: &client.CacheOptions{Reader: c}})
	if err != nil {
		b.Fatal(err)
	}
	for _, stacks := range []int{1000, 4000} {
		ns := fmt.Sprintf("watched-%d", stacks)
		if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			b.Fatal(err)
		}
		// The stacks' own ConfigMaps (watched, managed by the operator)
		// and one user ConfigMap a stack references.
		var g errgroup.Group
		g.SetLimit(16)
		for i := range stacks {
			g.Go(func() error {
				return env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("s%04d-config", i),
					Labels: map[string]string{components.LabelWatched: "true", components.LabelManagedBy: components.ManagedBy}}})
			})
		}
		g.Go(func() error {
			return env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "user",
				Labels: map[string]string{components.LabelWatched: "true"}}})
		})
		if err := g.Wait(); err != nil {
			b.Fatal(err)
		}
		// Until the cache holds them all: the informer's events come in order.
		err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			var list corev1.ConfigMapList
			err := reader.List(ctx, &list, client.InNamespace(ns))
			return len(list.Items) == stacks+1, err
		})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("stacks=%d", stacks), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				objs, err := controller.WatchedUserObjects(ctx, reader, ns)
				if err != nil {
					b.Fatal(err)
				}
				if len(objs) != 1 {
					b.Fatalf("namespace %s: %d watched user objects, want the one ConfigMap user", ns, len(objs))
				}
			}
		})
	}
}
