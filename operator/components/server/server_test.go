package server_test

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/utils/ptr"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/components"
	"github.com/inferencestack/inferencestack/operator/components/server"
	"github.com/inferencestack/inferencestack/operator/runconfig"
	"github.com/inferencestack/inferencestack/operator/runconfig/stackconfig"
	"github.com/inferencestack/inferencestack/test/testutil"
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
	d := deployment(t, testutil.Hub(testutil.Stack("s")), inputs())
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
	d := deployment(t, testutil.Hub(testutil.Stack("s", testutil.WithAutoscaling(1, 4, 50))), inputs())
	if d.Spec.Replicas != nil {
		t.Errorf("replicas %d set although the HorizontalPodAutoscaler owns them", *d.Spec.Replicas)
	}
}

// TestAuthNeedsNoServiceAccountToken: kubernetes auth sends each caller's
// SelfSubjectReview with the caller's token (auth_providers.py at v0.2.23
// and v0.3.0), so the server gets no token, only the cluster CA.
func TestAuthNeedsNoServiceAccountToken(t *testing.T) {
	d := deployment(t, testutil.Hub(testutil.Stack("s", testutil.WithKubernetesAuth())), inputs())
	pod := d.Spec.Template.Spec
	if *pod.AutomountServiceAccountToken {
		t.Error("the server calls no API as itself: it must not get a ServiceAccount token")
	}
	mounted := false
	for _, m := range pod.Containers[0].VolumeMounts {
		mounted = mounted || (*m.MountPath == runconfig.KubeCADir && *m.ReadOnly)
	}
	if !mounted {
		t.Errorf("the cluster CA (%s) the auth provider trusts is not mounted", runconfig.KubeCAFile)
	}
}

func TestUserHomeWins(t *testing.T) {
	d := deployment(t, testutil.Hub(testutil.Stack("s", testutil.WithEnv("HOME", "/data"))), inputs())
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
		r := deployment(t, testutil.Hub(testutil.Stack("s")), in).Spec.Template.Spec.Containers[0].Resources
		got := "requests cpu=" + quantity(r.Requests, corev1.ResourceCPU) + " memory=" + quantity(r.Requests, corev1.ResourceMemory) +
			" limits memory=" + quantity(r.Limits, corev1.ResourceMemory)
		if got != want {
			t.Errorf("major %s: %s, want %s", major, got, want)
		}
	}
	user := corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}}
	in := inputs()
	in.OperatorMajor = "2"
	r := deployment(t, testutil.Hub(testutil.Stack("s", testutil.WithResources(user))), in).Spec.Template.Spec.Containers[0].Resources
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

var operands = []runconfig.Operand{{LlamaStackVersion: "0.2.23"}, {LlamaStackVersion: "0.3.0"}}

// TestProbesPerLine: the kubelet's probes are HTTP GETs of /v1/health
// where the server answers them, and TCP connects where it would refuse
// them: with a client CA (mutual TLS) on every line, and with kubernetes
// auth on 0.2, whose middleware guards /v1/health too.
func TestProbesPerLine(t *testing.T) {
	tls := v1alpha1.TLSSpec{Enabled: true, SecretName: "tls"}
	mtls := v1alpha1.TLSSpec{Enabled: true, SecretName: "tls", CABundle: &v1alpha1.CABundleSource{ConfigMapName: "ca"}}
	tests := []struct {
		name string
		opts []testutil.Option
		want map[stackconfig.Line]string
	}{
		{"plain", nil, map[stackconfig.Line]string{stackconfig.Line02: "HTTP", stackconfig.Line03: "HTTP"}},
		{"tls", []testutil.Option{testutil.WithTLS(tls)}, map[stackconfig.Line]string{stackconfig.Line02: "HTTPS", stackconfig.Line03: "HTTPS"}},
		{"auth", []testutil.Option{testutil.WithKubernetesAuth()}, map[stackconfig.Line]string{stackconfig.Line02: "tcp", stackconfig.Line03: "HTTP"}},
		{"mtls", []testutil.Option{testutil.WithTLS(mtls)}, map[stackconfig.Line]string{stackconfig.Line02: "tcp", stackconfig.Line03: "tcp"}},
		{"auth and tls", []testutil.Option{testutil.WithKubernetesAuth(), testutil.WithTLS(tls)}, map[stackconfig.Line]string{stackconfig.Line02: "tcp", stackconfig.Line03: "HTTPS"}},
		{"auth and mtls", []testutil.Option{testutil.WithKubernetesAuth(), testutil.WithTLS(mtls)}, map[stackconfig.Line]string{stackconfig.Line02: "tcp", stackconfig.Line03: "tcp"}},
	}
	for _, tc := range tests {
		for line, want := range tc.want {
			t.Run(tc.name+"/"+string(line), func(t *testing.T) {
				in := inputs()
				in.Config.Line = line
				c := deployment(t, testutil.Hub(testutil.Stack("s", tc.opts...)), in).Spec.Template.Spec.Containers[0]
				for _, p := range []*corev1ac.ProbeApplyConfiguration{c.StartupProbe, c.ReadinessProbe, c.LivenessProbe} {
					got := "tcp"
					if p.HTTPGet != nil {
						got = string(*p.HTTPGet.Scheme)
						if *p.HTTPGet.Path != server.HealthPath {
							t.Errorf("path %s", *p.HTTPGet.Path)
						}
					} else if p.TCPSocket == nil {
						t.Fatal("a probe with neither httpGet nor tcpSocket")
					}
					if got != want {
						t.Errorf("probe %s, want %s", got, want)
					}
				}
			})
		}
	}
}

// TestEveryWrittenPathIsOnAWritableVolume derives, from the run config
// generated for every sample and both lines, the folders the server
// writes to (the conformance model reports them, with the container's
// environment), and checks each lies on a writable volume of the
// Deployment while the root filesystem stays read-only. A provider with a
// new path fails here until the pod spec follows.
func TestEveryWrittenPathIsOnAWritableVolume(t *testing.T) {
	samples, err := filepath.Glob(filepath.Join("..", "..", "config", "samples", "inferencestack_v1alpha1_*.yaml"))
	if err != nil || len(samples) == 0 {
		t.Fatalf("no samples: %v", err)
	}
	for _, path := range samples {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		stack := testutil.HubFromYAML(t, data)
		for _, operand := range operands {
			t.Run(filepath.Base(path)+"/"+operand.LlamaStackVersion, func(t *testing.T) {
				if stack.Spec.OverrideConfig != nil {
					// The override's own paths are the user's; what the
					// pod guarantees is the working directory.
					stack.Spec.OverrideConfig = nil
				}
				res, err := runconfig.Generate(stack.Name, stack.Spec, operand)
				if err != nil {
					t.Fatal(err)
				}
				if len(res.WritableDirs) == 0 {
					t.Fatal("the conformance model reported no written folder; it reports at least the external providers folder")
				}
				in := inputs()
				in.Config = res
				c := deployment(t, stack, in).Spec.Template.Spec.Containers[0]
				if !*c.SecurityContext.ReadOnlyRootFilesystem {
					t.Fatal("the root filesystem must stay read-only")
				}
				for _, dir := range append(slices.Clone(res.WritableDirs), runconfig.WritableMounts...) {
					if !filepath.IsAbs(dir) {
						dir = filepath.Join(*c.WorkingDir, dir)
					}
					if !onWritableMount(&c, dir) {
						t.Errorf("the server writes to %s, which no writable volume of the Deployment holds", dir)
					}
				}
			})
		}
	}
}

func onWritableMount(c *corev1ac.ContainerApplyConfiguration, dir string) bool {
	for _, m := range c.VolumeMounts {
		if m.ReadOnly != nil && *m.ReadOnly {
			continue
		}
		if dir == *m.MountPath || strings.HasPrefix(dir, strings.TrimSuffix(*m.MountPath, "/")+"/") {
			return true
		}
	}
	return false
}

// TestStateVolume: with workload.stateVolume the server's state folder is
// a claim without owner (kept on deletion by default; owned by the stack
// with retainOnDelete: false), rolled out with
// Recreate so the ReadWriteOnce volume is let go first; without it, an
// emptyDir.
func TestStateVolume(t *testing.T) {
	plain := testutil.Hub(testutil.Stack("s"))
	if server.StatePVC(plain) != nil {
		t.Error("a claim without workload.stateVolume")
	}
	size := resource.MustParse("5Gi")
	stack := testutil.Hub(testutil.Stack("s", testutil.WithSpec(func(s *v1alpha1.InferenceStackSpec) {
		s.Workload = &v1alpha1.WorkloadSpec{StateVolume: &v1alpha1.StateVolumeSpec{Size: &size}}
	})))
	pvc := server.StatePVC(stack)
	if pvc == nil || *pvc.Name != "s-state" || len(pvc.OwnerReferences) != 0 {
		t.Fatalf("claim %+v: want s-state without owner", pvc)
	}
	if q := (*pvc.Spec.Resources.Requests)[corev1.ResourceStorage]; q.String() != "5Gi" {
		t.Errorf("size %s", q.String())
	}
	if !server.StateRetained(stack) {
		t.Error("retainOnDelete defaults to true")
	}
	// Not retained: the stack owns the claim, so the garbage collector
	// deletes it with the stack.
	dropped := stack.DeepCopy()
	dropped.UID = "uid-1"
	dropped.Spec.Workload.StateVolume.RetainOnDelete = ptr.To(false)
	if refs := server.StatePVC(dropped).OwnerReferences; server.StateRetained(dropped) || len(refs) != 1 || *refs[0].UID != "uid-1" {
		t.Errorf("retainOnDelete: false gives owner references %+v, want the stack's", refs)
	}
	d := deployment(t, stack, inputs())
	if *d.Spec.Strategy.Type != "Recreate" {
		t.Errorf("strategy %s, want Recreate", *d.Spec.Strategy.Type)
	}
	found := false
	for _, v := range d.Spec.Template.Spec.Volumes {
		found = found || (v.PersistentVolumeClaim != nil && *v.PersistentVolumeClaim.ClaimName == "s-state")
	}
	if !found {
		t.Error("the state claim is not a volume of the pod")
	}
	if d := deployment(t, plain, inputs()); d.Spec.Strategy != nil {
		t.Error("without a state volume the default rolling update applies")
	}
	// The volume's group, so the server's user can write to it: with a
	// state volume, unless the platform assigns one.
	group := int64(999)
	in := inputs()
	in.FSGroup = &group
	for _, tc := range []struct {
		name  string
		stack *v1alpha2.InferenceStack
		in    server.Inputs
		want  *int64
	}{
		{"state volume", stack, in, &group},
		{"state volume, group left to the platform", stack, inputs(), nil},
		{"no state volume", plain, in, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := deployment(t, tc.stack, tc.in).Spec.Template.Spec.SecurityContext.FSGroup
			if (got == nil) != (tc.want == nil) || (got != nil && *got != *tc.want) {
				t.Errorf("fsGroup %v, want %v", ptrString(got), ptrString(tc.want))
			}
		})
	}
}

func ptrString(p *int64) string {
	if p == nil {
		return "unset"
	}
	return strconv.FormatInt(*p, 10)
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
			stack := testutil.Hub(testutil.Stack("s", append([]testutil.Option{testutil.WithNamespace("ns")}, tc.opts...)...))
			if got := server.URL(stack); got != tc.wantURL {
				t.Errorf("URL = %s, want %s", got, tc.wantURL)
			}
			if got := *server.Service(stack).Spec.Type; got != tc.wantType {
				t.Errorf("Service type = %s, want %s", got, tc.wantType)
			}
		})
	}
}

// deployment builds the server Deployment, failing the test on an error.
func deployment(t *testing.T, stack *v1alpha2.InferenceStack, in server.Inputs) *appsv1ac.DeploymentApplyConfiguration {
	t.Helper()
	d, err := server.Deployment(stack, in)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
