//go:build e2e

package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/test/olm"
)

// The test-only operator release beside release 4.0.0 on its line
// (olm.Release.Fixtures: 4.0.0's input with only its version changed), for
// the hand-over between two majors of one line.
const (
	sameLineFrom    = "4.0.0"
	sameLineFixture = "5.0.0"
)

// movesAcrossLines: the stack of a user who follows upstream from Llama
// Stack 0.3.0 to 0.7.1 to OGX 0.8.0, moving it from major 2 to 3 to 4 by
// its label. The CRD package moves to 2.x (it serves v1alpha2, which
// majors 3 and 4 read, through its conversion webhook) and OLM installs
// majors 3 and 4 beside 1 and 2 from the release's catalog. A starter
// stack with a state volume is Ready on major 2; on each line the test
// writes state through the server's own API (a model registered, a prompt
// saved, a conversation started, a chat completion kept in the history
// table), moves the stack to the next major, and reads everything written
// so far back from the next line's server. The stand-in server enforces
// each line's start and state contract as derived from upstream at its tag
// (test/standin/llamastack: the stores where the run config puts them,
// 0.3.0's hard-coded history table, 0.7.1's table_name, 0.8's OGX_*
// environment): a run config that points the new line at other tables or
// files reads empty and fails here. On 0.7.1 a client also registers a
// dataset through the API, which OGX 0.8 has no place for: the move to
// major 4 is refused naming it, the old server answering every poll
// meanwhile, and goes on once spec.lineMove accepts exactly the losses the
// refusal names. A client polls /v1/health and /v1/models through the
// Service during each move; the downtime of each is logged
// (docs/moving-between-lines.md records the figures). Last, major 5 (a
// test-only release of 4.0.0's line, OGX 0.8.0) is installed and the
// stack is relabelled from 4 to 5: the same line, so the hand-over is
// live: major 5 reconciles it (its release in the status) without writing
// anything the server runs (the Deployment keeps its generation, the same
// pod serves), no poll fails, and the state reads back.
func movesAcrossLines(t *testing.T, installs []*install, crds *unstructured.Unstructured, dir string, digests map[string]string, images standIns) {
	ctx := context.Background()
	start := time.Now()
	// 1.0.0 -> 2.1.0 along the catalog's bridge (through 2.0.0, OLM v1
	// stays at 1.0.0: channels/inferencestack-crds.release.yaml).
	upgradeCRDs(t, crds, "2.1.0")
	webhookPod(t)
	t.Logf("CRD package 2.1.0 (serves v1alpha2 through its webhook) in %s", time.Since(start).Round(100*time.Millisecond))
	for _, major := range []string{"3", "4"} {
		objs, operator := majorSamples(t, major)
		apply(t, objs...)
		_, err := cluster.WaitCondition(ctx, operator, olm.TypeInstalled, installTimeout)
		require.NoError(t, err)
		installs = append(installs, installed(t, operator, dir, digests, images))
	}
	t.Logf("majors 3 and 4 Installed beside 1 and 2 %s after the start", time.Since(start).Round(100*time.Millisecond))
	byMajor := map[string]*install{}
	for _, in := range installs {
		byMajor[in.major] = in
	}

	from := byMajor["2"]
	s, api := stackWithState(t, "moves", from)

	var state stackState
	state.write(t, api, from.pin.LlamaStackVersion)
	for _, major := range []string{"3", "4"} {
		to := byMajor[major]
		require.NotNil(t, to, "no major %s installed", major)
		p := &poller{base: api.base}
		stop := p.start()
		moved := time.Now()
		update(t, s, func(s *v1alpha1.InferenceStack) { s.Labels[v1alpha2.LabelOperatorMajor] = to.major })
		if losses := state.lost(to.pin.LlamaStackVersion); len(losses) > 0 {
			// The move waits for consent, naming each loss; the old server
			// keeps serving meanwhile.
			refused := waitStack(t, s, readyTimeout, "refused (LineMoveLosesResources)", func(s *v1alpha1.InferenceStack) bool {
				c := meta.FindStatusCondition(s.Status.Conditions, v1alpha2.TypeDegraded)
				return c != nil && c.Reason == v1alpha2.ReasonLineMoveLosesResources
			})
			c := meta.FindStatusCondition(refused.Status.Conditions, v1alpha2.TypeDegraded)
			t.Logf("move to %s refused: %s", to.pin.LlamaStackVersion, c.Message)
			named := acceptLossesIn(t, c.Message)
			for _, l := range losses {
				require.Contains(t, named, l, "the refusal names what a client registered through the old server's API")
			}
			var v struct{ Version string }
			require.NoError(t, getJSON(api.base+"/v1/version", &v))
			require.Equal(t, from.pin.LlamaStackVersion, v.Version, "the old server serves while the move is refused")
			polls, failed, _ := p.summary()
			require.Zero(t, failed, "%d of %d polls failed while the move was refused", failed, polls)
			accept, err := json.Marshal(map[string]any{"lineMove": map[string]any{"line": lineOf(to.pin.LlamaStackVersion), "acceptLosses": named}})
			require.NoError(t, err)
			moved = time.Now()
			update(t, s, func(s *v1alpha1.InferenceStack) {
				if s.Annotations == nil {
					s.Annotations = map[string]string{}
				}
				s.Annotations[v1alpha2.SpecAnnotation] = string(accept)
			})
		}
		got := onNewLine(t, s, api, p, stop, from, to, moved)
		require.Equal(t, "0.3", got.Status.StateLine, "status.stateLine: the line that wrote the state")
		state.readBack(t, api, to.pin.LlamaStackVersion)
		if major != "4" {
			state.write(t, api, to.pin.LlamaStackVersion)
		}
		from = to
	}

	// The same line, another major: live.
	objs, operator := fixtureMajorSamples(t, "4", "5")
	apply(t, objs...)
	_, err := cluster.WaitCondition(ctx, operator, olm.TypeInstalled, installTimeout)
	require.NoError(t, err)
	to := installed(t, operator, dir, digests, images)
	require.Equal(t, from.pin.LlamaStackVersion, to.pin.LlamaStackVersion, "the fixture major %s serves the line of %s", to.major, from.major)
	dep := serverDeployment(t, s)
	pods := stackPods(t, s)
	p := &poller{base: api.base}
	stop := p.start()
	moved := time.Now()
	update(t, s, func(s *v1alpha1.InferenceStack) { s.Labels[v1alpha2.LabelOperatorMajor] = to.major })
	waitStack(t, s, readyTimeout, "reconciled by major "+to.major, func(s *v1alpha1.InferenceStack) bool {
		rd := s.Status.ResolvedDistribution
		return isReady(s) && rd != nil && rd.OperatorVersion == to.pin.OperatorVersion
	})
	took := time.Since(moved)
	// A few polls more after the hand-over.
	require.Eventually(t, func() bool { polls, _, _ := p.summary(); return polls >= 20 }, time.Minute, 100*time.Millisecond)
	stop()
	polls, failed, _ := p.summary()
	t.Logf("hand-over %s -> %s on %s: reconciled by %s %s after the relabel; %d polls, %d failed", from.major, to.major,
		to.pin.LlamaStackVersion, to.major, took.Round(100*time.Millisecond), polls, failed)
	require.Zero(t, failed, "%d of %d polls failed during the hand-over between two majors of one line", failed, polls)
	again := serverDeployment(t, s)
	require.Equal(t, dep.Generation, again.Generation, "the server Deployment's generation after the hand-over: it was rolled out")
	require.Equal(t, podUIDs(pods), podUIDs(stackPods(t, s)), "the server's pods after the hand-over")
	state.readBack(t, api, to.pin.LlamaStackVersion)
	deleteStack(t, s)
}

// podUIDs are the UIDs of pods, sorted.
func podUIDs(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, string(p.UID))
	}
	slices.Sort(out)
	return out
}

// fixtureMajorSamples are major from's install manifests
// (operator/config/olm/v<from>) made into those of the test-only major to:
// its namespace, installer binding and ClusterExtension named and
// versioned for it.
func fixtureMajorSamples(t *testing.T, from, to string) (objs []*unstructured.Unstructured, operator *unstructured.Unstructured) {
	t.Helper()
	objs, _ = majorSamples(t, from)
	for i, o := range objs {
		data, err := json.Marshal(o.Object)
		require.NoError(t, err)
		text := strings.ReplaceAll(string(data), "-v"+from+`"`, "-v"+to+`"`)
		text = strings.ReplaceAll(text, `"version":"`+from+`.x"`, `"version":"`+to+`.x"`)
		objs[i] = &unstructured.Unstructured{}
		require.NoError(t, json.Unmarshal([]byte(text), &objs[i].Object))
		if objs[i].GetKind() == "ClusterExtension" {
			operator = objs[i]
		}
	}
	require.Equal(t, "inferencestack-operator-v"+to, operator.GetName())
	// The installer ClusterRole (installer-rbac.yaml) lets OLM set its
	// finalizer on the released majors' extensions only, by name: the
	// fixture's gets a role of its own for that one right.
	ns, _, _ := unstructured.NestedString(operator.Object, "spec", "namespace")
	sa, _, _ := unstructured.NestedString(operator.Object, "spec", "serviceAccount", "name")
	role := "inferencestack-installer-finalizers-v" + to
	for _, o := range []map[string]any{{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": map[string]any{"name": role},
		"rules": []any{map[string]any{"apiGroups": []any{"olm.operatorframework.io"}, "resources": []any{"clusterextensions/finalizers"},
			"verbs": []any{"update"}, "resourceNames": []any{operator.GetName()}}},
	}, {
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": map[string]any{"name": role},
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
		"subjects": []any{map[string]any{"kind": "ServiceAccount", "name": sa, "namespace": ns}},
	}} {
		// Before the ClusterExtension, which apply deletes first.
		objs = slices.Insert(objs, len(objs)-1, &unstructured.Unstructured{Object: o})
	}
	return objs, operator
}

// upgradeCRDs moves the CRD package's ClusterExtension to version and
// waits until OLM has installed it.
func upgradeCRDs(t *testing.T, crds *unstructured.Unstructured, version string) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, node.Env.Client.Get(ctx, client.ObjectKeyFromObject(crds), crds))
	require.NoError(t, unstructured.SetNestedField(crds.Object, version, "spec", "source", "catalog", "version"))
	require.NoError(t, node.Env.Client.Update(ctx, crds))
	deadline := time.Now().Add(installTimeout)
	for {
		require.NoError(t, node.Env.Client.Get(ctx, client.ObjectKeyFromObject(crds), crds))
		v, _, _ := unstructured.NestedString(crds.Object, "status", "install", "bundle", "version")
		conds, _, _ := unstructured.NestedSlice(crds.Object, "status", "conditions")
		progressed := slices.ContainsFunc(conds, func(c any) bool {
			m, _ := c.(map[string]any)
			g, _ := m["observedGeneration"].(int64)
			return m["type"] == olm.TypeProgressing && m["reason"] == olm.ReasonSucceeded && g == crds.GetGeneration()
		})
		if v == version && progressed {
			return
		}
		require.True(t, time.Now().Before(deadline), "the CRD package upgraded to %s: status %v", version, crds.Object["status"])
		time.Sleep(250 * time.Millisecond)
	}
}

// stackWithState creates a starter stack with a state volume on in's
// major, named name in a namespace of that name enforcing the restricted
// Pod Security Standard, and returns it, Ready, and its server through its
// Service.
func stackWithState(t *testing.T, name string, in *install) (*v1alpha1.InferenceStack, stackAPI) {
	t.Helper()
	restrictedNamespace(t, name)
	s := sample(t, "starter")
	s.Name, s.Namespace = name, name
	s.Spec.Workload = &v1alpha1.WorkloadSpec{StateVolume: &v1alpha1.StateVolumeSpec{}, Resources: smallResources()}
	in.label(s)
	references(t, s, "", nil)
	volumes(t, s)
	require.NoError(t, kube.Create(context.Background(), s))
	waitStack(t, s, readyTimeout, "Ready", isReady)
	return s, serviceAPI(t, s)
}

// serviceAPI is the stack's server through its Service, once kube-proxy
// has programmed the Service's address (Ready is the pod's readiness).
func serviceAPI(t *testing.T, s *v1alpha1.InferenceStack) stackAPI {
	t.Helper()
	svc := &corev1.Service{}
	require.NoError(t, kube.Get(context.Background(), client.ObjectKey{Namespace: s.Namespace, Name: s.Name}, svc))
	api := stackAPI{t: t, base: fmt.Sprintf("http://%s:%d", svc.Spec.ClusterIP, svc.Spec.Ports[0].Port)}
	require.Eventually(t, func() bool {
		var v struct{ Version string }
		return getJSON(api.base+"/v1/version", &v) == nil
	}, readyTimeout, 100*time.Millisecond, "the Service %s/%s never reached its server", s.Namespace, s.Name)
	return api
}

// lineOf is the line ("0.7") of a Llama Stack version ("0.7.1").
func lineOf(version string) string {
	parts := strings.SplitN(version, ".", 3)
	return parts[0] + "." + parts[1]
}

// acceptLossesIn is the list a LineMoveLosesResources message offers to
// accept (`acceptLosses: ["a", "b"]`).
func acceptLossesIn(t *testing.T, message string) []string {
	t.Helper()
	m := regexp.MustCompile(`acceptLosses: \[([^\]]*)\]`).FindStringSubmatch(message)
	require.NotNil(t, m, "the refusal offers no acceptLosses: %s", message)
	var out []string
	require.NoError(t, json.Unmarshal([]byte("["+m[1]+"]"), &out), "the refusal's acceptLosses: %s", m[1])
	return out
}

// stackState is what a test wrote through a stack's server API, line by
// line.
type stackState struct {
	models        []string
	prompts       []statePrompt
	conversations []stateConversation
	completions   []string
	// datasets are registered through the API on a line that has them.
	datasets []string
}

// statePrompt is a prompt as the server's API answers it.
type statePrompt struct {
	PromptID  string   `json:"prompt_id"`
	Prompt    string   `json:"prompt"`
	Version   int      `json:"version"`
	Variables []string `json:"variables"`
}

type stateConversation struct {
	ID       string            `json:"id"`
	Metadata map[string]string `json:"metadata"`
}

// write registers a model, saves a prompt, starts a conversation and keeps
// a chat completion in the history through the server of version, and on
// a line with datasets that a later one drops (0.7.1) registers a dataset
// as a client would.
func (st *stackState) write(t *testing.T, api stackAPI, version string) {
	t.Helper()
	var model struct{ Identifier string }
	api.do("POST", "/v1/models", map[string]any{"model_id": "moves-" + version, "provider_id": "ollama"}, &model)
	require.NotEmpty(t, model.Identifier)
	st.models = append(st.models, model.Identifier)
	var p statePrompt
	api.do("POST", "/v1/prompts", map[string]any{"prompt": "On " + version + ", hello {{ name }}", "variables": []string{"name"}}, &p)
	require.NotEmpty(t, p.PromptID)
	st.prompts = append(st.prompts, p)
	var c stateConversation
	api.do("POST", "/v1/conversations", map[string]any{"metadata": map[string]string{"line": version}}, &c)
	require.NotEmpty(t, c.ID)
	st.conversations = append(st.conversations, c)
	var chat struct{ ID string }
	api.do("POST", "/v1/chat/completions", map[string]any{"model": model.Identifier,
		"messages": []map[string]any{{"role": "user", "content": "Which line is this? " + version}}}, &chat)
	require.NotEmpty(t, chat.ID)
	st.completions = append(st.completions, chat.ID)
	if lineOf(version) == "0.7" {
		id := "moves-uploaded"
		var d map[string]any
		api.do("POST", "/standin/v1/registry/dataset", map[string]any{"identifier": id}, &d)
		st.datasets = append(st.datasets, "dataset/"+id)
	}
	t.Logf("on %s: model %s, prompt %s, conversation %s, chat completion %s%s", version, model.Identifier, p.PromptID, c.ID, chat.ID,
		map[bool]string{true: ", dataset " + strings.Join(st.datasets, ", ")}[len(st.datasets) > 0])
}

// lost are the losses a move to version must name: the datasets clients
// registered, when the line has no datasets (OGX 0.8).
func (st *stackState) lost(version string) []string {
	if lineOf(version) == "0.8" {
		return st.datasets
	}
	return nil
}

// readBack reads everything written so far from the server of version.
func (st *stackState) readBack(t *testing.T, api stackAPI, version string) {
	t.Helper()
	var models struct{ Data []struct{ Identifier string } }
	api.do("GET", "/v1/models", nil, &models)
	var ids []string
	for _, m := range models.Data {
		ids = append(ids, m.Identifier)
	}
	for _, m := range st.models {
		require.Contains(t, ids, m, "%s reads the model registered on an earlier line", version)
	}
	var prompts struct{ Data []statePrompt }
	api.do("GET", "/v1/prompts", nil, &prompts)
	for _, p := range st.prompts {
		require.Contains(t, prompts.Data, p, "%s reads the prompt saved on an earlier line", version)
	}
	for _, c := range st.conversations {
		var got stateConversation
		api.do("GET", "/v1/conversations/"+c.ID, nil, &got)
		require.Equal(t, c, got, "%s reads the conversation started on an earlier line", version)
	}
	for _, id := range st.completions {
		var got struct{ ID string }
		api.do("GET", "/v1/chat/completions/"+id, nil, &got)
		require.Equal(t, id, got.ID, "%s reads the chat completion kept on an earlier line", version)
	}
	t.Logf("%s read back %d models, %d prompts, %d conversations, %d chat completions written on earlier lines", version,
		len(st.models), len(st.prompts), len(st.conversations), len(st.completions))
}
