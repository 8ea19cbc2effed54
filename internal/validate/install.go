package validate

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	"github.com/operator-framework/operator-registry/alpha/declcfg"
	opproperty "github.com/operator-framework/operator-registry/alpha/property"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// MaxObjectBytes is the largest object the API server stores: etcd refuses
// a request over its --max-request-bytes, 1.5 MiB by default, and the API
// server writes each object in one request.
const MaxObjectBytes = 3 << 19 // 1.5 MiB

// objectFinding is a finding about one object of a bundle: its kind and
// name, the field, and what is wrong and what to do.
type objectFinding struct {
	Kind, Name, Field, Message string
}

// installObjects are the objects of a bundle a CRD package's conversion
// webhook is judged on.
type installObjects struct {
	CSV      *v1alpha1.ClusterServiceVersion
	CRDs     []*apiextensionsv1.CustomResourceDefinition
	Services []*corev1.Service
	// Sizes are the JSON sizes of every object, by kind/name.
	Sizes map[[2]string]int
}

// objectsOf converts a bundle's objects (as the API server would receive
// them) for objectFindings.
func objectsOf(objs []*unstructured.Unstructured) (installObjects, []objectFinding) {
	b := installObjects{Sizes: map[[2]string]int{}}
	var findings []objectFinding
	for _, u := range objs {
		if u == nil {
			continue
		}
		data, err := json.Marshal(u.Object)
		if err == nil {
			b.Sizes[[2]string{u.GetKind(), u.GetName()}] = len(data)
		}
		conv := func(into any) bool {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into); err != nil {
				findings = append(findings, objectFinding{Kind: u.GetKind(), Name: u.GetName(), Message: "cannot be read: " + err.Error()})
				return false
			}
			return true
		}
		switch u.GetKind() {
		case "ClusterServiceVersion":
			var c v1alpha1.ClusterServiceVersion
			if conv(&c) {
				b.CSV = &c
			}
		case "CustomResourceDefinition":
			if u.GetAPIVersion() != apiextensionsv1.SchemeGroupVersion.String() {
				continue
			}
			var c apiextensionsv1.CustomResourceDefinition
			if conv(&c) {
				b.CRDs = append(b.CRDs, &c)
			}
		case "Service":
			var s corev1.Service
			if conv(&s) {
				b.Services = append(b.Services, &s)
			}
		}
	}
	return b, findings
}

// objectFindings judges a bundle as the API server and OLM would install
// it: every object within the size the API server stores; every CRD with
// exactly one storage version; and a CRD converted by a webhook calls the
// package's own Service (never a URL, no caBundle baked in, v1 reviews),
// which exists in the bundle, selects the pods of a Deployment of the CSV on
// the port the CRD names and the container's port, and that Deployment runs
// at least one replica, under the restricted Pod Security Standard, as a
// ServiceAccount granted no wildcard.
func objectFindings(objs []*unstructured.Unstructured) []objectFinding {
	b, findings := objectsOf(objs)
	for _, k := range slicesSortedKeys(b.Sizes) {
		if n := b.Sizes[k]; n > MaxObjectBytes {
			findings = append(findings, objectFinding{Kind: k[0], Name: k[1], Message: fmt.Sprintf(
				"is %d bytes as JSON, more than the %d (1.5 MiB) etcd accepts in one request by default, so the API server cannot store it: make it smaller", n, MaxObjectBytes)})
		}
	}
	for _, crd := range b.CRDs {
		findings = append(findings, crdFindings(b, crd)...)
	}
	return findings
}

func crdFindings(b installObjects, crd *apiextensionsv1.CustomResourceDefinition) []objectFinding {
	var out []objectFinding
	add := func(field, format string, args ...any) {
		out = append(out, objectFinding{Kind: "CustomResourceDefinition", Name: crd.Name, Field: field, Message: fmt.Sprintf(format, args...)})
	}
	var storage []string
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			storage = append(storage, v.Name)
		}
	}
	if len(storage) != 1 {
		add("spec.versions[*].storage", "%d versions are marked storage (%s); the API server stores exactly one: set storage: true on exactly one version",
			len(storage), strings.Join(storage, ", "))
	}
	conv := crd.Spec.Conversion
	if conv == nil || conv.Strategy != apiextensionsv1.WebhookConverter {
		return out
	}
	if conv.Webhook == nil || conv.Webhook.ClientConfig == nil {
		add("spec.conversion.webhook.clientConfig", "is missing: a Webhook conversion needs the Service to call; name the package's conversion Service")
		return out
	}
	if !slices.Contains(conv.Webhook.ConversionReviewVersions, "v1") {
		add("spec.conversion.webhook.conversionReviewVersions", "is %v and lacks v1: the API server sends ConversionReview v1 (v1beta1 is gone); list v1",
			conv.Webhook.ConversionReviewVersions)
	}
	cc := conv.Webhook.ClientConfig
	if cc.URL != nil {
		add("spec.conversion.webhook.clientConfig.url", "is %q: a package's conversion must call its own webhook through its Service, never a URL "+
			"(every object of the CRD would be sent there); use clientConfig.service", *cc.URL)
	}
	if len(cc.CABundle) > 0 {
		add("spec.conversion.webhook.clientConfig.caBundle", "is baked into the CRD: the webhook's certificate is made at install and the webhook injects its CA; "+
			"a baked one trusts a key that shipped with the bundle: remove it")
	}
	if cc.Service == nil {
		if cc.URL == nil {
			add("spec.conversion.webhook.clientConfig.service", "is missing: name the package's conversion Service")
		}
		return out
	}
	ref := cc.Service
	port := int32(443)
	if ref.Port != nil {
		port = *ref.Port
	}
	i := slices.IndexFunc(b.Services, func(s *corev1.Service) bool { return s.Name == ref.Name })
	if i < 0 {
		add("spec.conversion.webhook.clientConfig.service.name", "names the Service %q, which the bundle does not ship: "+
			"every conversion would fail; ship the Service in manifests/ (bundlegen bundle does)", ref.Name)
		return out
	}
	svc := b.Services[i]
	pi := slices.IndexFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Port == port })
	if pi < 0 {
		add("spec.conversion.webhook.clientConfig.service.port", "is %d, but the Service %q has no such port: set the CRD's port to the Service's", port, svc.Name)
		return out
	}
	sp := svc.Spec.Ports[pi]
	if len(svc.Spec.Selector) == 0 {
		add("spec.conversion.webhook.clientConfig.service", "Service %q has no selector, so it reaches no webhook pod: select the webhook Deployment's pod labels", svc.Name)
		return out
	}
	if b.CSV == nil {
		add("spec.conversion.webhook.clientConfig.service", "the bundle has no CSV, so nothing runs the webhook Service %q selects", svc.Name)
		return out
	}
	var dep *v1alpha1.StrategyDeploymentSpec
	for j := range b.CSV.Spec.InstallStrategy.StrategySpec.DeploymentSpecs {
		d := &b.CSV.Spec.InstallStrategy.StrategySpec.DeploymentSpecs[j]
		if selects(svc.Spec.Selector, d.Spec.Template.Labels) {
			dep = d
			break
		}
	}
	if dep == nil {
		add("spec.conversion.webhook.clientConfig.service", "Service %q selects %v, which no Deployment of the CSV's install strategy labels its pods with: "+
			"every conversion would fail; make the selector match the webhook Deployment's pod template labels", svc.Name, svc.Spec.Selector)
		return out
	}
	out = append(out, webhookDeploymentFindings(b.CSV, dep, svc, sp)...)
	return out
}

func selects(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// webhookDeploymentFindings checks the webhook's Deployment: it serves the
// Service's target port, runs, is restricted, and holds no wildcard right.
func webhookDeploymentFindings(csv *v1alpha1.ClusterServiceVersion, dep *v1alpha1.StrategyDeploymentSpec, svc *corev1.Service, sp corev1.ServicePort) []objectFinding {
	var out []objectFinding
	add := func(field, format string, args ...any) {
		out = append(out, objectFinding{Kind: "ClusterServiceVersion", Name: csv.Name,
			Field: "spec.install.spec.deployments[" + dep.Name + "]" + field, Message: fmt.Sprintf(format, args...)})
	}
	pod := dep.Spec.Template.Spec
	target := sp.TargetPort
	if target.Type == intstr.Int && target.IntVal == 0 {
		target = intstr.FromInt32(sp.Port)
	}
	served := false
	for _, c := range pod.Containers {
		for _, p := range c.Ports {
			if target.Type == intstr.Int && p.ContainerPort == target.IntVal || target.Type == intstr.String && p.Name == target.StrVal {
				served = true
			}
		}
	}
	if !served {
		add(".spec.template.spec.containers[*].ports", "no container declares the Service %q's targetPort %s: the Service would send conversions to a closed port; "+
			"set targetPort to the webhook container's port", svc.Name, target.String())
	}
	if dep.Spec.Replicas != nil && *dep.Spec.Replicas < 1 {
		add(".spec.replicas", "is %d: with no webhook pod every read and write of the CRD's objects fails; run at least 1", *dep.Spec.Replicas)
	}
	restricted(pod, add)
	sa := pod.ServiceAccountName
	for _, perms := range []struct {
		field string
		list  []v1alpha1.StrategyDeploymentPermissions
	}{{"spec.install.spec.clusterPermissions", csv.Spec.InstallStrategy.StrategySpec.ClusterPermissions},
		{"spec.install.spec.permissions", csv.Spec.InstallStrategy.StrategySpec.Permissions}} {
		for _, p := range perms.list {
			if p.ServiceAccountName != sa {
				continue
			}
			for i, r := range p.Rules {
				if wild(r) {
					out = append(out, objectFinding{Kind: "ClusterServiceVersion", Name: csv.Name, Field: fmt.Sprintf("%s[%s].rules[%d]", perms.field, sa, i),
						Message: fmt.Sprintf("grants the conversion webhook's ServiceAccount a wildcard (%s): the webhook needs its CRD and its Secret only; "+
							"name the groups, resources and verbs", ruleText(r))})
				}
			}
		}
	}
	return out
}

func wild(r rbacv1.PolicyRule) bool {
	for _, l := range [][]string{r.APIGroups, r.Resources, r.Verbs, r.NonResourceURLs} {
		for _, s := range l {
			if s == "*" || strings.HasSuffix(s, "/*") {
				return true
			}
		}
	}
	return false
}

func ruleText(r rbacv1.PolicyRule) string {
	return fmt.Sprintf("apiGroups %v, resources %v, verbs %v", r.APIGroups, r.Resources, r.Verbs)
}

// restricted applies the restricted Pod Security Standard
// (https://kubernetes.io/docs/concepts/security/pod-security-standards/)
// to the webhook's pod: no host namespaces or host paths, no privileged or
// escalating container, non-root, seccomp RuntimeDefault or Localhost,
// every capability dropped but NET_BIND_SERVICE.
func restricted(pod corev1.PodSpec, add func(field, format string, args ...any)) {
	const why = "the restricted Pod Security Standard forbids it (an install namespace enforcing it refuses the pod, and the webhook converts every object of the CRD)"
	if pod.HostNetwork || pod.HostPID || pod.HostIPC {
		add(".spec.template.spec", "uses the host's network, PID or IPC namespace: %s; remove it", why)
	}
	for _, v := range pod.Volumes {
		if v.HostPath != nil {
			add(".spec.template.spec.volumes["+v.Name+"]", "is a hostPath: %s; use an emptyDir or a Secret", why)
		}
	}
	psc := pod.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	if psc.RunAsUser != nil && *psc.RunAsUser == 0 {
		add(".spec.template.spec.securityContext.runAsUser", "is 0 (root): %s; run as a non-root user", why)
	}
	for _, c := range append(slices.Clone(pod.InitContainers), pod.Containers...) {
		f := ".spec.template.spec.containers[" + c.Name + "].securityContext"
		sc := c.SecurityContext
		if sc == nil {
			sc = &corev1.SecurityContext{}
		}
		if sc.Privileged != nil && *sc.Privileged {
			add(f+".privileged", "is true: %s; remove it", why)
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			add(f+".allowPrivilegeEscalation", "is not false: %s; set it to false", why)
		}
		nonRoot := psc.RunAsNonRoot != nil && *psc.RunAsNonRoot
		if sc.RunAsNonRoot != nil {
			nonRoot = *sc.RunAsNonRoot
		}
		if !nonRoot {
			add(f+".runAsNonRoot", "is not true (nor the pod's): %s; set runAsNonRoot: true", why)
		}
		if sc.RunAsUser != nil && *sc.RunAsUser == 0 {
			add(f+".runAsUser", "is 0 (root): %s; run as a non-root user", why)
		}
		seccomp := psc.SeccompProfile
		if sc.SeccompProfile != nil {
			seccomp = sc.SeccompProfile
		}
		if seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault && seccomp.Type != corev1.SeccompProfileTypeLocalhost {
			add(f+".seccompProfile", "is not RuntimeDefault or Localhost (nor the pod's): %s; set seccompProfile.type: RuntimeDefault", why)
		}
		if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
			add(f+".capabilities.drop", "does not drop ALL: %s; drop ALL", why)
		}
		if sc.Capabilities != nil {
			for _, a := range sc.Capabilities.Add {
				if a != "NET_BIND_SERVICE" {
					add(f+".capabilities.add", "adds %s: %s; add none but NET_BIND_SERVICE", a, why)
				}
			}
		}
	}
}

func slicesSortedKeys(m map[[2]string]int) [][2]string {
	keys := make([][2]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b [2]string) int { return strings.Compare(a[0]+"/"+a[1], b[0]+"/"+b[1]) })
	return keys
}

// RuleInstall: a bundle would not install, or would not work, as the API
// server and OLM install it (objectFindings).
const RuleInstall = "install"

// installFindings are objectFindings of a bundle directory's objects, as
// bundle findings (file and field named).
func installFindings(objs []*unstructured.Unstructured, files map[fileKey]string) []Finding {
	var out []Finding
	for _, f := range objectFindings(objs) {
		out = append(out, Finding{Severity: SeverityError, Source: "bundlegen", File: files[fileKey{f.Kind, f.Name}], Field: f.Field,
			Subject: f.Kind + " " + f.Name, Message: f.Message})
	}
	return out
}

// catalogInstallFindings are objectFindings of every bundle of package p
// that carries its objects (olm.bundle.object).
func catalogInstallFindings(cfg declcfg.DeclarativeConfig, p string) []CatalogFinding {
	var out []CatalogFinding
	for _, b := range cfg.Bundles {
		if b.Package != p {
			continue
		}
		props, err := opproperty.Parse(b.Properties)
		if err != nil || len(props.BundleObjects) == 0 {
			continue // the model findings name a property that cannot be read
		}
		var objs []*unstructured.Unstructured
		for i, o := range props.BundleObjects {
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(o.Data); err != nil {
				out = append(out, CatalogFinding{Package: p, Bundle: b.Name, Rule: RuleInstall,
					Message: fmt.Sprintf("olm.bundle.object %d cannot be read: %v; render the bundle again", i, err)})
				continue
			}
			objs = append(objs, u)
		}
		for _, f := range objectFindings(objs) {
			msg := f.Kind + " " + f.Name
			if f.Field != "" {
				msg += " " + f.Field
			}
			out = append(out, CatalogFinding{Package: p, Bundle: b.Name, Rule: RuleInstall, Field: f.Field, Message: msg + ": " + f.Message})
		}
	}
	return out
}
