package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	cachecomp "github.com/inferencestack/inferencestack/operator/components/cache"
	"github.com/inferencestack/inferencestack/operator/components/server"
	"github.com/inferencestack/inferencestack/operator/internal/serverstatus"
	"github.com/inferencestack/inferencestack/operator/runconfig/stackconfig"
)

// setStatus writes the outcome of the steps into the stack's status: the
// conditions, the phase they sum up, the config, and what the server's live
// objects (in the cache) say: its URL, replicas and image.
func (r *InferenceStackReconciler) setStatus(ctx context.Context, s *state, stepErr error) {
	stack := s.Stack
	st := &stack.Status
	set := func(typ string, status metav1.ConditionStatus, reason, message string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: typ, Status: status, Reason: reason, Message: message, ObservedGeneration: stack.Generation,
		})
	}
	st.ObservedGeneration = stack.Generation

	var ce *conditionError
	isCondition := errors.As(stepErr, &ce)
	switch {
	case s.rendered.ConfigMapName != "":
		if st.StateLine == "" {
			// The first run config this stack's state is written under.
			st.StateLine = string(s.stateLine())
		}
		set(v1alpha2.TypeConfigGenerated, metav1.ConditionTrue, v1alpha2.ReasonSucceeded,
			fmt.Sprintf("run config %.12s is in ConfigMap %s", s.rendered.Config.Hash, s.rendered.ConfigMapName))
		st.Config = &v1alpha2.ConfigStatus{Hash: s.rendered.Config.Hash, ConfigMapName: s.rendered.ConfigMapName}
	case isCondition && ce.Type == v1alpha2.TypeConfigGenerated:
		set(v1alpha2.TypeConfigGenerated, metav1.ConditionFalse, ce.Reason, ce.Message)
	case isCondition:
		// The config was generated but a later check stopped the step (a
		// missing Secret): the condition keeps what it said before.
		if meta.FindStatusCondition(st.Conditions, v1alpha2.TypeConfigGenerated) == nil {
			set(v1alpha2.TypeConfigGenerated, metav1.ConditionFalse, ce.Reason, ce.Message)
		}
	}
	switch {
	case isCondition:
		set(v1alpha2.TypeDegraded, metav1.ConditionTrue, ce.Reason, ce.Message)
	case stepErr != nil:
		set(v1alpha2.TypeDegraded, metav1.ConditionTrue, v1alpha2.ReasonApplyFailed, stepErr.Error())
	default:
		// The objects match the spec, but a pod may not run: its image
		// cannot be pulled (a typo, a private registry, an offline node),
		// or its container keeps exiting.
		reason, failure, err := r.podFailure(ctx, stack)
		switch {
		case err != nil:
			log.FromContext(ctx).Error(err, "reading the stack's pods for image pull errors and crash loops")
			if c := meta.FindStatusCondition(st.Conditions, v1alpha2.TypeDegraded); c == nil || (c.Reason != v1alpha2.ReasonImagePullFailed && c.Reason != v1alpha2.ReasonCrashLooping) {
				set(v1alpha2.TypeDegraded, metav1.ConditionFalse, v1alpha2.ReasonAsExpected, "the stack's objects match its spec")
			}
		case failure != "":
			set(v1alpha2.TypeDegraded, metav1.ConditionTrue, reason, failure)
		default:
			set(v1alpha2.TypeDegraded, metav1.ConditionFalse, v1alpha2.ReasonAsExpected, "the stack's objects match its spec")
		}
	}

	st.URL = ""
	if s.live.serverService != nil {
		st.URL = server.URL(stack)
	} else if err := r.Client.Get(ctx, client.ObjectKey{Namespace: stack.Namespace, Name: server.Name(stack)}, &corev1.Service{}); err == nil {
		st.URL = server.URL(stack)
	}
	r.exposureURLs(ctx, s)
	r.setRollout(ctx, s, set)
	r.setServer(s, set)
	st.Phase = phase(stack)
}

// setServer copies what the prober last read of the server (its version,
// its providers and their health) into the status while the server is
// Available, and has the prober poll it; otherwise it stops the polling
// and clears them. Until the first poll answers, the status keeps what it
// said.
func (r *InferenceStackReconciler) setServer(s *state, set func(string, metav1.ConditionStatus, string, string)) {
	if r.Prober == nil {
		return
	}
	stack := s.Stack
	st := &stack.Status
	line, err := stackconfig.LineOf(s.Pin.LlamaStackVersion)
	if err != nil || !stack.DeletionTimestamp.IsZero() || !meta.IsStatusConditionTrue(st.Conditions, v1alpha2.TypeAvailable) {
		r.Prober.Forget(client.ObjectKeyFromObject(stack))
		st.Server = nil
		meta.RemoveStatusCondition(&st.Conditions, v1alpha2.TypeProvidersHealthy)
		return
	}
	res, ok := r.Prober.Watch(serverTarget(stack, line))
	switch {
	case !ok:
	case res.Err != "":
		// The last providers read stay: the condition says they may be stale.
		set(v1alpha2.TypeProvidersHealthy, metav1.ConditionUnknown, v1alpha2.ReasonServerUnreachable, res.Err)
	default:
		st.Server = &v1alpha2.ServerStatus{Version: res.Version, Providers: res.Providers}
		if bad := res.Unhealthy(line); len(bad) > 0 {
			set(v1alpha2.TypeProvidersHealthy, metav1.ConditionFalse, v1alpha2.ReasonProviderUnhealthy,
				"the server reports unhealthy providers: "+strings.Join(bad, "; "))
		} else {
			set(v1alpha2.TypeProvidersHealthy, metav1.ConditionTrue, v1alpha2.ReasonProvidersHealthy,
				fmt.Sprintf("none of the server's %d providers reports an error", len(res.Providers)))
		}
	}
}

// serverTarget is how the prober reaches the stack's server: its Service,
// its TLS Secret, and, with auth, the identity the operator made for the
// prober (never the ServiceAccount the server runs as, which the stack's
// author may choose).
func serverTarget(stack *v1alpha2.InferenceStack, line stackconfig.Line) serverstatus.Target {
	t := serverstatus.Target{
		Stack: client.ObjectKeyFromObject(stack), UID: stack.UID, Line: line,
		Host: server.Name(stack) + "." + stack.Namespace + ".svc", Port: server.Port(stack),
	}
	if n := stack.Spec.Networking; n != nil && n.TLS != nil && n.TLS.Enabled {
		t.TLS = &serverstatus.TLS{SecretName: n.TLS.SecretName}
		// With mutual TLS, the client certificate the user gave the
		// operator.
		if n.TLS.CABundle != nil {
			t.TLS.ClientSecretName = n.TLS.OperatorClientSecretName
		}
	}
	if server.AuthEnabled(stack) {
		t.Identity = server.ProberName(stack)
	}
	return t
}

// setRollout sets Available and Progressing, the replica counts and the
// deployed image from the server's Deployment (and the cache's, when
// enabled).
func (r *InferenceStackReconciler) setRollout(ctx context.Context, s *state,
	set func(string, metav1.ConditionStatus, string, string)) {
	stack := s.Stack
	st := &stack.Status
	dep := s.live.serverDeployment
	if dep == nil {
		dep = &appsv1.Deployment{}
		key := client.ObjectKey{Namespace: stack.Namespace, Name: server.Name(stack)}
		if err := r.Client.Get(ctx, key, dep); err != nil {
			dep = nil
		}
	}
	if dep == nil {
		st.Replicas, st.ReadyReplicas, st.AvailableReplicas = 0, 0, 0
		set(v1alpha2.TypeAvailable, metav1.ConditionFalse, v1alpha2.ReasonDeploying, "the server Deployment does not exist yet")
		set(v1alpha2.TypeProgressing, metav1.ConditionTrue, v1alpha2.ReasonDeploying, "creating the server Deployment")
		return
	}
	st.ResolvedDistribution = resolvedDistribution(s, dep)
	desired := int32(1)
	if dep.Spec.Replicas != nil {
		desired = *dep.Spec.Replicas
	}
	st.Replicas, st.ReadyReplicas, st.AvailableReplicas = desired, dep.Status.ReadyReplicas, dep.Status.AvailableReplicas
	if desired == 0 {
		set(v1alpha2.TypeAvailable, metav1.ConditionFalse, v1alpha2.ReasonScaledToZero, "workload.replicas is 0")
		set(v1alpha2.TypeProgressing, metav1.ConditionFalse, v1alpha2.ReasonScaledToZero, "workload.replicas is 0")
		return
	}
	ds := dep.Status
	if ds.ObservedGeneration < dep.Generation || ds.UpdatedReplicas < desired || ds.AvailableReplicas < ds.Replicas {
		set(v1alpha2.TypeProgressing, metav1.ConditionTrue, v1alpha2.ReasonDeploying,
			fmt.Sprintf("rolling out: %d of %d server replicas updated, %d available", ds.UpdatedReplicas, desired, ds.AvailableReplicas))
	} else {
		set(v1alpha2.TypeProgressing, metav1.ConditionFalse, v1alpha2.ReasonSucceeded, "the server is rolled out")
	}
	switch {
	case ds.AvailableReplicas < 1:
		set(v1alpha2.TypeAvailable, metav1.ConditionFalse, v1alpha2.ReasonMinimumReplicasUnavailable,
			fmt.Sprintf("no server replica is ready (0 of %d)", desired))
	case cachecomp.Enabled(stack) && !r.cacheAvailable(ctx, s):
		set(v1alpha2.TypeAvailable, metav1.ConditionFalse, v1alpha2.ReasonCacheNotReady, "the PostgreSQL cache is not ready")
	default:
		set(v1alpha2.TypeAvailable, metav1.ConditionTrue, v1alpha2.ReasonMinimumReplicasAvailable,
			fmt.Sprintf("%d of %d server replicas ready", ds.AvailableReplicas, desired))
	}
}

// resolvedDistribution describes the image the server Deployment runs: its
// operand version is the pin's when it is the image this operator chose,
// the one recorded before while the Deployment runs the image the status
// described, unknown otherwise (a custom image, or another image the
// operator did not choose).
func resolvedDistribution(s *state, dep *appsv1.Deployment) *v1alpha2.ResolvedDistribution {
	var image string
	for _, c := range dep.Spec.Template.Spec.Containers {
		if c.Name == server.ContainerName {
			image = c.Image
		}
	}
	name := string(s.Stack.Spec.Distribution.Name)
	prev := s.Stack.Status.ResolvedDistribution
	version := v1alpha2.UnknownVersion
	switch {
	case name == "":
		name = v1alpha2.CustomDistributionName
	case image != "" && image == s.rendered.Image && s.Pin.LlamaStackVersion != "":
		version = s.Pin.LlamaStackVersion
	case image != "" && prev != nil && prev.Image == image && prev.OperandVersion != "":
		// Still the image the status described (another major's, before
		// a move; or this one's, while the config step fails): its version
		// is what was recorded then, which tells a move's line (lineStep).
		version = prev.OperandVersion
	}
	return &v1alpha2.ResolvedDistribution{
		Name: name, Image: image, OperandVersion: version, OperatorVersion: s.Pin.OperatorVersion,
	}
}

func (r *InferenceStackReconciler) cacheAvailable(ctx context.Context, s *state) bool {
	if dep := s.live.cacheDeployment; dep != nil {
		return dep.Status.AvailableReplicas > 0
	}
	dep := &appsv1.Deployment{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: s.Stack.Namespace, Name: cachecomp.Name(s.Stack)}, dep)
	return err == nil && dep.Status.AvailableReplicas > 0
}

// phase sums up the conditions in one word.
func phase(stack *v1alpha2.InferenceStack) v1alpha2.Phase {
	c := stack.Status.Conditions
	switch {
	case !stack.DeletionTimestamp.IsZero():
		return v1alpha2.PhaseDeleting
	case !meta.IsStatusConditionTrue(c, v1alpha2.TypeConfigGenerated):
		return v1alpha2.PhasePending
	case meta.IsStatusConditionTrue(c, v1alpha2.TypeDegraded):
		return v1alpha2.PhaseDegraded
	case meta.IsStatusConditionTrue(c, v1alpha2.TypeAvailable) && !meta.IsStatusConditionTrue(c, v1alpha2.TypeProgressing):
		return v1alpha2.PhaseReady
	default:
		return v1alpha2.PhaseDeploying
	}
}
