package server_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	"github.com/inferencestack/inferencestack/operator/components"
	"github.com/inferencestack/inferencestack/operator/components/server"
	"github.com/inferencestack/inferencestack/operator/internal/testutil"
	"github.com/inferencestack/inferencestack/operator/runconfig"
)

func inputs() server.Inputs {
	return server.Inputs{
		Image:          "example.com/server@sha256:abc",
		Config:         runconfig.Result{Hash: "cafe", Env: []corev1.EnvVar{{Name: "A", Value: "1"}}},
		ConfigMapName:  "s-run-config",
		ReferencesHash: "beef",
	}
}

func TestDeploymentIsRestrictedAndCarriesHashes(t *testing.T) {
	d := server.Deployment(testutil.Stack("s"), inputs())
	pod := d.Spec.Template.Spec
	if sc := pod.SecurityContext; sc == nil || !*sc.RunAsNonRoot || *sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod security context %+v", sc)
	}
	c := pod.Containers[0]
	sc := c.SecurityContext
	if *sc.AllowPrivilegeEscalation || sc.Capabilities.Drop[0] != "ALL" || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("container security context %+v", sc)
	}
	if *pod.AutomountServiceAccountToken {
		t.Error("the server gets a ServiceAccount token without auth.kubernetes")
	}
	a := d.Spec.Template.Annotations
	if a[components.AnnotationConfigHash] != "cafe" || a[components.AnnotationSecretsHash] != "beef" {
		t.Errorf("pod template annotations %v", a)
	}
	if *d.Spec.Replicas != 1 {
		t.Errorf("replicas %d, want 1", *d.Spec.Replicas)
	}
	if *c.Image != "example.com/server@sha256:abc" {
		t.Errorf("image %s", *c.Image)
	}
}

func TestDeploymentLeavesReplicasToTheAutoscaler(t *testing.T) {
	d := server.Deployment(testutil.Stack("s", testutil.WithAutoscaling(1, 4, 50)), inputs())
	if d.Spec.Replicas != nil {
		t.Errorf("replicas %d set although the HorizontalPodAutoscaler owns them", *d.Spec.Replicas)
	}
}

func TestAuthMountsTheServiceAccountToken(t *testing.T) {
	d := server.Deployment(testutil.Stack("s", testutil.WithKubernetesAuth()), inputs())
	if !*d.Spec.Template.Spec.AutomountServiceAccountToken {
		t.Error("with auth.kubernetes the server needs its ServiceAccount token for TokenReviews")
	}
}

func TestUserHomeWins(t *testing.T) {
	d := server.Deployment(testutil.Stack("s", testutil.WithEnv("HOME", "/data")), inputs())
	n := 0
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		if *e.Name == "HOME" {
			n++
			if *e.Value != "/data" {
				t.Errorf("HOME=%s, want the user's /data", *e.Value)
			}
		}
	}
	if n != 1 {
		t.Errorf("HOME appears %d times", n)
	}
}

// TestDefaultResourcesPerMajor: without workload.resources the server gets
// its major's defaults (2.0 raised them and added a memory limit); the
// user's resources always win.
func TestDefaultResourcesPerMajor(t *testing.T) {
	for major, want := range map[string]string{"1": "requests cpu=250m memory=512Mi limits memory=", "2": "requests cpu=500m memory=1Gi limits memory=2Gi"} {
		in := inputs()
		in.OperatorMajor = major
		r := server.Deployment(testutil.Stack("s"), in).Spec.Template.Spec.Containers[0].Resources
		got := "requests cpu=" + quantity(r.Requests, corev1.ResourceCPU) + " memory=" + quantity(r.Requests, corev1.ResourceMemory) +
			" limits memory=" + quantity(r.Limits, corev1.ResourceMemory)
		if got != want {
			t.Errorf("major %s: %s, want %s", major, got, want)
		}
	}
	user := corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}}
	in := inputs()
	in.OperatorMajor = "2"
	r := server.Deployment(testutil.Stack("s", testutil.WithResources(user)), in).Spec.Template.Spec.Containers[0].Resources
	if quantity(r.Requests, corev1.ResourceCPU) != "4" || r.Limits != nil {
		t.Errorf("the user's resources %v were not used as they are: %+v", user, r)
	}
}

func quantity(l *corev1.ResourceList, name corev1.ResourceName) string {
	if l == nil {
		return ""
	}
	q, ok := (*l)[name]
	if !ok {
		return ""
	}
	return q.String()
}

func TestURLAndServiceType(t *testing.T) {
	tests := []struct {
		name     string
		opts     []testutil.Option
		wantURL  string
		wantType corev1.ServiceType
	}{
		{name: "defaults", wantURL: "http://s.ns.svc:8321", wantType: corev1.ServiceTypeClusterIP},
		{name: "another port", opts: []testutil.Option{testutil.WithPort(80)}, wantURL: "http://s.ns.svc:80", wantType: corev1.ServiceTypeClusterIP},
		{
			name:     "tls",
			opts:     []testutil.Option{testutil.WithTLS(v1alpha1.TLSSpec{Enabled: true, SecretName: "tls"}), testutil.WithPort(8443)},
			wantURL:  "https://s.ns.svc:8443",
			wantType: corev1.ServiceTypeClusterIP,
		},
		{name: "tls off", opts: []testutil.Option{testutil.WithTLS(v1alpha1.TLSSpec{})}, wantURL: "http://s.ns.svc:8321", wantType: corev1.ServiceTypeClusterIP},
		{name: "exposed", opts: []testutil.Option{testutil.WithExpose(true)}, wantURL: "http://s.ns.svc:8321", wantType: corev1.ServiceTypeLoadBalancer},
		{name: "expose false", opts: []testutil.Option{testutil.WithExpose(false)}, wantURL: "http://s.ns.svc:8321", wantType: corev1.ServiceTypeClusterIP},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			stack := testutil.Stack("s", append([]testutil.Option{testutil.WithNamespace("ns")}, tc.opts...)...)
			if got := server.URL(stack); got != tc.wantURL {
				t.Errorf("URL = %s, want %s", got, tc.wantURL)
			}
			if got := *server.Service(stack).Spec.Type; got != tc.wantType {
				t.Errorf("Service type = %s, want %s", got, tc.wantType)
			}
		})
	}
}
