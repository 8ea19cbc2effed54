//go:build e2e

package e2e_test

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/inferencestack/inferencestack/internal/image"
	"github.com/inferencestack/inferencestack/internal/release"
	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/components"
	cachecomp "github.com/inferencestack/inferencestack/operator/components/cache"
	"github.com/inferencestack/inferencestack/operator/components/config"
	"github.com/inferencestack/inferencestack/operator/components/server"
	"github.com/inferencestack/inferencestack/operator/runconfig"
	"github.com/inferencestack/inferencestack/operator/runconfig/stackconfig"
	testnode "github.com/inferencestack/inferencestack/test/node"
	"github.com/inferencestack/inferencestack/test/olm"
	"github.com/inferencestack/inferencestack/test/testenv"
	"github.com/inferencestack/inferencestack/test/testutil"
)

// The test-only stand-in images (test/standin), named as such: the Llama
// Stack server of a line (tagged with its Llama Stack version) and
// PostgreSQL. Upstream's images cannot be pulled here.
const (
	llamaStandIn    = "registry.test/standin/llama-stack"
	postgresStandIn = "registry.test/standin/postgres:16.4"
)

// readyTimeout bounds a stack's way to Ready, waiting for room on the node
// included (the stacks of a run together request more CPU than it has).
const readyTimeout = 5 * time.Minute

// standIns are the pushed stand-in images.
type standIns struct {
	// llama is the Llama Stack stand-in of each line, by Llama Stack
	// version, by digest.
	llama map[string]string
	// postgres is the PostgreSQL stand-in by digest.
	postgres string
	// digests are their digests by tag reference, for the release's lock.
	digests map[string]string
}

// pin makes a release input pin the stand-ins: the Llama Stack stand-in of
// its line for every distribution, the PostgreSQL stand-in for the cache.
func (s standIns) pin(in *release.Input) {
	for name := range in.Operands {
		in.Operands[name] = llamaStandIn + ":" + in.LlamaStackVersion
	}
	in.CacheImage = postgresStandIn
}

// pushStandIns builds the stand-ins and pushes them: the Llama Stack one
// once per line (LLAMA_STACK_STANDIN_VERSION in its image's environment)
// at /usr/local/bin/llama, where the operator's `llama stack run` finds it
// (/usr/local/bin/ogx from OGX 0.8: `ogx stack run`),
// and /usr/local/bin/uvicorn (its command with workload.workers);
// the PostgreSQL one as the image's entrypoint, also called pg_isready (the
// cache's probes).
func pushStandIns(t *testing.T, lines []string) standIns {
	t.Helper()
	ctx := context.Background()
	out := standIns{llama: map[string]string{}, digests: map[string]string{}}
	llama := filepath.Join(t.TempDir(), "llama")
	require.NoError(t, testenv.BuildStatic("./test/standin/llamastack", llama))
	for _, v := range slices.Compact(slices.Sorted(slices.Values(lines))) {
		ref := llamaStandIn + ":" + v
		// The line's program: llama, ogx from OGX 0.8 (whose image holds no llama).
		line, err := stackconfig.LineOf(v)
		require.NoError(t, err)
		pushed, err := node.PushBinary(ctx, llama, image.BinaryOptions{Path: "/usr/local/bin/" + line.Program(),
			Aliases: []string{"/usr/local/bin/uvicorn"}, Env: []string{"LLAMA_STACK_STANDIN_VERSION=" + v}}, ref)
		require.NoError(t, err)
		out.llama[v], out.digests[ref] = pushed, digestOf(pushed)
	}
	postgres := filepath.Join(t.TempDir(), "postgres")
	require.NoError(t, testenv.BuildStatic("./test/standin/postgres", postgres))
	pushed, err := node.PushBinary(ctx, postgres, image.BinaryOptions{Path: "/usr/local/bin/postgres",
		Aliases: []string{"/usr/local/bin/pg_isready"}}, postgresStandIn)
	require.NoError(t, err)
	out.postgres, out.digests[postgresStandIn] = pushed, digestOf(pushed)
	return out
}

// imagePullFailure: a stack whose server image the registry does not have
// (a custom image) becomes Degraded with reason ImagePullFailed, naming the
// image and the kubelet's pull error, instead of staying Deploying; pointed
// at an image that exists, it becomes Ready.
func imagePullFailure(t *testing.T, in *install) {
	ctx := context.Background()
	const ns = "pull"
	restrictedNamespace(t, ns)
	missing := "registry.test/standin/no-such-image:" + in.pin.LlamaStackVersion
	s := sample(t, "starter")
	s.Name, s.Namespace = "missing", ns
	s.Spec.Distribution = v1alpha1.DistributionSpec{Image: missing}
	in.label(s)
	require.NoError(t, kube.Create(ctx, s))
	c := waitDegraded(t, s, v1alpha2.ReasonImagePullFailed)
	require.Contains(t, c.Message, "cannot pull image "+missing+": ")
	require.Contains(t, c.Message, "not found", "the kubelet's pull error")

	start := time.Now()
	update(t, s, func(st *v1alpha1.InferenceStack) { st.Spec.Distribution.Image = in.standIn })
	stack := waitStack(t, s, podTimeout, "Ready", isReady)
	t.Logf("stack %s Ready %s after its image was fixed; Degraded: %s", s.Name, time.Since(start).Round(100*time.Millisecond),
		meta.FindStatusCondition(stack.Status.Conditions, v1alpha2.TypeDegraded).Reason)
	deleteStack(t, s)
}

// crashLoop: a stack whose custom image is not a Llama Stack server (the
// PostgreSQL stand-in: it has no `llama` to run, so every start fails)
// becomes Degraded with reason CrashLooping, naming the container and its
// exit code and the runtime's error, instead of staying Deploying; pointed
// at a server image, it becomes Ready. (A run config that would make the
// server exit at start is refused before any pod runs.)
func crashLoop(t *testing.T, in *install, images standIns) {
	ctx := context.Background()
	const ns = "crash"
	restrictedNamespace(t, ns)
	s := sample(t, "starter")
	s.Name, s.Namespace = "crash", ns
	s.Spec.Distribution = v1alpha1.DistributionSpec{Image: images.postgres}
	in.label(s)
	require.NoError(t, kube.Create(ctx, s))
	c := waitDegraded(t, s, v1alpha2.ReasonCrashLooping)
	require.Regexp(t, `^container server of pod crash-[a-z0-9]+-[a-z0-9]+ exits with code [1-9][0-9]*`, c.Message)
	require.Contains(t, c.Message, "the kubelet keeps restarting it; `kubectl logs -n crash ")

	start := time.Now()
	update(t, s, func(st *v1alpha1.InferenceStack) { st.Spec.Distribution.Image = in.standIn })
	stack := waitStack(t, s, podTimeout, "Ready", isReady)
	t.Logf("stack %s Ready %s after its image was fixed; Degraded: %s", s.Name, time.Since(start).Round(100*time.Millisecond),
		meta.FindStatusCondition(stack.Status.Conditions, v1alpha2.TypeDegraded).Reason)
	deleteStack(t, s)
}

// waitDegraded waits until s, just created, is Degraded for reason (its
// phase too), logs how long that took and returns the condition.
func waitDegraded(t *testing.T, s *v1alpha1.InferenceStack, reason string) *metav1.Condition {
	t.Helper()
	start := time.Now()
	stack := waitStack(t, s, podTimeout, "Degraded=True reason "+reason, func(st *v1alpha1.InferenceStack) bool {
		c := meta.FindStatusCondition(st.Status.Conditions, v1alpha2.TypeDegraded)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == reason
	})
	c := meta.FindStatusCondition(stack.Status.Conditions, v1alpha2.TypeDegraded)
	t.Logf("stack %s %s in %s: %s", s.Name, stack.Status.Phase, time.Since(start).Round(100*time.Millisecond), c.Message)
	require.Equal(t, v1alpha2.PhaseDegraded, stack.Status.Phase)
	return c
}

// readyStacks: on every line (one per installed major), in a namespace
// enforcing the restricted Pod Security Standard, every sample and the
// variants (kubernetes auth, TLS, mutual TLS) reach Ready through the
// kubelet's probes of the stand-ins, which exit on anything the line's
// server would refuse at start. They run at once: the scheduler holds
// those the node has no room for until others are deleted.
func readyStacks(t *testing.T, installs []*install, s standIns) {
	var wg sync.WaitGroup
	for _, in := range installs {
		ns := "ready-" + in.major
		restrictedNamespace(t, ns)
		certs := newCerts(t, ns)
		runConfig := make(chan string, 1) // the starter's, for the override sample
		for _, stack := range append(samples(t), variants(t)...) {
			stack.Namespace = ns
			if stack.Spec.Distribution.Image != "" {
				// A custom image: the stand-in of the pinned line.
				stack.Spec.Distribution.Image = in.standIn
			}
			in.label(stack)
			wg.Add(1)
			go func() {
				defer wg.Done()
				t.Run(in.pin.LlamaStackVersion+"/"+stack.Name, func(t *testing.T) {
					readyStack(t, in, stack, s, certs, runConfig)
				})
			}()
		}
	}
	wg.Wait()
}

// readyStack creates s with what it references and the volumes its claims
// need, waits until it is Ready with every pod Ready and running the image
// the pin (or the spec) names, and deletes it.
func readyStack(t *testing.T, in *install, s *v1alpha1.InferenceStack, images standIns, certs *certs, runConfig chan string) {
	ctx := context.Background()
	var override string
	if s.Spec.OverrideConfig != nil {
		select {
		case override = <-runConfig:
		case <-time.After(readyTimeout):
			t.Fatal("no run config of the starter sample for the override")
		}
	}
	references(t, s, override, certs)
	volumes(t, s)
	start := time.Now()
	require.NoError(t, kube.Create(ctx, s))
	waitStack(t, s, readyTimeout, "Ready", isReady)
	took := time.Since(start).Round(100 * time.Millisecond)
	wantServer := s.Spec.Distribution.Image
	if wantServer == "" {
		var err error
		wantServer, err = in.pin.Image(runconfig.ImageDistribution(v1alpha2.DistributionName(s.Spec.Distribution.Name)))
		require.NoError(t, err)
	}
	var probes, times []string
	for _, pod := range stackPods(t, s) {
		times = append(times, podTimes(&pod))
		require.True(t, podReady(&pod), "pod %s of Ready stack %s is not Ready", pod.Name, s.Name)
		c := pod.Spec.Containers[0]
		wantDigest := digestOf(in.standIn)
		if pod.Labels[components.LabelComponent] == components.ComponentCache {
			wantDigest = digestOf(images.postgres)
		} else {
			require.Equal(t, wantServer, c.Image, "the server image of %s", s.Name)
			probes = append(probes, probeKind(c.ReadinessProbe))
		}
		require.Contains(t, pod.Status.ContainerStatuses[0].ImageID, wantDigest, "containerd ran another image in pod %s", pod.Name)
	}
	t.Logf("stack %s/%s Ready in %s (server probes %v; %s)", s.Namespace, s.Name, took, probes, strings.Join(times, "; "))
	if s.Name == "starter" {
		cm := &corev1.ConfigMap{}
		require.NoError(t, node.Env.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: config.ConfigMapName(s.Name)}, cm))
		runConfig <- cm.Data[runconfig.ConfigKey]
	}
	deleteStack(t, s)
}

// podTimes says when, after it was created, the pod was scheduled, its
// containers started and it became Ready.
func podTimes(p *corev1.Pod) string {
	at := func(typ corev1.PodConditionType) string {
		for _, c := range p.Status.Conditions {
			if c.Type == typ && c.Status == corev1.ConditionTrue {
				return c.LastTransitionTime.Sub(p.CreationTimestamp.Time).String()
			}
		}
		return "-"
	}
	return fmt.Sprintf("pod %s scheduled +%s, started +%s, Ready +%s", p.Name, at(corev1.PodScheduled),
		at(corev1.PodReadyToStartContainers), at(corev1.PodReady))
}

// probeKind names the kind of a probe: "http", "https" or "tcp".
func probeKind(p *corev1.Probe) string {
	switch {
	case p == nil:
		return "none"
	case p.HTTPGet != nil:
		return strings.ToLower(string(p.HTTPGet.Scheme))
	case p.TCPSocket != nil:
		return "tcp"
	}
	return "other"
}

// samples are the sample InferenceStacks (operator/config/samples).
func samples(t *testing.T) []*v1alpha1.InferenceStack {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "operator", "config", "samples", "inferencestack_v1alpha1_*.yaml"))
	require.NoError(t, err)
	var out []*v1alpha1.InferenceStack
	for _, f := range files {
		objs, err := olm.ReadObjects(f)
		require.NoError(t, err)
		require.Len(t, objs, 1, f)
		s := &v1alpha1.InferenceStack{}
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(objs[0].Object, s))
		out = append(out, s)
	}
	return out
}

// sample is the sample named name.
func sample(t *testing.T, name string) *v1alpha1.InferenceStack {
	t.Helper()
	all := samples(t)
	i := slices.IndexFunc(all, func(s *v1alpha1.InferenceStack) bool { return s.Name == name })
	require.GreaterOrEqual(t, i, 0, "no sample %s", name)
	return all[i]
}

// smallResources are the requests of a test stack that only has to start,
// so that the stacks of the tests running at once fit on the node.
func smallResources() *corev1.ResourceRequirements {
	return &corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi"),
	}}
}

// variants are the starter sample with kubernetes auth, with TLS, and with
// mutual TLS (a client CA), each with small resource requests (they only
// have to start).
func variants(t *testing.T) []*v1alpha1.InferenceStack {
	t.Helper()
	small := smallResources()
	variant := func(name string, change func(*v1alpha1.InferenceStackSpec)) *v1alpha1.InferenceStack {
		s := sample(t, "starter")
		s.Name = name
		s.Spec.Workload = &v1alpha1.WorkloadSpec{Resources: small}
		change(&s.Spec)
		return s
	}
	return []*v1alpha1.InferenceStack{
		variant("auth", func(s *v1alpha1.InferenceStackSpec) {
			s.Auth = &v1alpha1.AuthSpec{Kubernetes: &v1alpha1.KubernetesAuthSpec{}}
		}),
		variant("tls", func(s *v1alpha1.InferenceStackSpec) {
			s.Networking = &v1alpha1.NetworkingSpec{TLS: &v1alpha1.TLSSpec{Enabled: true, SecretName: "tls-cert"}}
		}),
		variant("mtls", func(s *v1alpha1.InferenceStackSpec) {
			s.Networking = &v1alpha1.NetworkingSpec{TLS: &v1alpha1.TLSSpec{Enabled: true, SecretName: "mtls-cert",
				CABundle: &v1alpha1.CABundleSource{ConfigMapName: "client-ca"}}}
		}),
	}
}

// isReady: the stack is Ready at its generation.
func isReady(s *v1alpha1.InferenceStack) bool {
	return s.Status.Phase == v1alpha2.PhaseReady && s.Status.ObservedGeneration == s.Generation
}

// waitStack polls s until done accepts it and returns it; on timeout it
// fails with the stack's status, its pods, their logs and the namespace's
// events.
func waitStack(t *testing.T, s *v1alpha1.InferenceStack, timeout time.Duration, what string, done func(*v1alpha1.InferenceStack) bool) *v1alpha1.InferenceStack {
	t.Helper()
	ctx := context.Background()
	got := &v1alpha1.InferenceStack{}
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if err := kube.Get(ctx, client.ObjectKeyFromObject(s), got); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return done(got), nil
	})
	if err != nil {
		var b strings.Builder
		for _, p := range stackPods(t, s) {
			fmt.Fprintf(&b, "  pod %s: node %q, phase %s, conditions %+v, containers %+v\n", p.Name, p.Spec.NodeName, p.Status.Phase,
				p.Status.Conditions, p.Status.ContainerStatuses)
			for c, log := range node.PodLogs(p.Namespace, p.Name) {
				fmt.Fprintf(&b, "  ---- %s/%s log ----\n%s\n", p.Name, c, testenv.LastLines(log, 20))
			}
		}
		t.Fatalf("InferenceStack %s/%s not %s after %s: phase %s (generation %d, observed %d), conditions %+v\n%s\nevents:\n%s",
			s.Namespace, s.Name, what, timeout, got.Status.Phase, got.Generation, got.Status.ObservedGeneration, got.Status.Conditions,
			b.String(), events(t, s.Namespace, ""))
	}
	return got
}

// stackPods lists the pods of s.
func stackPods(t *testing.T, s *v1alpha1.InferenceStack) []corev1.Pod {
	t.Helper()
	list := &corev1.PodList{}
	require.NoError(t, node.Env.Client.List(context.Background(), list, client.InNamespace(s.Namespace),
		client.MatchingLabels{components.LabelInstance: s.Name, components.LabelManagedBy: components.ManagedBy}))
	return list.Items
}

// update changes s with change until the write does not conflict.
func update(t *testing.T, s *v1alpha1.InferenceStack, change func(*v1alpha1.InferenceStack)) {
	t.Helper()
	ctx := context.Background()
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got := &v1alpha1.InferenceStack{}
		if err := kube.Get(ctx, client.ObjectKeyFromObject(s), got); err != nil {
			return false, err
		}
		change(got)
		if err := kube.Update(ctx, got); apierrors.IsConflict(err) {
			return false, nil
		} else if err != nil {
			return false, err
		}
		return true, nil
	})
	require.NoError(t, err, "updating InferenceStack %s", s.Name)
}

// prepareNode gives the node what the samples ask of a node: their node
// selector labels, and their extended resources (a GPU) advertised in its
// capacity, as a device plugin would (there is no device; the stand-in
// needs none).
func prepareNode(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	n := &corev1.Node{}
	require.NoError(t, node.Env.Client.Get(ctx, client.ObjectKey{Name: testnode.Name}, n))
	before := n.DeepCopy()
	for _, s := range samples(t) {
		w := s.Spec.Workload
		if w == nil {
			continue
		}
		maps.Copy(n.Labels, w.NodeSelector)
		if w.Resources == nil {
			continue
		}
		for name, q := range w.Resources.Limits {
			if have := n.Status.Capacity[name]; strings.Contains(string(name), "/") && have.Cmp(q) < 0 {
				n.Status.Capacity[name] = q
			}
		}
	}
	require.NoError(t, node.Env.Client.Patch(ctx, n.DeepCopy(), client.MergeFrom(before)))
	require.NoError(t, node.Env.Client.Status().Patch(ctx, n, client.MergeFrom(before)))
	// The kubelet puts the extended resources into allocatable.
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got := &corev1.Node{}
		if err := node.Env.Client.Get(ctx, client.ObjectKey{Name: testnode.Name}, got); err != nil {
			return false, err
		}
		for name, q := range n.Status.Capacity {
			if a := got.Status.Allocatable[name]; a.Cmp(q) < 0 && strings.Contains(string(name), "/") {
				return false, nil
			}
		}
		return true, nil
	})
	require.NoError(t, err, "the node's allocatable does not show the extended resources")
}

// references creates the Secrets and ConfigMaps s references: the TLS
// Secret holds a certificate of certs' CA, a client CA bundle that CA, an
// override the given run config; anything else stand-in values.
func references(t *testing.T, s *v1alpha1.InferenceStack, runConfig string, certs *certs) {
	t.Helper()
	ctx := context.Background()
	var tls *v1alpha1.TLSSpec
	if n := s.Spec.Networking; n != nil && n.TLS != nil && n.TLS.Enabled {
		tls = n.TLS
	}
	for _, ref := range config.References(testutil.Hub(s).Spec) {
		data := map[string]string{}
		for _, k := range ref.Keys {
			data[k] = "stand-in"
		}
		var obj client.Object
		switch ref.Kind {
		case config.KindSecret:
			typ := corev1.SecretTypeOpaque
			if tls != nil && ref.Name == tls.SecretName {
				typ, data = corev1.SecretTypeTLS, map[string]string{corev1.TLSCertKey: certs.cert, corev1.TLSPrivateKeyKey: certs.key}
			}
			obj = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: ref.Name, Namespace: s.Namespace}, Type: typ, StringData: data}
		case config.KindConfigMap:
			switch {
			case s.Spec.OverrideConfig != nil && ref.Name == s.Spec.OverrideConfig.ConfigMapName:
				require.NotEmpty(t, runConfig, "no run config for the override of %s", s.Name)
				data[testutil.Hub(s).Spec.OverrideConfig.KeyOrDefault()] = runConfig
			case tls != nil && tls.CABundle != nil && ref.Name == tls.CABundle.ConfigMapName:
				data[testutil.Hub(s).Spec.Networking.TLS.CABundle.KeyOrDefault()] = certs.ca
			}
			obj = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: ref.Name, Namespace: s.Namespace}, Data: data}
		default:
			t.Fatalf("%s references a %s", s.Name, ref.Kind)
		}
		if err := node.Env.Client.Create(ctx, obj); !apierrors.IsAlreadyExists(err) {
			require.NoError(t, err, "creating %s %s", ref.Kind, ref.Name)
		}
	}
}

// volumes makes, for each volume claim of s (the cache's, the server's
// state), a local PersistentVolume bound to it (there is no provisioner):
// an empty folder of the node owned by root, as a new volume's root is.
func volumes(t *testing.T, s *v1alpha1.InferenceStack) {
	t.Helper()
	ctx := context.Background()
	claims := map[string]*resource.Quantity{}
	if cachecomp.Enabled(testutil.Hub(s)) {
		claims[cachecomp.PVCName(s)] = s.Spec.Cache.StorageSize
	}
	if w := s.Spec.Workload; w != nil && w.StateVolume != nil {
		claims[server.StateVolumeName(s)] = w.StateVolume.Size
	}
	for claim, size := range claims {
		if size == nil {
			size = ptrTo(resource.MustParse("1Gi"))
		}
		name := s.Namespace + "-" + claim
		dir, err := node.VolumeDir(name)
		require.NoError(t, err)
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: *size},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				ClaimRef:                      &corev1.ObjectReference{Namespace: s.Namespace, Name: claim},
				PersistentVolumeSource:        corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: dir}},
				NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchExpressions: []corev1.NodeSelectorRequirement{{
						Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{testnode.Name},
					}},
				}}}},
			},
		}
		require.NoError(t, node.Env.Client.Create(ctx, pv))
		t.Cleanup(func() { _ = node.Env.Client.Delete(ctx, pv) })
	}
}

func ptrTo[T any](v T) *T { return &v }

// deleteStack deletes s and waits until it and its pods are gone.
func deleteStack(t *testing.T, s *v1alpha1.InferenceStack) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, kube.Delete(ctx, s))
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, deleteTimeout, true, func(ctx context.Context) (bool, error) {
		err := kube.Get(ctx, client.ObjectKeyFromObject(s), &v1alpha1.InferenceStack{})
		if !apierrors.IsNotFound(err) {
			return false, client.IgnoreNotFound(err)
		}
		return len(stackPods(t, s)) == 0, nil
	})
	require.NoError(t, err, "InferenceStack %s or its pods still exist", s.Name)
}

// serverDeployment is the server Deployment of s.
func serverDeployment(t *testing.T, s *v1alpha1.InferenceStack) *appsv1.Deployment {
	t.Helper()
	dep := &appsv1.Deployment{}
	require.NoError(t, node.Env.Client.Get(context.Background(), client.ObjectKey{Namespace: s.Namespace, Name: server.Name(s)}, dep))
	return dep
}

// certs are a CA and a serving certificate it signed, PEM.
type certs struct {
	ca, cert, key string
}

// newCerts makes a CA and a certificate for the Services of namespace ns
// (the kubelet's probes do not verify it; the stand-in loads it).
func newCerts(t *testing.T, ns string) *certs {
	t.Helper()
	c, err := testenv.NewServingCert("test/node/e2e test CA", []string{"*." + ns + ".svc", "*." + ns + ".svc.cluster.local"})
	require.NoError(t, err)
	return &certs{ca: string(c.CA), cert: string(c.Cert), key: string(c.Key)}
}
