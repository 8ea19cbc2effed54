package server_test

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/api/v1alpha2/validation"
	"github.com/inferencestack/inferencestack/operator/components/server"
	"github.com/inferencestack/inferencestack/operator/runconfig"
	"github.com/inferencestack/inferencestack/operator/runconfig/stackconfig"
	"github.com/inferencestack/inferencestack/test/testutil"
)

// generated is the server Inputs of a stack at a Llama Stack version, with
// its generated run config.
func generated(t *testing.T, stack *v1alpha2.InferenceStack, version string) server.Inputs {
	t.Helper()
	cfg, err := runconfig.Generate(stack.Name, stack.Spec, runconfig.Operand{LlamaStackVersion: version})
	require.NoError(t, err)
	in := inputs()
	in.Config, in.OperatorMajor = cfg, "2"
	return in
}

// envOf reads a container's literal environment.
func envOf(c corev1.Container) func(string) (string, bool) {
	return func(name string) (string, bool) {
		for _, e := range c.Env {
			if e.Name == name {
				return e.Value, e.ValueFrom == nil
			}
		}
		return "", false
	}
}

// container is the Deployment's server container as the API would hold it.
func serverContainer(t *testing.T, stack *v1alpha2.InferenceStack, in server.Inputs) (corev1.PodSpec, corev1.Container) {
	t.Helper()
	var pod corev1.PodSpec
	d := deployment(t, stack, in)
	require.NoError(t, convertInto(d.Spec.Template.Spec, &pod))
	return pod, pod.Containers[0]
}

// TestWorkersCommand: with workload.workers the server runs uvicorn with
// upstream's app factory and that many workers, on the port and with the
// TLS files `llama stack run` would use, and the config the operator
// mounts in the factory's variable. The command is read back with the
// parser the stand-in server enforces (the image's forms at each line).
// Without workers it stays `llama stack run <config>`.
func TestWorkersCommand(t *testing.T) {
	tls := testutil.WithTLS(v1alpha1.TLSSpec{Enabled: true, SecretName: "cert", CABundle: &v1alpha1.CABundleSource{ConfigMapName: "ca"}})
	for _, version := range []string{"0.2.23", "0.3.0"} {
		line, err := stackconfig.LineOf(version)
		require.NoError(t, err)
		t.Run(version, func(t *testing.T) {
			plain := testutil.Hub(testutil.Stack("s"))
			_, c := serverContainer(t, plain, generated(t, plain, version))
			got, err := line.ParseCommand(c.Command, envOf(c))
			require.NoError(t, err)
			require.False(t, got.Uvicorn)
			require.Equal(t, server.ConfigPath, got.Config)
			_, found := envOf(c)("LLAMA_STACK_CONFIG")
			require.False(t, found, "no new variable without workers: existing stacks do not roll out")
			require.False(t, slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "providers" }),
				"llama stack run makes the external providers folder itself")

			for _, stack := range []*v1alpha2.InferenceStack{testutil.Hub(testutil.Stack("s", testutil.WithWorkers(3))), testutil.Hub(testutil.Stack("s", testutil.WithWorkers(3), tls))} {
				in := generated(t, stack, version)
				_, c := serverContainer(t, stack, in)
				require.Equal(t, "uvicorn", c.Command[0], "%q", c.Command)
				got, err := line.ParseCommand(c.Command, envOf(c))
				require.NoError(t, err, "%q", c.Command)
				require.True(t, got.Uvicorn)
				require.Equal(t, 3, got.Workers)
				require.Equal(t, server.ConfigPath, got.Config)
				require.Equal(t, int64(runconfig.ServerPort), got.Port)
				require.Equal(t, int32(got.Port), c.Ports[0].ContainerPort)
				require.Equal(t, []string{"0.0.0.0"}, got.Hosts)
				require.Equal(t, "on", got.Lifespan, "a failing start-up stops the server, as under llama stack run")
				// The factory needs external_providers_dir, which only
				// `llama stack run` creates: an empty volume makes it.
				require.Equal(t, runconfig.ProvidersDir, in.Config.ExternalProvidersDir)
				require.True(t, slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
					return m.MountPath == runconfig.ProvidersDir && m.Name == "providers"
				}), "mounts %v", c.VolumeMounts)
				if s := in.Config.Server; s.TLSCertFile != nil {
					require.Equal(t, *s.TLSCertFile, got.CertFile)
					require.Equal(t, *s.TLSKeyFile, got.KeyFile)
					require.Equal(t, *s.TLSCAFile, got.CAFile)
					require.Equal(t, stackconfig.UvicornCertRequired, got.CertReqs)
				} else {
					require.Empty(t, got.CertFile)
				}
			}
		})
	}
}

// TestParseCommandRefuses: the forms the image does not run.
func TestParseCommandRefuses(t *testing.T) {
	env := func(name string) (string, bool) { return "/c.yaml", name == "LLAMA_STACK_CONFIG" }
	none := func(string) (string, bool) { return "", false }
	app := "llama_stack.core.server.server:create_app"
	for _, tc := range []struct {
		name string
		argv []string
		env  func(string) (string, bool)
		want string
	}{
		{"no config", []string{"llama", "stack", "run"}, env, "needs a config"},
		{"workers option", []string{"llama", "stack", "run", "/c.yaml", "--workers", "2"}, env, "has no option --workers"},
		{"other image", []string{"llama", "stack", "run", "/c.yaml", "--image-type", "venv"}, env, "another environment"},
		{"no factory flag", []string{"uvicorn", app, "--workers", "2"}, env, "pass --factory"},
		{"other app", []string{"uvicorn", "main:app", "--factory"}, env, "uvicorn must run"},
		{"no config variable", []string{"uvicorn", app, "--factory"}, none, "needs LLAMA_STACK_CONFIG"},
		{"zero workers", []string{"uvicorn", app, "--factory", "--workers", "0"}, env, "at least 1"},
		{"half TLS", []string{"uvicorn", app, "--factory", "--ssl-certfile", "/c"}, env, "go together"},
		{"other program", []string{"python", "-m", "llama_stack.core.server.server"}, env, "the server image runs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := stackconfig.Line03.ParseCommand(tc.argv, tc.env)
			require.ErrorContains(t, err, tc.want)
		})
	}
	// --env exists at 0.2.23 only.
	_, err := stackconfig.Line02.ParseCommand([]string{"llama", "stack", "run", "/c.yaml", "--env", "A=1"}, env)
	require.NoError(t, err)
	_, err = stackconfig.Line03.ParseCommand([]string{"llama", "stack", "run", "/c.yaml", "--env", "A=1"}, env)
	require.ErrorContains(t, err, "no option --env")
}

// TestWorkersResources: the requests sized for workers, the user's
// resources winning, and a request for every resource an autoscaling
// metric names.
func TestWorkersResources(t *testing.T) {
	q := resource.MustParse
	memory := []v1alpha2.ResourceMetric{{Resource: v1alpha2.ResourceMemory, AverageUtilization: 70}}
	for _, tc := range []struct {
		name    string
		user    *corev1.ResourceRequirements
		workers *int32
		metrics []v1alpha2.ResourceMetric
		want    corev1.ResourceRequirements
	}{
		{"defaults", nil, nil, nil, server.DefaultResources("2")},
		{"workers size the defaults", nil, ptr.To[int32](4), nil, corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: q("4"), corev1.ResourceMemory: q("4Gi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: q("8Gi")}}},
		{"the user's request wins, the missing one is sized", &corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: q("1500m")}}, ptr.To[int32](2), nil, corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: q("1500m"), corev1.ResourceMemory: q("2Gi")}}},
		{"a limit stands for its request", &corev1.ResourceRequirements{
			Limits: corev1.ResourceList{corev1.ResourceMemory: q("3Gi")}}, ptr.To[int32](2), nil, corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: q("2")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: q("3Gi")}}},
		{"no workers, no autoscaling: the user's as they are", &corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: q("1")}}, nil, nil, corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: q("1")}}},
		{"a memory metric gets a memory request", &corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: q("1")}}, nil, memory, corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: q("1"), corev1.ResourceMemory: q("1Gi")}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := server.Resources(tc.user, tc.workers, tc.metrics, "2")
			require.True(t, equalResources(tc.want, got), "got %v, want %v", got, tc.want)
		})
	}
}

func equalResources(a, b corev1.ResourceRequirements) bool {
	same := func(x, y corev1.ResourceList) bool {
		if len(x) != len(y) {
			return false
		}
		for k, v := range x {
			if w, ok := y[k]; !ok || v.Cmp(w) != 0 {
				return false
			}
		}
		return true
	}
	return same(a.Requests, b.Requests) && same(a.Limits, b.Limits)
}

// TestPodOverrides: volumes, mounts, args and the grace period reach the
// pod beside the operator's own; a command replaces the operator's.
func TestPodOverrides(t *testing.T) {
	o := v1alpha2.PodOverrides{
		Volumes: []corev1.Volume{{Name: "prompts", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "prompts"}}}}},
		VolumeMounts:                  []corev1.VolumeMount{{Name: "prompts", MountPath: "/opt/prompts", ReadOnly: true}},
		Args:                          []string{"--port", "8321"},
		TerminationGracePeriodSeconds: ptr.To[int64](90),
	}
	stack := testutil.Hub(testutil.Stack("s", testutil.WithPodOverrides(o)))
	pod, c := serverContainer(t, stack, generated(t, stack, "0.3.0"))
	require.Equal(t, int64(90), *pod.TerminationGracePeriodSeconds)
	require.Equal(t, "prompts", pod.Volumes[len(pod.Volumes)-1].Name)
	require.Greater(t, len(pod.Volumes), 1, "the operator's volumes stay")
	require.Equal(t, o.VolumeMounts[0], c.VolumeMounts[len(c.VolumeMounts)-1])
	require.Equal(t, []string{"llama", "stack", "run", server.ConfigPath}, c.Command)
	require.Equal(t, o.Args, c.Args)
	_, err := stackconfig.Line03.ParseCommand(append(c.Command, c.Args...), envOf(c))
	require.NoError(t, err)

	o.Command = []string{"llama", "stack", "run", server.ConfigPath, "--enable-ui"}
	o.Args = nil
	stack = testutil.Hub(testutil.Stack("s", testutil.WithPodOverrides(o)))
	_, c = serverContainer(t, stack, generated(t, stack, "0.3.0"))
	require.Equal(t, o.Command, c.Command)
	require.Empty(t, c.Args)

	// With workers, args are uvicorn options after the operator's command.
	o.Command, o.Args = nil, []string{"--timeout-keep-alive", "30"}
	stack = testutil.Hub(testutil.Stack("s", testutil.WithPodOverrides(o), testutil.WithWorkers(2)))
	_, c = serverContainer(t, stack, generated(t, stack, "0.3.0"))
	require.Equal(t, "uvicorn", c.Command[0])
	_, err = stackconfig.Line03.ParseCommand(append(c.Command, c.Args...), envOf(c))
	require.NoError(t, err)
}

// TestCheckOverrides: every rule of workload.workers and podOverrides
// holds, each in one place: the v1alpha2 CRD's (run by the API server, and
// by the operator on a stack read through v1alpha1: validation.Validate),
// or, for what the CRD cannot express, the builder's (CheckOverrides, which
// refuses the stack naming it).
func TestCheckOverrides(t *testing.T) {
	cm := corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "x"}}}
	vol := func(name string, src corev1.VolumeSource) corev1.Volume {
		return corev1.Volume{Name: name, VolumeSource: src}
	}
	mount := func(name, path string) corev1.VolumeMount { return corev1.VolumeMount{Name: name, MountPath: path} }
	const crd, builder = "crd", "builder"
	for _, tc := range []struct {
		name    string
		workers *int32
		o       v1alpha2.PodOverrides
		by      string
		want    string
	}{
		{"fine", ptr.To[int32](2), v1alpha2.PodOverrides{Volumes: []corev1.Volume{vol("x", cm)}, VolumeMounts: []corev1.VolumeMount{mount("x", "/opt/x"), mount("data", "/opt/data"), mount("x", "/tmp/x")}}, "", ""},
		{"zero workers", ptr.To[int32](0), v1alpha2.PodOverrides{}, crd, "spec.workload.workers"},
		{"command with workers", ptr.To[int32](2), v1alpha2.PodOverrides{Command: []string{"sh"}}, crd, "cannot be combined with podOverrides.command"},
		{"operator's volume name", nil, v1alpha2.PodOverrides{Volumes: []corev1.Volume{vol("data", cm)}}, crd, "spec.workload.podOverrides.volumes"},
		{"hostPath", nil, v1alpha2.PodOverrides{Volumes: []corev1.Volume{vol("h", corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}})}}, crd, "restricted pod security"},
		{"over the config", nil, v1alpha2.PodOverrides{Volumes: []corev1.Volume{vol("x", cm)}, VolumeMounts: []corev1.VolumeMount{mount("x", "/etc/llama-stack/config")}}, crd, "spec.workload.podOverrides.volumeMounts"},
		{"under the state", nil, v1alpha2.PodOverrides{Volumes: []corev1.Volume{vol("x", cm)}, VolumeMounts: []corev1.VolumeMount{mount("x", "/var/lib/llama-stack/models")}}, crd, "spec.workload.podOverrides.volumeMounts"},
		{"over home", nil, v1alpha2.PodOverrides{Volumes: []corev1.Volume{vol("x", cm)}, VolumeMounts: []corev1.VolumeMount{mount("x", "/tmp")}}, crd, "spec.workload.podOverrides.volumeMounts"},
		{"unknown volume", nil, v1alpha2.PodOverrides{VolumeMounts: []corev1.VolumeMount{mount("nope", "/opt/x")}}, builder, `names volume "nope"`},
		{"unclean path", nil, v1alpha2.PodOverrides{Volumes: []corev1.Volume{vol("x", cm)}, VolumeMounts: []corev1.VolumeMount{mount("x", "/var/lib/x/../llama-stack")}}, builder, "clean path"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := []testutil.Option{testutil.WithPodOverrides(tc.o)}
			if tc.workers != nil {
				opts = append(opts, testutil.WithWorkers(*tc.workers))
			}
			stack := testutil.Hub(testutil.Stack("s", opts...))
			refusedByCRD := validation.Validate(stack).ToAggregate()
			switch tc.by {
			case "":
				require.NoError(t, refusedByCRD)
				require.NoError(t, server.CheckOverrides(&tc.o))
			case crd:
				require.ErrorContains(t, refusedByCRD, tc.want)
			case builder:
				require.NoError(t, refusedByCRD, "a rule the CRD has is not the builder's")
				_, err := server.Deployment(stack, inputs())
				require.ErrorContains(t, err, "InferenceStack default/s: ")
				require.ErrorContains(t, err, tc.want)
			}
		})
	}
}

// convertInto reads an apply configuration into its API type.
func convertInto(in any, out any) error {
	data, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, out)
}

// TestServerFollowsTheLine: the server container runs the line's command
// (`ogx stack run` at 0.8.0) and carries the line's config-folder and port
// variables (OGX_CONFIG_DIR, OGX_PORT at 0.8.0, which reads no
// LLAMA_STACK_* variable), the folder on the state volume: with the old
// names an OGX server would keep its state in ~/.ogx on the emptyDir.
func TestServerFollowsTheLine(t *testing.T) {
	tests := []struct {
		version               string
		command               []string
		configDirEnv, portEnv string
		configDir             string
	}{
		{version: "0.3.0", command: []string{"llama", "stack", "run"}, configDirEnv: "LLAMA_STACK_CONFIG_DIR", portEnv: "LLAMA_STACK_PORT",
			configDir: runconfig.DataDir + "/.llama"},
		{version: "0.7.1", command: []string{"llama", "stack", "run"}, configDirEnv: "LLAMA_STACK_CONFIG_DIR", portEnv: "LLAMA_STACK_PORT",
			configDir: runconfig.DataDir + "/.llama"},
		{version: "0.8.0", command: []string{"ogx", "stack", "run"}, configDirEnv: "OGX_CONFIG_DIR", portEnv: "OGX_PORT",
			configDir: runconfig.DataDir + "/.ogx"},
	}
	for _, tc := range tests {
		t.Run(tc.version, func(t *testing.T) {
			stack := testutil.Hub(testutil.Stack("s"))
			_, c := serverContainer(t, stack, generated(t, stack, tc.version))
			require.Equal(t, append(tc.command, server.ConfigPath), c.Command)
			dir, literal := envOf(c)(tc.configDirEnv)
			require.True(t, literal)
			require.Equal(t, tc.configDir, dir)
			port, _ := envOf(c)(tc.portEnv)
			require.Equal(t, strconv.Itoa(int(runconfig.ServerPort)), port)
			for _, e := range c.Env {
				if e.Name != tc.configDirEnv && e.Name != tc.portEnv {
					require.False(t, strings.HasSuffix(e.Name, "_CONFIG_DIR") || strings.HasSuffix(e.Name, "_PORT") && e.Name != "POSTGRES_PORT",
						"%s is another line's variable", e.Name)
				}
			}
		})
	}
}
