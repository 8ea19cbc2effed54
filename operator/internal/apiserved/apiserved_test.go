package apiserved

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var gv = schema.GroupVersion{Group: "inferencestack.io", Version: "v1alpha1"}

// TestWait: while the version is not served, Wait logs why (once per cause)
// and keeps the gauge at 0; it returns, the gauge at 1, once it is served.
func TestWait(t *testing.T) {
	answers := []func() (*metav1.APIResourceList, error){
		func() (*metav1.APIResourceList, error) {
			return nil, apierrors.NewNotFound(schema.GroupResource{Group: gv.Group}, gv.Version)
		},
		func() (*metav1.APIResourceList, error) {
			return nil, apierrors.NewNotFound(schema.GroupResource{Group: gv.Group}, gv.Version)
		},
		func() (*metav1.APIResourceList, error) {
			return &metav1.APIResourceList{APIResources: []metav1.APIResource{{Name: "other"}}}, nil
		},
		func() (*metav1.APIResourceList, error) {
			return &metav1.APIResourceList{APIResources: []metav1.APIResource{{Name: "inferencestacks"}}}, nil
		},
	}
	var logs []string
	log := funcr.New(func(prefix, args string) { logs = append(logs, args) }, funcr.Options{})
	calls := 0
	var gauges []float64
	lookup := func(string) (*metav1.APIResourceList, error) {
		if calls > 0 {
			gauges = append(gauges, testutil.ToFloat64(Served.WithLabelValues(gv.String())))
		}
		calls++
		return answers[calls-1]()
	}
	require.NoError(t, Wait(context.Background(), lookup, gv, "inferencestacks", time.Millisecond, log))
	require.Equal(t, 4, calls)
	require.Equal(t, []float64{0, 0, 0}, gauges, "0 while not served")
	require.Equal(t, 1.0, testutil.ToFloat64(Served.WithLabelValues(gv.String())))
	require.Len(t, logs, 3, "one line per cause, one when served: %q", logs)
	require.Contains(t, logs[0], "the API server does not serve inferencestack.io/v1alpha1 at all")
	require.Contains(t, logs[0], "install or upgrade the inferencestack-crds package")
	require.Contains(t, logs[1], "the API server serves inferencestack.io/v1alpha1 without inferencestacks")
	require.Contains(t, logs[2], "starting")
}

// TestWaitStops: Wait returns when its context ends.
func TestWaitStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	lookup := func(string) (*metav1.APIResourceList, error) {
		cancel()
		return nil, apierrors.NewNotFound(schema.GroupResource{Group: gv.Group}, gv.Version)
	}
	require.ErrorIs(t, Wait(ctx, lookup, gv, "inferencestacks", time.Hour, funcr.New(func(string, string) {}, funcr.Options{})), context.Canceled)
}

// TestMonitor: while reads fail Monitor keeps the gauge at 0, counts every
// failed check and logs once per cause (naming the conversion webhook when
// the API server's error does); once they work it logs that once and sets
// the gauge to 1.
func TestMonitor(t *testing.T) {
	gv := schema.GroupVersion{Group: "inferencestack.io", Version: "monitor"}
	webhook := errors.New(`conversion webhook for inferencestack.io/v1alpha2, Kind=InferenceStack failed: Post "https://inferencestack-conversion.inferencestack-system.svc:443/convert?timeout=30s": dial tcp 10.0.0.64:443: connect: connection refused`)
	webhookTimeout := errors.New(`conversion webhook for inferencestack.io/v1alpha2, Kind=InferenceStack failed: Post "https://inferencestack-conversion.inferencestack-system.svc:443/convert?timeout=30s": context deadline exceeded`)
	answers := []error{nil, webhook, webhookTimeout, nil, nil, nil}
	ctx, cancel := context.WithCancel(context.Background())
	var logs []string
	log := funcr.New(func(prefix, args string) { logs = append(logs, args) }, funcr.Options{})
	calls := 0
	var gauges []float64
	read := func(context.Context) error {
		if calls > 0 {
			gauges = append(gauges, testutil.ToFloat64(Readable.WithLabelValues(gv.String())))
		}
		if calls == len(answers)-1 {
			cancel() // the last answer is not looked at
		}
		calls++
		return answers[calls-1]
	}
	Monitor(ctx, read, gv, time.Millisecond, time.Second, log)
	require.Equal(t, []float64{1, 0, 0, 1, 1}, gauges)
	require.Equal(t, 2.0, testutil.ToFloat64(ReadFailures.WithLabelValues(gv.String())), "each failed check counted")
	require.Len(t, logs, 2, "one line while the cause stays the same, one when reads work again: %q", logs)
	require.Contains(t, logs[0], "the conversion webhook of the inferencestack-crds package is down or unreachable")
	require.Contains(t, logs[0], "connection refused", "the API server's error")
	require.Contains(t, logs[1], "work again")
}
