// Package apiserved makes the operator wait, without crashing, until the API
// server serves the InferenceStack version it reads: a CRD package release
// that does not serve it (see docs/compatibility.md) is reported in the log
// and in the metric inferencestack_operator_api_served, and the operator
// starts its controllers once the version is served.
package apiserved

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Served is 1 while the API server serves the version the operator reads,
// 0 while it does not.
var Served = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "inferencestack_operator_api_served",
	Help: "1 when the API server serves the InferenceStack version this operator reads (label group_version), 0 when it does not: install a CRD package release that serves it (docs/compatibility.md).",
}, []string{"group_version"})

func init() {
	metrics.Registry.MustRegister(Served)
}

// Lookup is discovery's ServerResourcesForGroupVersion.
type Lookup func(groupVersion string) (*metav1.APIResourceList, error)

// Wait returns once lookup says the API server serves resource in gv,
// polling every interval; until then it logs why it waits (when it starts
// waiting and when the cause changes) and keeps the gauge at 0. It returns
// ctx's error when ctx ends first.
func Wait(ctx context.Context, lookup Lookup, gv schema.GroupVersion, resource string, interval time.Duration, log logr.Logger) error {
	gauge := Served.WithLabelValues(gv.String())
	last := ""
	for {
		why, err := served(lookup, gv, resource)
		if err == nil && why == "" {
			gauge.Set(1)
			if last != "" {
				log.Info("the API server serves the InferenceStack version this operator reads now; starting", "groupVersion", gv.String())
			}
			return nil
		}
		gauge.Set(0)
		if err != nil {
			why = err.Error()
		}
		if why != last {
			log.Error(errors.New(why), "waiting: the InferenceStack version this operator reads is not served; "+
				"install or upgrade the inferencestack-crds package to a release that serves it (docs/compatibility.md); the operator starts by itself once it is served",
				"groupVersion", gv.String(), "resource", resource)
			last = why
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}

// served says why gv's resource is not served ("" when it is); err is a
// failure to ask.
func served(lookup Lookup, gv schema.GroupVersion, resource string) (string, error) {
	list, err := lookup(gv.String())
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Sprintf("the API server does not serve %s at all (no CRD serves it)", gv), nil
	case err != nil:
		return "", fmt.Errorf("asking the API server for %s: %w", gv, err)
	}
	for _, r := range list.APIResources {
		if r.Name == resource {
			return "", nil
		}
	}
	return fmt.Sprintf("the API server serves %s without %s", gv, resource), nil
}

// MapperProvider is the manager's RESTMapper: the API server's (discovery),
// falling back to a fixed mapping of kinds (all namespaced) when discovery
// has none, so that the manager and its cache can be made while the API
// server does not serve their version yet (Wait then holds the controllers
// back).
func MapperProvider(kinds ...schema.GroupVersionKind) func(*rest.Config, *http.Client) (meta.RESTMapper, error) {
	return func(c *rest.Config, hc *http.Client) (meta.RESTMapper, error) {
		dynamic, err := apiutil.NewDynamicRESTMapper(c, hc)
		if err != nil {
			return nil, err
		}
		var gvs []schema.GroupVersion
		for _, k := range kinds {
			gvs = append(gvs, k.GroupVersion())
		}
		fixed := meta.NewDefaultRESTMapper(gvs)
		for _, k := range kinds {
			fixed.Add(k, meta.RESTScopeNamespace)
		}
		return meta.FirstHitRESTMapper{MultiRESTMapper: meta.MultiRESTMapper{dynamic, fixed}}, nil
	}
}
