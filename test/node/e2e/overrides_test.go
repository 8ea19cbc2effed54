//go:build e2e

package e2e_test

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/components/server"
	"github.com/inferencestack/inferencestack/operator/runconfig"
	"github.com/inferencestack/inferencestack/test/testutil"
)

// workersAndOverrides: on every line, a starter stack with 2 uvicorn
// workers (v1alpha2's workload.workers, in the spec annotation) and pod
// overrides (a ConfigMap and an emptyDir mounted, uvicorn options as args,
// a termination grace period) runs on the node under the restricted pod
// security standard: its pod, as the kubelet ran it, carries them and
// passes its probes (the stack is Ready); the server (the stand-in,
// which runs only the commands the image runs) says it was started as
// uvicorn with 2 workers and reads the mounted ConfigMap. Changed to a
// command of its own without workers (`llama stack run` with --port), it
// rolls out and is Ready again, started that way.
func workersAndOverrides(t *testing.T, installs []*install) {
	var wg sync.WaitGroup
	for _, in := range installs {
		wg.Go(func() {
			t.Run(in.pin.LlamaStackVersion, func(t *testing.T) { workersAndOverridesOn(t, in) })
		})
	}
	wg.Wait()
}

func workersAndOverridesOn(t *testing.T, in *install) {
	ctx := context.Background()
	ns := "overrides-" + in.major
	restrictedNamespace(t, ns)
	require.NoError(t, node.Env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prompts"},
		Data: map[string]string{"system.json": `{"greeting":"hello from a ConfigMap"}`}}))
	overrides := v1alpha2.PodOverrides{
		Volumes: []corev1.Volume{
			{Name: "prompts", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "prompts"}}}},
			{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		},
		VolumeMounts: []corev1.VolumeMount{
			{Name: "prompts", MountPath: "/opt/prompts", ReadOnly: true},
			{Name: "scratch", MountPath: "/scratch"},
		},
		Args:                          []string{"--timeout-keep-alive", "30"},
		TerminationGracePeriodSeconds: ptr.To[int64](7),
	}
	s := sample(t, "starter")
	s.Name, s.Namespace = "overrides", ns
	s.Spec.Workload = &v1alpha1.WorkloadSpec{Resources: smallResources()}
	testutil.WithWorkers(2)(s)
	testutil.WithPodOverrides(overrides)(s)
	in.label(s)
	references(t, s, "", nil)
	start := time.Now()
	require.NoError(t, kube.Create(ctx, s))
	waitStack(t, s, readyTimeout, "Ready", isReady)
	t.Logf("stack %s/%s with 2 workers and pod overrides Ready in %s", ns, s.Name, time.Since(start).Round(100*time.Millisecond))

	pod := serverPod(t, s)
	require.True(t, podReady(&pod), "the server pod passes its readiness probe")
	require.Equal(t, int64(7), *pod.Spec.TerminationGracePeriodSeconds)
	c := pod.Spec.Containers[0]
	require.Equal(t, "uvicorn", c.Command[0], "%q", c.Command)
	require.Equal(t, overrides.Args, c.Args)
	for _, v := range []string{"prompts", "scratch"} {
		require.True(t, slices.ContainsFunc(pod.Spec.Volumes, func(x corev1.Volume) bool { return x.Name == v }), "volume %s", v)
	}
	api := stackAPI{t: t, base: fmt.Sprintf("http://%s:%d", pod.Status.PodIP, runconfig.ServerPort)}
	var process struct {
		Form    string `json:"form"`
		Workers int    `json:"workers"`
	}
	api.do("GET", "/standin/v1/process", nil, &process)
	require.Equal(t, "uvicorn", process.Form)
	require.Equal(t, 2, process.Workers)
	var file struct{ Greeting string }
	api.do("GET", "/standin/v1/file?path="+url.QueryEscape("/opt/prompts/system.json"), nil, &file)
	require.Equal(t, "hello from a ConfigMap", file.Greeting, "the server reads the mounted ConfigMap")

	// A command of its own, no workers: `llama stack run` with --port.
	update(t, s, func(st *v1alpha1.InferenceStack) {
		o := overrides
		o.Command = []string{"llama", "stack", "run", server.ConfigPath}
		o.Args = []string{"--port", fmt.Sprint(runconfig.ServerPort)}
		delete(st.Annotations, v1alpha2.SpecAnnotation)
		testutil.WithPodOverrides(o)(st)
	})
	now := recovered(t, s, func(p *corev1.Pod) bool { return p.UID != pod.UID })
	require.Equal(t, "llama", now.Spec.Containers[0].Command[0])
	api.base = fmt.Sprintf("http://%s:%d", now.Status.PodIP, runconfig.ServerPort)
	api.do("GET", "/standin/v1/process", nil, &process)
	require.Equal(t, "llama stack run", process.Form)
	require.Equal(t, 1, process.Workers)
	t.Logf("rolled out to its own command: pod %s Ready", now.Name)
	deleteStack(t, s)
}
