package testenv_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/inferencestack/inferencestack/test/testenv"
)

// TestEtcdReadsWhatTheAPIServerStored: a ConfigMap's key in etcd, at the
// revision that is its resourceVersion; its update comes on a watch from
// that revision, and the older value is still read at its revision.
func TestEtcdReadsWhatTheAPIServerStored(t *testing.T) {
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "etcd-probe"}, Data: map[string]string{"k": "first"}}
	require.NoError(t, env.Client.Create(ctx, cm))
	t.Cleanup(func() { _ = env.Client.Delete(ctx, cm) })
	const key = testenv.EtcdPrefix + "configmaps/default/etcd-probe"
	kvs, _, err := env.EtcdRange(ctx, key, 0)
	require.NoError(t, err)
	require.Len(t, kvs, 1)
	require.Equal(t, key, string(kvs[0].Key))
	require.Contains(t, string(kvs[0].Value), "first", "the stored ConfigMap (protobuf holds its strings as they are)")
	created := kvs[0].ModRevision
	require.Equal(t, cm.ResourceVersion, strconv.FormatInt(created, 10), "a resourceVersion is etcd's revision of the write")

	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	events, errs, err := env.EtcdWatch(wctx, key, key, created+1)
	require.NoError(t, err)
	cm.Data["k"] = "second"
	require.NoError(t, env.Client.Update(ctx, cm))
	select {
	case ev, ok := <-events:
		if !ok {
			t.Fatalf("the watch ended: %v", <-errs)
		}
		require.False(t, ev.Deleted)
		require.Contains(t, string(ev.KV.Value), "second")
		require.Equal(t, cm.ResourceVersion, strconv.FormatInt(ev.KV.ModRevision, 10))
	case <-wctx.Done():
		t.Fatal("no event for the update")
	}
	old, _, err := env.EtcdRange(ctx, key, created)
	require.NoError(t, err)
	require.Len(t, old, 1)
	require.Contains(t, string(old[0].Value), "first", "the value at the revision of the creation")
}
