package controller

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/apply"
	"github.com/inferencestack/inferencestack/operator/components"
	"github.com/inferencestack/inferencestack/operator/components/network"
)

// DefaultRouteCheckInterval is how often, at most, the operator asks the
// API server's discovery whether it serves OpenShift Routes while a stack
// asks for one and it does not.
const DefaultRouteCheckInterval = time.Minute

// routeSyncTimeout bounds the first sync of the cache of Routes.
const routeSyncTimeout = 30 * time.Second

// exposeStep applies the server's Ingress and Route when the stack asks
// for them, and deletes them when it does not. A Route asked for on a
// cluster that does not serve the Route API is a condition (RouteNotServed)
// that the reconcile looks at again after the route check interval.
func (r *InferenceStackReconciler) exposeStep(ctx context.Context, s *state) error {
	stack := s.Stack
	e := network.ExposureOf(stack)
	if ing := network.Ingress(stack, e); ing != nil {
		if _, _, err := apply.Apply(ctx, s.Applier, apply.Ingress, ing); err != nil {
			return err
		}
		s.live.ingress = true
	} else if _, err := apply.Delete(ctx, s.Client, &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: network.IngressName(stack), Namespace: stack.Namespace},
	}, components.Owned(stack)); err != nil {
		return err
	}

	served, err := r.routes.Served(ctx, e.Route != nil)
	if err != nil {
		return err
	}
	route, err := network.Route(stack, e)
	switch {
	case err != nil:
		return err
	case route != nil && !served:
		return errorf(v1alpha2.TypeDegraded, v1alpha2.ReasonRouteNotServed,
			"networking.route asks for an OpenShift Route, and this cluster does not serve %s (it is not OpenShift): remove networking.route, or use networking.ingress; the operator looks again every %s",
			network.RouteGVK.GroupVersion(), r.routeCheckInterval())
	case route != nil:
		live, _, err := apply.ApplyUnstructured(ctx, s.Applier, r.routes.Cache(), route)
		if err != nil {
			return err
		}
		s.live.route = live
		return nil
	case !served:
		return nil // no Route can exist
	}
	live := routeObject()
	err = r.routes.Cache().Get(ctx, client.ObjectKey{Namespace: stack.Namespace, Name: network.RouteName(stack)}, live)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading Route %s/%s: %w", stack.Namespace, network.RouteName(stack), err)
	}
	_, err = apply.Delete(ctx, s.Client, live, components.Owned(stack))
	return err
}

// exposureURLs sets status.ingressURL and status.routeURL from the live
// Ingress and Route (as this reconcile applied them, else as the cache
// holds them).
func (r *InferenceStackReconciler) exposureURLs(ctx context.Context, s *state) {
	stack := s.Stack
	st := &stack.Status
	st.IngressURL, st.RouteURL = "", ""
	e := network.ExposureOf(stack)
	if e.Ingress != nil {
		if s.live.ingress || r.Client.Get(ctx, client.ObjectKey{Namespace: stack.Namespace, Name: network.IngressName(stack)}, &networkingv1.Ingress{}) == nil {
			st.IngressURL = network.IngressURL(e)
		}
	}
	routes := r.routes.Cache()
	if e.Route == nil || routes == nil {
		return
	}
	route := s.live.route
	if route == nil {
		route = routeObject()
		if err := routes.Get(ctx, client.ObjectKey{Namespace: stack.Namespace, Name: network.RouteName(stack)}, route); err != nil {
			return
		}
	}
	st.RouteURL = network.RouteURL(route)
}

// routeAPI learns whether the API server serves OpenShift Routes, through
// discovery, asking at most once per interval: the first reconcile asks
// (so the Routes of stacks that no longer want one are deleted after a
// restart too), then only a reconcile of a stack that asks for a Route
// asks again, until the answer is yes, which holds for good. On the first
// yes it starts the watch of Routes (start), so a cluster that gains the
// API later gets its Routes without a restart of the operator.
type routeAPI struct {
	// lookup is discovery's ServerResourcesForGroupVersion.
	lookup func(groupVersion string) (*metav1.APIResourceList, error)
	// start makes the cache of the operator's Routes and starts their
	// watch; it returns the cache.
	start func(ctx context.Context) (client.Reader, error)
	// interval is the least time between two questions.
	interval time.Duration

	mu      sync.Mutex
	served  bool
	checked time.Time
	// cache reads the operator's Routes, once served.
	cache client.Reader
}

// Cache is the cache of the operator's Routes, nil until the API server
// was found to serve them.
func (a *routeAPI) Cache() client.Reader {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cache
}

// Served reports whether the API server serves Routes, asking discovery
// when it never has, or when again is set and the interval has passed.
func (a *routeAPI) Served(ctx context.Context, again bool) (bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.served || (!a.checked.IsZero() && (!again || time.Since(a.checked) < a.interval)) {
		return a.served, nil
	}
	a.checked = time.Now()
	list, err := a.lookup(network.RouteGVK.GroupVersion().String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("asking the API server whether it serves %s: %w", network.RouteGVK.GroupVersion(), err)
	}
	if !slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == network.RouteResource }) {
		return false, nil
	}
	c, err := a.start(ctx)
	if err != nil {
		return false, fmt.Errorf("watching %s: %w", network.RouteResource, err)
	}
	a.served, a.cache = true, c
	return true, nil
}

func (r *InferenceStackReconciler) routeCheckInterval() time.Duration {
	if r.RouteCheckInterval > 0 {
		return r.RouteCheckInterval
	}
	return DefaultRouteCheckInterval
}
