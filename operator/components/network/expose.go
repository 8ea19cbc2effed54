package network

import (
	"encoding/json"
	"fmt"
	"maps"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/components"
	"github.com/inferencestack/inferencestack/operator/components/server"
)

// RouteGVK is the OpenShift Route the operator makes for networking.route.
// The operator has no Go types for it (the openshift/api module is not one
// of its dependencies): it builds and reads Routes as unstructured objects.
var RouteGVK = schema.GroupVersionKind{Group: "route.openshift.io", Version: "v1", Kind: "Route"}

// RouteResource is the Route's resource name, which discovery lists.
const RouteResource = "routes"

// Annotations the operator sets on the server's Ingress.
const (
	// AnnotationNginxBackendProtocol tells ingress-nginx to speak HTTPS to
	// the server when it serves TLS. Other Ingress controllers have their
	// own annotation for it, which networking.ingress.annotations adds
	// (docs/api.md).
	AnnotationNginxBackendProtocol = "nginx.ingress.kubernetes.io/backend-protocol"
)

// RouterNamespaceLabel is the label (and RouterNamespaceValue its value)
// of the namespaces OpenShift's routers run in: the server's NetworkPolicy
// admits them when the stack asks for a Route and allowedFrom narrows it.
const (
	RouterNamespaceLabel = "network.openshift.io/policy-group"
	RouterNamespaceValue = "ingress"
)

// IngressName is the server's Ingress (and RouteName its Route): the
// stack's name, as the Service's, so an OpenShift Route's generated host is
// <stack>-<namespace>.<router domain>.
func IngressName(stack metav1.Object) string { return server.Name(stack) }

// RouteName is the server's Route.
func RouteName(stack metav1.Object) string { return server.Name(stack) }

// Exposure is what the stack asks of exposure beyond its Service: the
// Ingress and the Route (nil: none), read through v1alpha2.
type Exposure struct {
	Ingress *v1alpha2.IngressSpec
	Route   *v1alpha2.RouteSpec
	// allowedFrom narrows the server's NetworkPolicy when set.
	allowedFrom *v1alpha2.AllowedFromSpec
}

// ExposureOf reads the Ingress and Route the stack asks for. (The v1alpha2
// CRD's rules on them, an Ingress with an allowedFrom that admits no
// Ingress controller, one host for both, are the API server's on a v1alpha2
// write and the operator's on a v1alpha1 read: validation.Validate.)
func ExposureOf(hub *v1alpha2.InferenceStack) Exposure {
	n := hub.Spec.Networking
	if n == nil {
		return Exposure{}
	}
	return Exposure{Ingress: n.Ingress, Route: n.Route, allowedFrom: n.AllowedFrom}
}

// Ingress is the server's Ingress, or nil when the stack asks for none:
// one rule, the host's path / (prefix) to the server Service's port, TLS
// for the host when asked. When the server serves TLS the Ingress
// controller must speak HTTPS to it: the operator sets ingress-nginx's
// annotation for that; the user's annotations are added and win.
func Ingress(stack *v1alpha2.InferenceStack, e Exposure) *networkingv1ac.IngressApplyConfiguration {
	in := e.Ingress
	if in == nil {
		return nil
	}
	annotations := map[string]string{}
	if server.TLSEnabled(stack) {
		annotations[AnnotationNginxBackendProtocol] = "HTTPS"
	}
	maps.Copy(annotations, in.Annotations)
	spec := networkingv1ac.IngressSpec().
		WithRules(networkingv1ac.IngressRule().
			WithHost(in.Host).
			WithHTTP(networkingv1ac.HTTPIngressRuleValue().
				WithPaths(networkingv1ac.HTTPIngressPath().
					WithPath("/").
					WithPathType(networkingv1.PathTypePrefix).
					WithBackend(networkingv1ac.IngressBackend().
						WithService(networkingv1ac.IngressServiceBackend().
							WithName(server.Name(stack)).
							WithPort(networkingv1ac.ServiceBackendPort().WithNumber(server.Port(stack))))))))
	if in.ClassName != "" {
		spec.WithIngressClassName(in.ClassName)
	}
	if in.TLS != nil {
		tls := networkingv1ac.IngressTLS().WithHosts(in.Host)
		if in.TLS.SecretName != "" {
			tls.WithSecretName(in.TLS.SecretName)
		}
		spec.WithTLS(tls)
	}
	ing := networkingv1ac.Ingress(IngressName(stack), stack.Namespace).
		WithLabels(components.Labels(stack, components.ComponentServer)).
		WithOwnerReferences(components.OwnerReference(stack)).
		WithSpec(spec)
	if len(annotations) > 0 {
		ing.WithAnnotations(annotations)
	}
	return ing
}

// IngressURL is the server's URL through its Ingress: https://<host> with
// TLS, http://<host> without; "" when the stack asks for no Ingress.
func IngressURL(e Exposure) string {
	if e.Ingress == nil {
		return ""
	}
	if e.Ingress.TLS != nil {
		return "https://" + e.Ingress.Host
	}
	return "http://" + e.Ingress.Host
}

// Termination is the TLS termination of the server's Route: passthrough
// when the server serves TLS (its certificate reaches the client, and with
// networking.tls.caBundle the client's certificate reaches the server,
// which re-encryption would lose; no key or CA goes into the Route), edge
// otherwise (the router's certificate for the host, HTTP to the server).
// Either way plain HTTP to the host is redirected to HTTPS.
func Termination(stack *v1alpha2.InferenceStack) string {
	if server.TLSEnabled(stack) {
		return "passthrough"
	}
	return "edge"
}

// Route is the server's OpenShift Route, or nil when the stack asks for
// none: to the server Service's port (by name), the host when set (else
// the router chooses), TLS terminated as Termination says.
func Route(stack *v1alpha2.InferenceStack, e Exposure) (*unstructured.Unstructured, error) {
	if e.Route == nil {
		return nil, nil
	}
	owner, err := toMap(components.OwnerReference(stack))
	if err != nil {
		return nil, err
	}
	spec := map[string]any{
		"to":   map[string]any{"kind": "Service", "name": server.Name(stack), "weight": int64(100)},
		"port": map[string]any{"targetPort": server.PortName(stack)},
		"tls":  map[string]any{"termination": Termination(stack), "insecureEdgeTerminationPolicy": "Redirect"},
	}
	if e.Route.Host != "" {
		spec["host"] = e.Route.Host
	}
	labels := map[string]any{}
	for k, v := range components.Labels(stack, components.ComponentServer) {
		labels[k] = v
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{
			"name": RouteName(stack), "namespace": stack.Namespace,
			"labels": labels, "ownerReferences": []any{owner},
		},
		"spec": spec,
	}}
	u.SetGroupVersionKind(RouteGVK)
	return u, nil
}

// RouteURL is the server's URL through a live Route: https://<host> of the
// first router that admitted it (status.ingress[].conditions Admitted
// True); "" until one has. (Both terminations redirect HTTP to HTTPS.)
func RouteURL(route *unstructured.Unstructured) string {
	if route == nil {
		return ""
	}
	ingresses, _, _ := unstructured.NestedSlice(route.Object, "status", "ingress")
	for _, i := range ingresses {
		in, ok := i.(map[string]any)
		if !ok {
			continue
		}
		host, _, _ := unstructured.NestedString(in, "host")
		conditions, _, _ := unstructured.NestedSlice(in, "conditions")
		for _, c := range conditions {
			cond, ok := c.(map[string]any)
			if ok && cond["type"] == "Admitted" && cond["status"] == "True" && host != "" {
				return "https://" + host
			}
		}
	}
	return ""
}

// AdmitsRouters reports whether the server's NetworkPolicy must admit
// OpenShift's router namespaces: the stack asks for a Route and
// allowedFrom narrows the policy (unset, it admits every namespace).
func (e Exposure) AdmitsRouters() bool { return e.Route != nil && e.allowedFrom != nil }

// toMap turns an apply configuration into its unstructured form.
func toMap(v any) (map[string]any, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding %T: %w", v, err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("decoding %T: %w", v, err)
	}
	return m, nil
}
