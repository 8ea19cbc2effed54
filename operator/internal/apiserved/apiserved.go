// Package apiserved makes the operator wait, without crashing, until the API
// server serves the InferenceStack version it reads: a CRD package release
// that does not serve it (see docs/compatibility.md) is reported in the log
// and in the metric inferencestack_operator_api_served, and the operator
// starts its controllers once the version is served; Monitor then reports
// (log, metrics) while the operator cannot read the stacks (the conversion
// webhook down).
package apiserved

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
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

// Readable is 1 while the operator's reads of InferenceStacks through the
// version it reads work, 0 while they fail; ReadFailures counts the failed
// checks.
var (
	Readable = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "inferencestack_operator_api_readable",
		Help: "1 while this operator's reads of InferenceStacks through the version it reads (label group_version) work, 0 while they fail " +
			"(most often the inferencestack-crds package's conversion webhook is down: docs/api-versions.md).",
	}, []string{"group_version"})
	ReadFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "inferencestack_operator_api_read_failures_total",
		Help: "Checks in which this operator's read of InferenceStacks through the version it reads (label group_version) failed.",
	}, []string{"group_version"})
)

func init() {
	metrics.Registry.MustRegister(Readable, ReadFailures)
}

// Read is one read of InferenceStacks through the version the operator
// reads.
type Read func(ctx context.Context) error

// ReadOne is the Read the operator checks with: it gets one InferenceStack
// (any, named by a list of one) through gv from the API server's storage,
// which converts it when it is stored in another version. (The API server
// serves lists, and watches of unchanged stacks, from its cache of each
// version, converted when they were cached: they work while the webhook is
// down, until a stack changes; a get with no resourceVersion reads
// storage.) No stack, nothing to convert: the read works.
func ReadOne(r client.Reader, gv schema.GroupVersion) Read {
	return func(ctx context.Context) error {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gv.WithKind("InferenceStackList"))
		if err := r.List(ctx, list, client.Limit(1)); err != nil || len(list.Items) == 0 {
			return err
		}
		one := &unstructured.Unstructured{}
		one.SetGroupVersionKind(gv.WithKind("InferenceStack"))
		err := r.Get(ctx, client.ObjectKeyFromObject(&list.Items[0]), one)
		if apierrors.IsNotFound(err) {
			return nil // deleted meanwhile
		}
		return err
	}
}

// Monitor reads every interval (each read cut off after timeout) until ctx
// ends. While reads fail it keeps Readable at 0, counts ReadFailures and
// logs once per cause, naming the conversion webhook when the API server's
// error does; once they work again it logs that and sets Readable to 1.
func Monitor(ctx context.Context, read Read, gv schema.GroupVersion, interval, timeout time.Duration, log logr.Logger) {
	gauge, failures := Readable.WithLabelValues(gv.String()), ReadFailures.WithLabelValues(gv.String())
	failing := ""
	for {
		rctx, cancel := context.WithTimeout(ctx, timeout)
		err := read(rctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			gauge.Set(1)
			if failing != "" {
				log.Info("reads of InferenceStacks work again; the operator sees the changes it missed", "groupVersion", gv.String())
				failing = ""
			}
		} else {
			gauge.Set(0)
			failures.Inc()
			if why := readFailure(err, gv); why != failing {
				log.Error(err, why, "groupVersion", gv.String())
				failing = why
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval):
		}
	}
}

// readFailure says what a failed read means to the cluster admin.
func readFailure(err error, gv schema.GroupVersion) string {
	if strings.Contains(err.Error(), "conversion webhook") {
		return "reads of InferenceStacks through " + gv.String() + " fail: the API server cannot convert them, " +
			"the conversion webhook of the inferencestack-crds package is down or unreachable (docs/api-versions.md); " +
			"until it is back this operator does not see changes to stacks stored in another version; nothing is deleted"
	}
	return "reads of InferenceStacks through " + gv.String() + " fail; this operator does not see changes to stacks until they work again"
}
