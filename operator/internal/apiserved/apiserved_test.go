package apiserved

import (
	"context"
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
