//go:build e2e

package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	"github.com/inferencestack/inferencestack/operator/runconfig"
)

// stateKept: on every line, a starter stack with a state volume (a
// PersistentVolumeClaim the test binds to a local PersistentVolume of the
// node: there is no provisioner), Ready on the node, is given state
// through the server's own API: a model registered, a prompt saved and,
// on 0.3, a conversation started. Its server pod is deleted; once the new
// pod is Ready, the new server has read it all back from its stores.
// The stand-in keeps each store where the real server keeps its SQLite
// file (the registry and prompts store named by the run config or, for
// 0.2's prompts, $LLAMA_STACK_CONFIG_DIR): a store the generator left on
// the pod's emptyDir loses its state here.
func stateKept(t *testing.T, installs []*install) {
	var wg sync.WaitGroup
	for _, in := range installs {
		wg.Go(func() {
			t.Run(in.pin.LlamaStackVersion, func(t *testing.T) { stateKeptOn(t, in) })
		})
	}
	wg.Wait()
}

func stateKeptOn(t *testing.T, in *install) {
	ctx := context.Background()
	ns := "state-" + in.major
	restrictedNamespace(t, ns)
	s := sample(t, "starter")
	s.Name, s.Namespace = "state", ns
	s.Spec.Workload = &v1alpha1.WorkloadSpec{
		StateVolume: &v1alpha1.StateVolumeSpec{},
		Resources:   smallResources(),
	}
	in.label(s)
	references(t, s, "", nil)
	volumes(t, s)
	start := time.Now()
	require.NoError(t, kube.Create(ctx, s))
	waitStack(t, s, readyTimeout, "Ready", isReady)
	t.Logf("stack %s/%s Ready in %s", ns, s.Name, time.Since(start).Round(100*time.Millisecond))

	pod := serverPod(t, s)
	api := stackAPI{t: t, base: fmt.Sprintf("http://%s:%d", pod.Status.PodIP, runconfig.ServerPort)}
	var stores []struct {
		Store, Type, Path string
		Persisted         bool
	}
	api.do("GET", "/standin/v1/stores", nil, &stores)
	require.NotEmpty(t, stores)
	for _, st := range stores {
		require.True(t, st.Persisted, "the %s store is of type %s: the stand-in keeps only SQLite stores", st.Store, st.Type)
		t.Logf("the %s store: %s", st.Store, st.Path)
	}

	var model struct{ Identifier string }
	api.do("POST", "/v1/models", map[string]any{"model_id": "state-test", "provider_id": "ollama"}, &model)
	require.Equal(t, "ollama/state-test", model.Identifier)
	var saved statePrompt
	api.do("POST", "/v1/prompts", map[string]any{"prompt": "Hello {{ name }}", "variables": []string{"name"}}, &saved)
	require.NotEmpty(t, saved.PromptID)
	var conv struct {
		ID       string            `json:"id"`
		Metadata map[string]string `json:"metadata"`
	}
	line03 := !strings.HasPrefix(in.pin.LlamaStackVersion, "0.2.")
	if line03 {
		api.do("POST", "/v1/conversations", map[string]any{"metadata": map[string]string{"test": "state"}}, &conv)
		require.NotEmpty(t, conv.ID)
	}

	require.NoError(t, node.Env.Client.Delete(ctx, &pod))
	now := recovered(t, s, func(p *corev1.Pod) bool { return p.UID != pod.UID })
	api.base = fmt.Sprintf("http://%s:%d", now.Status.PodIP, runconfig.ServerPort)

	var models struct{ Data []struct{ Identifier string } }
	api.do("GET", "/v1/models", nil, &models)
	var ids []string
	for _, m := range models.Data {
		ids = append(ids, m.Identifier)
	}
	require.Contains(t, ids, "ollama/state-test", "the model registered before the pod was deleted")
	var prompts struct{ Data []statePrompt }
	api.do("GET", "/v1/prompts", nil, &prompts)
	require.Contains(t, prompts.Data, saved, "the prompt saved before the pod was deleted")
	if line03 {
		var got struct {
			ID       string            `json:"id"`
			Metadata map[string]string `json:"metadata"`
		}
		api.do("GET", "/v1/conversations/"+conv.ID, nil, &got)
		require.Equal(t, conv, got, "the conversation started before the pod was deleted")
	}
	t.Logf("new server pod %s read back model %s, prompt %s%s", now.Name, model.Identifier, saved.PromptID,
		map[bool]string{true: ", conversation " + conv.ID}[line03])
	deleteStack(t, s)
}

// stackAPI calls a stack's server from inside the node.
type stackAPI struct {
	t    *testing.T
	base string
}

// do sends body as JSON and decodes the 200 answer into out; any other
// answer fails the test with it.
func (a stackAPI) do(method, path string, body, out any) {
	a.t.Helper()
	var in io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		require.NoError(a.t, err)
		in = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, a.base+path, in)
	require.NoError(a.t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := node.HTTPClient().Do(req)
	require.NoError(a.t, err, "%s %s", method, a.base+path)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(a.t, err)
	require.Equal(a.t, http.StatusOK, resp.StatusCode, "%s %s: %s", method, a.base+path, data)
	require.NoError(a.t, json.Unmarshal(data, out), "%s %s: %s", method, path, data)
}
