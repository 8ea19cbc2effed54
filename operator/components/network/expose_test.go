package network_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/api/v1alpha2/validation"
	"github.com/inferencestack/inferencestack/operator/components"
	"github.com/inferencestack/inferencestack/operator/components/network"
	"github.com/inferencestack/inferencestack/test/testutil"
)

// withV2Networking gives a v1alpha1 stack v1alpha2's networking fields, in
// the annotation that carries them.
func withV2Networking(t *testing.T, networking string) testutil.Option {
	t.Helper()
	return func(s *v1alpha1.InferenceStack) {
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		s.Annotations[v1alpha2.SpecAnnotation] = `{"networking": ` + networking + `}`
	}
}

func exposure(t *testing.T, stack *v1alpha2.InferenceStack) network.Exposure {
	t.Helper()
	return exposureOf(t, stack)
}

// TestIngress: no networking.ingress, no Ingress; with it, one rule for the
// host's path / to the server Service's port, the class and TLS (with or
// without a Secret) when asked, owned by the stack; a server that serves
// TLS gets ingress-nginx's HTTPS backend annotation, which the user's
// annotations can override. The URL follows the Ingress's TLS.
func TestIngress(t *testing.T) {
	none := testutil.Hub(testutil.Stack("s"))
	require.Nil(t, network.Ingress(none, exposure(t, none)))
	require.Empty(t, network.IngressURL(exposure(t, none)))

	plain := testutil.Hub(testutil.Stack("s", testutil.WithPort(9000), withV2Networking(t, `{"ingress": {"host": "llama.example.com"}}`)))
	ing := network.Ingress(plain, exposure(t, plain))
	require.NotNil(t, ing)
	require.Equal(t, "s", *ing.Name)
	require.Equal(t, components.Labels(plain, components.ComponentServer), ing.Labels)
	require.True(t, *ing.OwnerReferences[0].Controller)
	require.Nil(t, ing.Spec.IngressClassName, "unset: the cluster's default class")
	require.Empty(t, ing.Spec.TLS)
	require.Empty(t, ing.Annotations)
	rule := ing.Spec.Rules[0]
	require.Equal(t, "llama.example.com", *rule.Host)
	path := rule.HTTP.Paths[0]
	require.Equal(t, "/", *path.Path)
	require.Equal(t, networkingv1.PathTypePrefix, *path.PathType)
	require.Equal(t, "s", *path.Backend.Service.Name)
	require.Equal(t, int32(9000), *path.Backend.Service.Port.Number, "the Service's port, not the container's")
	require.Equal(t, "http://llama.example.com", network.IngressURL(exposure(t, plain)))

	full := testutil.Hub(testutil.Stack("s", func(s *v1alpha1.InferenceStack) {
		s.Spec.Networking = &v1alpha1.NetworkingSpec{TLS: &v1alpha1.TLSSpec{Enabled: true, SecretName: "server-tls"}}
	}, withV2Networking(t, `{"ingress": {"host": "llama.example.com", "className": "nginx", "tls": {"secretName": "llama-tls"},
		"annotations": {"cert-manager.io/cluster-issuer": "letsencrypt"}}}`)))
	ing = network.Ingress(full, exposure(t, full))
	require.Equal(t, "nginx", *ing.Spec.IngressClassName)
	require.Equal(t, []string{"llama.example.com"}, ing.Spec.TLS[0].Hosts)
	require.Equal(t, "llama-tls", *ing.Spec.TLS[0].SecretName)
	require.Equal(t, map[string]string{network.AnnotationNginxBackendProtocol: "HTTPS", "cert-manager.io/cluster-issuer": "letsencrypt"}, ing.Annotations)
	require.Equal(t, "https://llama.example.com", network.IngressURL(exposure(t, full)))

	overridden := testutil.Hub(testutil.Stack("s", func(s *v1alpha1.InferenceStack) {
		s.Spec.Networking = &v1alpha1.NetworkingSpec{TLS: &v1alpha1.TLSSpec{Enabled: true, SecretName: "server-tls"}}
	}, withV2Networking(t, `{"ingress": {"host": "llama.example.com", "tls": {}, "annotations": {"`+network.AnnotationNginxBackendProtocol+`": "GRPCS"}}}`)))
	ing = network.Ingress(overridden, exposure(t, overridden))
	require.Equal(t, "GRPCS", ing.Annotations[network.AnnotationNginxBackendProtocol], "the user's annotation wins")
	require.Nil(t, ing.Spec.TLS[0].SecretName, "tls: {}: the controller's default certificate")
	require.Equal(t, "https://llama.example.com", network.IngressURL(exposure(t, overridden)))
}

// TestRoute: no networking.route, no Route; route: {} makes a Route
// without a host (the router picks one) to the Service's http port, edge
// terminated; a server that serves TLS gets passthrough to its https port;
// plain HTTP is redirected either way.
func TestRoute(t *testing.T) {
	none := testutil.Hub(testutil.Stack("s"))
	route, err := network.Route(none, exposure(t, none))
	require.NoError(t, err)
	require.Nil(t, route)

	edge := testutil.Hub(testutil.Stack("s", testutil.WithNamespace("ns"), withV2Networking(t, `{"route": {}}`)))
	route, err = network.Route(edge, exposure(t, edge))
	require.NoError(t, err)
	require.Equal(t, network.RouteGVK, route.GroupVersionKind())
	require.Equal(t, "s", route.GetName())
	require.Equal(t, "ns", route.GetNamespace())
	require.Equal(t, components.Labels(edge, components.ComponentServer), route.GetLabels())
	require.Len(t, route.GetOwnerReferences(), 1)
	require.True(t, *route.GetOwnerReferences()[0].Controller)
	require.JSONEq(t, `{"to": {"kind": "Service", "name": "s", "weight": 100}, "port": {"targetPort": "http"},
		"tls": {"termination": "edge", "insecureEdgeTerminationPolicy": "Redirect"}}`, jsonOf(t, route.Object["spec"]))

	passthrough := testutil.Hub(testutil.Stack("s", func(s *v1alpha1.InferenceStack) {
		s.Spec.Networking = &v1alpha1.NetworkingSpec{TLS: &v1alpha1.TLSSpec{Enabled: true, SecretName: "server-tls"}}
	}, withV2Networking(t, `{"route": {"host": "llama.apps.example.com"}}`)))
	route, err = network.Route(passthrough, exposure(t, passthrough))
	require.NoError(t, err)
	require.JSONEq(t, `{"host": "llama.apps.example.com", "to": {"kind": "Service", "name": "s", "weight": 100}, "port": {"targetPort": "https"},
		"tls": {"termination": "passthrough", "insecureEdgeTerminationPolicy": "Redirect"}}`, jsonOf(t, route.Object["spec"]))
	require.Equal(t, "passthrough", network.Termination(passthrough))
}

// TestRouteURL: a Route's URL is its host once a router admitted it, and
// empty before (no status, or Admitted not True).
func TestRouteURL(t *testing.T) {
	require.Empty(t, network.RouteURL(nil))
	route := func(status string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		require.NoError(t, json.Unmarshal([]byte(`{"apiVersion": "route.openshift.io/v1", "kind": "Route", "status": `+status+`}`), &u.Object))
		return u
	}
	require.Empty(t, network.RouteURL(route(`{}`)))
	require.Empty(t, network.RouteURL(route(`{"ingress": [{"host": "a.apps.example.com", "conditions": [{"type": "Admitted", "status": "False"}]}]}`)))
	require.Equal(t, "https://b.apps.example.com", network.RouteURL(route(`{"ingress": [
		{"host": "a.apps.example.com", "routerName": "sharded", "conditions": [{"type": "Admitted", "status": "False"}]},
		{"host": "b.apps.example.com", "routerName": "default", "conditions": [{"type": "Admitted", "status": "True"}]}]}`)))
}

// TestExposureChecks: what the v1alpha2 CEL rules refuse of exposure (an
// Ingress whose controller allowedFrom would not admit, one host for the
// Ingress and the Route) is refused by the CRD's own rules, which the
// operator runs on what a v1alpha1 stack's annotation carries.
func TestExposureChecks(t *testing.T) {
	judged := func(networking string) error {
		return validation.Validate(testutil.Hub(testutil.Stack("s", withV2Networking(t, networking)))).ToAggregate()
	}
	require.ErrorContains(t, judged(`{"ingress": {"host": "a.example.com"}, "allowedFrom": {}}`), "spec.networking")
	require.NoError(t, judged(`{"ingress": {"host": "a.example.com"}, "allowedFrom": {"namespaces": ["ingress-nginx"]}}`))
	require.ErrorContains(t, judged(`{"ingress": {"host": "a.example.com"}, "route": {"host": "a.example.com"}}`), "spec.networking")
	require.NoError(t, judged(`{"ingress": {"host": "a.example.com"}, "route": {}}`))
}

// TestServerPolicyAdmitsRouters: with a Route and allowedFrom, the server's
// NetworkPolicy admits OpenShift's router namespaces too; without
// allowedFrom it admits every namespace anyway, and without a Route there
// is no router peer.
func TestServerPolicyAdmitsRouters(t *testing.T) {
	routerPeer := map[string]string{network.RouterNamespaceLabel: network.RouterNamespaceValue}
	narrowed := serverPolicy(t, testutil.Hub(testutil.Stack("s", withV2Networking(t, `{"route": {}, "allowedFrom": {"namespaces": ["clients"]}}`))))
	from := narrowed.Spec.Ingress[0].From
	require.Len(t, from, 3)
	require.Equal(t, routerPeer, from[2].NamespaceSelector.MatchLabels)

	open := serverPolicy(t, testutil.Hub(testutil.Stack("s", withV2Networking(t, `{"route": {}}`))))
	require.Empty(t, open.Spec.Ingress[0].From, "no allowedFrom: every namespace")

	noRoute := serverPolicy(t, testutil.Hub(testutil.Stack("s", withV2Networking(t, `{"allowedFrom": {"namespaces": ["clients"]}}`))))
	require.Len(t, noRoute.Spec.Ingress[0].From, 2)
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	require.NoError(t, err)
	return string(data)
}
