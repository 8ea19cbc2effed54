//go:build e2e

package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	"github.com/inferencestack/inferencestack/operator/components"
	cachecomp "github.com/inferencestack/inferencestack/operator/components/cache"
	"github.com/inferencestack/inferencestack/operator/components/config"
	"github.com/inferencestack/inferencestack/operator/components/server"
)

// faultTimeout bounds the way back to Ready after one fault (a killed
// operator waits for its Lease to expire: 15 s).
const faultTimeout = 2 * time.Minute

// faults: a stack with a user Secret (an API key), the cache and a state
// volume, Ready on the node, is hurt one way after another: its server pod
// deleted, its Deployment deleted, its Service deleted, its run-config
// ConfigMap deleted, the operator's process killed (SIGKILL) in the middle
// of the reconcile of a spec change, before its first write and after it
// (killMidReconcile), its user Secret rotated. After each it is Ready again
// at its generation, and its PersistentVolumeClaims, the user Secret and
// the cache's password Secret are the same objects (UIDs) with the same data
// (the user Secret's as rotated). What must not happen is proved with
// signals: the Deployment's generation and pod template hash, its
// ReplicaSets, the server pod's UID, each read after a reconcile of a later
// spec change (barrier) has finished.
func faults(t *testing.T, in *install) {
	ctx := context.Background()
	const ns = "faults"
	restrictedNamespace(t, ns)
	s := sample(t, "postgres-demo")
	s.Name, s.Namespace = "faults", ns
	s.Spec.Providers.Inference[0].APIKey = &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: "faults-key"}, Key: "token"}
	s.Spec.Workload.StateVolume = &v1alpha1.StateVolumeSpec{}
	s.Spec.Workload.Resources = smallResources()
	in.label(s)
	references(t, s, "", nil)
	volumes(t, s)
	start := time.Now()
	require.NoError(t, kube.Create(ctx, s))
	waitStack(t, s, readyTimeout, "Ready", isReady)
	t.Logf("stack %s/%s Ready in %s", ns, s.Name, time.Since(start).Round(100*time.Millisecond))

	kept := keptData(t, s)
	untouched := func(t *testing.T) {
		t.Helper()
		require.Equal(t, kept, keptData(t, s), "the stack's volume claims and Secrets")
	}

	t.Run("server pod deleted", func(t *testing.T) {
		dep, pod := serverDeployment(t, s), serverPod(t, s)
		require.NoError(t, node.Env.Client.Delete(ctx, &pod))
		now := recovered(t, s, func(p *corev1.Pod) bool { return p.UID != pod.UID })
		require.Equal(t, pod.Labels[appsv1.DefaultDeploymentUniqueLabelKey], now.Labels[appsv1.DefaultDeploymentUniqueLabelKey], "the new pod's template")
		barrier(t, s)
		require.Equal(t, dep.Generation, serverDeployment(t, s).Generation, "the Deployment's generation")
		untouched(t)
	})

	t.Run("Deployment deleted", func(t *testing.T) {
		dep, pod := serverDeployment(t, s), serverPod(t, s)
		require.NoError(t, node.Env.Client.Delete(ctx, dep, client.PropagationPolicy(metav1.DeletePropagationBackground)))
		recovered(t, s, func(p *corev1.Pod) bool { return p.UID != pod.UID })
		again := serverDeployment(t, s)
		require.NotEqual(t, dep.UID, again.UID, "the Deployment was not made again")
		require.True(t, equality.Semantic.DeepEqual(dep.Spec.Template, again.Spec.Template),
			"the new Deployment's pod template differs from the deleted one's:\n%s", cmp.Diff(dep.Spec.Template, again.Spec.Template))
		untouched(t)
	})

	t.Run("Service deleted", func(t *testing.T) {
		svc := &corev1.Service{}
		require.NoError(t, node.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: server.Name(s)}, svc))
		dep, pod := serverDeployment(t, s), serverPod(t, s)
		require.NoError(t, node.Env.Client.Delete(ctx, svc))
		again := waitRecreated(t, &corev1.Service{}, client.ObjectKeyFromObject(svc), svc.UID)
		require.Equal(t, svc.Spec.Ports, again.(*corev1.Service).Spec.Ports)
		barrier(t, s)
		require.Equal(t, dep.Generation, serverDeployment(t, s).Generation, "the Deployment's generation")
		require.Equal(t, pod.UID, serverPod(t, s).UID, "the server pod was replaced")
		untouched(t)
	})

	t.Run("run-config ConfigMap deleted", func(t *testing.T) {
		cm := &corev1.ConfigMap{}
		require.NoError(t, node.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: config.ConfigMapName(s.Name)}, cm))
		dep, pod := serverDeployment(t, s), serverPod(t, s)
		require.NoError(t, node.Env.Client.Delete(ctx, cm))
		again := waitRecreated(t, &corev1.ConfigMap{}, client.ObjectKeyFromObject(cm), cm.UID).(*corev1.ConfigMap)
		require.Equal(t, cm.Data, again.Data, "the run config made again")
		require.Equal(t, cm.Annotations[components.AnnotationConfigHash], again.Annotations[components.AnnotationConfigHash])
		barrier(t, s)
		require.Equal(t, dep.Generation, serverDeployment(t, s).Generation, "the Deployment's generation")
		require.Equal(t, pod.UID, serverPod(t, s).UID, "the server pod was replaced")
		untouched(t)
	})

	// The operator's process killed in the middle of the reconcile of a
	// spec change, before and after that reconcile's first write.
	t.Run("operator killed before its first write", func(t *testing.T) {
		killMidReconcile(t, in, s, "killed-before-write", false)
		untouched(t)
	})
	t.Run("operator killed after its first write", func(t *testing.T) {
		killMidReconcile(t, in, s, "killed-after-write", true)
		untouched(t)
	})

	t.Run("user Secret rotated", func(t *testing.T) {
		dep, sets, pod := serverDeployment(t, s), replicaSets(t, s), serverPod(t, s)
		key := &corev1.Secret{}
		require.NoError(t, node.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "faults-key"}, key))
		key.Data["token"] = []byte("rotated")
		require.NoError(t, node.Env.Client.Update(ctx, key))
		kept["Secret/faults-key"] = keptObject{UID: key.UID, Data: "token=rotated;"}
		recovered(t, s, func(p *corev1.Pod) bool {
			return p.Labels[appsv1.DefaultDeploymentUniqueLabelKey] != pod.Labels[appsv1.DefaultDeploymentUniqueLabelKey]
		})
		barrier(t, s)
		require.Equal(t, dep.Generation+1, serverDeployment(t, s).Generation, "the rotation rolled out other than once")
		require.Len(t, replicaSets(t, s), len(sets)+1, "ReplicaSets after one rollout")
		untouched(t)
	})
	deleteStack(t, s)
}

// killMidReconcile sets FAULT=value in the environment of s and kills the
// operator's process in the middle of its reconcile of that change. The
// reconcile's first write, the server Deployment with the change, is held
// in admission (holdWrite), where the process waits for it: the kill lands
// after the reconcile began and before it ended (its status, written
// last, still describes the generation before, which is checked). With
// written the process is first stopped (SIGSTOP) and the write let through,
// so it dies with its Deployment changed; without, the write is refused
// after the kill, so it dies having changed nothing. Either way the
// restarted operator must bring the change once: nothing lost (the server
// pod with the change, the stack Ready at its generation), nothing twice
// (one rollout: the Deployment's generation one up, one more ReplicaSet;
// the stack's objects the same ones).
func killMidReconcile(t *testing.T, in *install, s *v1alpha1.InferenceStack, value string, written bool) {
	t.Helper()
	ctx := context.Background()
	// Earlier changes settled (and the barrier's PodDisruptionBudget
	// made): the objects read now are those the kill must not change.
	barrier(t, s)
	op := operatorPod(t, in.namespace, in.selector)
	container := op.Status.ContainerStatuses[0]
	dep, sets, owned := serverDeployment(t, s), replicaSets(t, s), ownedObjects(t, s)
	fault := corev1.EnvVar{Name: "FAULT", Value: value}
	hasFault := func(spec corev1.PodSpec) bool {
		return slices.ContainsFunc(spec.Containers, func(c corev1.Container) bool { return slices.Contains(c.Env, fault) })
	}
	user := "system:serviceaccount:" + in.namespace + ":" + op.Spec.ServiceAccountName
	hold := holdWrite(t, s.Namespace, user, func(req *admissionv1.AdmissionRequest) bool {
		d := &appsv1.Deployment{}
		return req.Kind.Kind == "Deployment" && req.Name == dep.Name && req.Operation == admissionv1.Update &&
			json.Unmarshal(req.Object.Raw, d) == nil && hasFault(d.Spec.Template.Spec)
	})
	update(t, s, func(st *v1alpha1.InferenceStack) {
		st.Spec.Workload.Env = append(slices.DeleteFunc(st.Spec.Workload.Env, func(e corev1.EnvVar) bool { return e.Name == fault.Name }), fault)
	})
	var held *admissionv1.AdmissionRequest
	select {
	case held = <-hold.Held:
	case <-time.After(faultTimeout):
		t.Fatalf("the operator (%s) did not write Deployment %s with the spec change in %s; its writes in %s: %q",
			user, dep.Name, faultTimeout, s.Namespace, hold.Seen())
	}
	if pod := held.UserInfo.Extra["authentication.kubernetes.io/pod-name"]; len(pod) > 0 {
		require.Equal(t, []string{op.Name}, []string(pod), "the held write's pod")
	}
	if written {
		stopped, err := node.SignalContainer(container.ContainerID, syscall.SIGSTOP)
		require.NoError(t, err)
		// Should the test stop before the kill, the operator goes on.
		t.Cleanup(func() { _, _ = node.SignalContainer(container.ContainerID, syscall.SIGCONT) })
		hold.Release()
		err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			d := serverDeployment(t, s)
			return d.Generation == dep.Generation+1 && hasFault(d.Spec.Template.Spec), nil
		})
		require.NoError(t, err, "the stopped operator's write of Deployment %s was not made", dep.Name)
		t.Logf("stopped %d process(es) of operator pod %s, then let its write of Deployment %s through", stopped, op.Name, dep.Name)
	}
	killed, err := node.KillContainer(container.ContainerID)
	require.NoError(t, err)
	mid := &v1alpha1.InferenceStack{}
	require.NoError(t, kube.Get(ctx, client.ObjectKeyFromObject(s), mid))
	if mid.Status.ObservedGeneration >= mid.Generation {
		// What came before says how: the writes the hold saw, the
		// status's conditions and who wrote the Deployment when.
		d := serverDeployment(t, s)
		var fields []string
		for _, f := range d.ManagedFields {
			fields = append(fields, fmt.Sprintf("%s %s %s", f.Manager, f.Operation, f.Time))
		}
		t.Fatalf("the stack's status describes its generation %d: the reconcile had ended when the operator was killed; "+
			"the operator's writes in %s before the held one: %q; conditions %+v; the Deployment's writers %q (generation %d)",
			mid.Generation, s.Namespace, hold.Seen(), mid.Status.Conditions, fields, d.Generation)
	}
	if !written {
		hold.Deny()
	}
	// The webhook goes before the restarted operator writes.
	hold.Stop()
	now := serverDeployment(t, s)
	if written {
		require.Equal(t, dep.Generation+1, now.Generation, "the Deployment's generation when the operator was killed")
	} else {
		require.Equal(t, dep.Generation, now.Generation, "the refused write changed the Deployment")
	}
	t.Logf("killed %d process(es) of operator pod %s in its reconcile of generation %d, at its first write %s %s/%s "+
		"(its writes in %s before it, since the hold was set: %q); the status described generation %d; the Deployment's generation %d (was %d)",
		killed, op.Name, mid.Generation, held.Operation, resourceOf(held), held.Name, s.Namespace, hold.Seen(),
		mid.Status.ObservedGeneration, now.Generation, dep.Generation)

	// The kubelet restarts the container; it waits for the dead process's
	// Lease to expire.
	waitPod(t, in.namespace, op.Name, faultTimeout, func(p *corev1.Pod) bool {
		return p.Status.ContainerStatuses[0].RestartCount > container.RestartCount && podReady(p)
	})
	recovered(t, s, func(p *corev1.Pod) bool { return hasFault(p.Spec) })
	barrier(t, s)
	require.Equal(t, dep.Generation+1, serverDeployment(t, s).Generation, "the spec change rolled out other than once")
	require.Len(t, replicaSets(t, s), len(sets)+1, "ReplicaSets after one rollout")
	require.Equal(t, owned, ownedObjects(t, s), "the stack's objects (kind/name: UID): one of each, none made again")
}

// keptObject is what must survive a fault of an object holding data.
type keptObject struct {
	UID types.UID
	// Data is a Secret's data, or a claim's volume and phase.
	Data string
}

// keptData reads the stack's volume claims, its user Secret and the cache's
// password Secret.
func keptData(t *testing.T, s *v1alpha1.InferenceStack) map[string]keptObject {
	t.Helper()
	ctx := context.Background()
	out := map[string]keptObject{}
	for _, name := range []string{cachecomp.PVCName(s), server.StateVolumeName(s)} {
		pvc := &corev1.PersistentVolumeClaim{}
		require.NoError(t, node.Env.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: name}, pvc))
		out["PersistentVolumeClaim/"+name] = keptObject{UID: pvc.UID, Data: pvc.Spec.VolumeName + " " + string(pvc.Status.Phase)}
	}
	for _, name := range []string{"faults-key", cachecomp.SecretName(s)} {
		secret := &corev1.Secret{}
		require.NoError(t, node.Env.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: name}, secret))
		data := ""
		for _, k := range slices.Sorted(maps.Keys(secret.Data)) {
			data += k + "=" + string(secret.Data[k]) + ";"
		}
		out["Secret/"+name] = keptObject{UID: secret.UID, Data: data}
	}
	return out
}

// serverPod is the one running server pod of s.
func serverPod(t *testing.T, s *v1alpha1.InferenceStack) corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	for _, p := range stackPods(t, s) {
		if p.Labels[components.LabelComponent] == components.ComponentServer && p.DeletionTimestamp == nil {
			pods = append(pods, p)
		}
	}
	require.Len(t, pods, 1, "server pods of %s", s.Name)
	return pods[0]
}

// ownedObjects are the objects of the kinds the operator writes that s
// controls (its owner reference), by kind/name: their UIDs.
func ownedObjects(t *testing.T, s *v1alpha1.InferenceStack) map[string]types.UID {
	t.Helper()
	out := map[string]types.UID{}
	for _, list := range []client.ObjectList{
		&corev1.ConfigMapList{}, &corev1.SecretList{}, &corev1.ServiceList{}, &corev1.ServiceAccountList{},
		&corev1.PersistentVolumeClaimList{}, &appsv1.DeploymentList{}, &networkingv1.NetworkPolicyList{},
		&autoscalingv2.HorizontalPodAutoscalerList{}, &policyv1.PodDisruptionBudgetList{},
	} {
		require.NoError(t, node.Env.Client.List(context.Background(), list, client.InNamespace(s.Namespace)))
		require.NoError(t, meta.EachListItem(list, func(o runtime.Object) error {
			obj := o.(client.Object)
			if c := metav1.GetControllerOf(obj); c != nil && c.UID == s.UID {
				out[reflect.TypeOf(o).Elem().Name()+"/"+obj.GetName()] = obj.GetUID()
			}
			return nil
		}))
	}
	require.NotEmpty(t, out, "objects controlled by InferenceStack %s/%s", s.Namespace, s.Name)
	return out
}

// replicaSets are the server Deployment's ReplicaSets.
func replicaSets(t *testing.T, s *v1alpha1.InferenceStack) []appsv1.ReplicaSet {
	t.Helper()
	list := &appsv1.ReplicaSetList{}
	require.NoError(t, node.Env.Client.List(context.Background(), list, client.InNamespace(s.Namespace),
		client.MatchingLabels(components.SelectorLabels(s, components.ComponentServer))))
	return list.Items
}

// recovered waits until the only server pod of s is one that new accepts
// and Ready, and s Ready at its generation; it returns that pod.
func recovered(t *testing.T, s *v1alpha1.InferenceStack, new func(*corev1.Pod) bool) corev1.Pod {
	t.Helper()
	start := time.Now()
	var pod corev1.Pod
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, faultTimeout, true, func(context.Context) (bool, error) {
		var server []corev1.Pod
		for _, p := range stackPods(t, s) {
			if p.Labels[components.LabelComponent] == components.ComponentServer {
				server = append(server, p)
			}
		}
		if len(server) != 1 || !new(&server[0]) || !podReady(&server[0]) {
			return false, nil
		}
		pod = server[0]
		return true, nil
	})
	if err != nil {
		waitStack(t, s, time.Second, "with one new server pod Ready", func(*v1alpha1.InferenceStack) bool { return false })
	}
	waitStack(t, s, faultTimeout, "Ready", isReady)
	t.Logf("server pod %s Ready and the stack Ready in %s", pod.Name, time.Since(start).Round(100*time.Millisecond))
	return pod
}

// barrier changes a part of the spec of s that no server object depends on
// (its PodDisruptionBudget) and waits until s is Ready at that generation:
// every reconcile of earlier changes has finished.
func barrier(t *testing.T, s *v1alpha1.InferenceStack) {
	t.Helper()
	update(t, s, func(st *v1alpha1.InferenceStack) {
		max := intstr.FromInt32(1)
		if pdb := st.Spec.Workload.PodDisruptionBudget; pdb != nil && pdb.MaxUnavailable != nil && pdb.MaxUnavailable.IntValue() == 1 {
			max = intstr.FromInt32(2)
		}
		st.Spec.Workload.PodDisruptionBudget = &v1alpha1.PodDisruptionBudgetSpec{MaxUnavailable: &max}
	})
	waitStack(t, s, faultTimeout, "Ready after the barrier", isReady)
}

// waitRecreated waits until the object at key exists again with another
// UID than old, and returns it.
func waitRecreated(t *testing.T, obj client.Object, key client.ObjectKey, old types.UID) client.Object {
	t.Helper()
	start := time.Now()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, faultTimeout, true, func(ctx context.Context) (bool, error) {
		if err := node.Env.Client.Get(ctx, key, obj); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return obj.GetUID() != old, nil
	})
	require.NoError(t, err, "%T %s was not made again", obj, key)
	t.Logf("%T %s made again in %s", obj, key, time.Since(start).Round(100*time.Millisecond))
	return obj
}
