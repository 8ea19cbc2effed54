package controller

import (
	"context"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/inferencestack/inferencestack/operator/apply"
	"github.com/inferencestack/inferencestack/operator/components"
	cachecomp "github.com/inferencestack/inferencestack/operator/components/cache"
	"github.com/inferencestack/inferencestack/operator/components/network"
	"github.com/inferencestack/inferencestack/operator/components/scaling"
	"github.com/inferencestack/inferencestack/operator/components/server"
)

// serverStep applies the server's objects, built from the config step's
// output; fsGroup is the pod's with a state volume (server.Inputs.FSGroup).
func serverStep(ctx context.Context, s *state, out rendered, fsGroup *int64) error {
	stack := s.Stack
	if sa := server.ServiceAccount(stack); sa != nil {
		if _, _, err := apply.Apply(ctx, s.Applier, apply.ServiceAccount, sa); err != nil {
			return err
		}
	}
	if err := proberIdentity(ctx, s); err != nil {
		return err
	}
	if desired := server.StatePVC(stack); desired != nil {
		pvc, _, err := apply.Apply(ctx, s.Applier, apply.PersistentVolumeClaim, desired)
		if err != nil {
			return err
		}
		if err := ownedUnlessRetained(ctx, s, pvc, pvc, server.StateRetained(stack)); err != nil {
			return err
		}
	} else {
		// Dropped from the spec: kept, so no longer owned.
		pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: server.StateVolumeName(stack), Namespace: stack.Namespace}}
		if err := ownedUnlessRetained(ctx, s, pvc, nil, true); err != nil {
			return err
		}
	}
	major, err := s.Pin.Major()
	if err != nil {
		return err
	}
	in := server.Inputs{Image: out.Image, Config: out.Config, ConfigMapName: out.ConfigMapName, ReferencesHash: out.ReferencesHash, OperatorMajor: major, FSGroup: fsGroup}
	desired, err := server.Deployment(stack, in)
	if err != nil {
		return err
	}
	dep, _, err := apply.Apply(ctx, s.Applier, apply.Deployment, desired)
	if err != nil {
		return err
	}
	s.live.serverDeployment = dep
	svc, _, err := apply.Apply(ctx, s.Applier, apply.Service, server.Service(stack))
	if err != nil {
		return err
	}
	s.live.serverService = svc
	return nil
}

// proberIdentity applies the ServiceAccount the prober reads a server with
// kubernetes auth as, and the Secret its tokens are bound to; without auth
// it deletes them (revoking every token bound to the Secret).
func proberIdentity(ctx context.Context, s *state) error {
	stack := s.Stack
	sa, secret := server.ProberServiceAccount(stack), server.ProberSecret(stack)
	if sa == nil {
		meta := metav1.ObjectMeta{Name: server.ProberName(stack), Namespace: stack.Namespace}
		if _, err := apply.Delete(ctx, s.Client, &corev1.Secret{ObjectMeta: meta}, components.Owned(stack)); err != nil {
			return err
		}
		_, err := apply.Delete(ctx, s.Client, &corev1.ServiceAccount{ObjectMeta: meta}, components.Owned(stack))
		return err
	}
	if _, _, err := apply.Apply(ctx, s.Applier, apply.ServiceAccount, sa); err != nil {
		return err
	}
	_, _, err := apply.Apply(ctx, s.Applier, apply.Secret, secret)
	return err
}

// networkStep applies the NetworkPolicies; operator, when set, is the
// operator's pods, which the server's policy admits (its prober reads the
// server).
func networkStep(ctx context.Context, s *state, operator *network.OperatorPeer) error {
	stack := s.Stack
	if _, _, err := apply.Apply(ctx, s.Applier, apply.NetworkPolicy, network.ServerPolicy(stack, operator)); err != nil {
		return err
	}
	if cachecomp.Enabled(stack) {
		_, _, err := apply.Apply(ctx, s.Applier, apply.NetworkPolicy, network.CachePolicy(stack))
		return err
	}
	_, err := apply.Delete(ctx, s.Client, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: network.CachePolicyName(stack), Namespace: stack.Namespace},
	}, components.Owned(stack))
	return err
}

// scalingStep applies the autoscaler and the disruption budget when asked,
// and deletes them when not.
func scalingStep(ctx context.Context, s *state) error {
	stack := s.Stack
	meta := metav1.ObjectMeta{Name: server.Name(stack), Namespace: stack.Namespace}
	if hpa := scaling.HorizontalPodAutoscaler(stack); hpa != nil {
		if _, _, err := apply.Apply(ctx, s.Applier, apply.HorizontalPodAutoscaler, hpa); err != nil {
			return err
		}
	} else if _, err := apply.Delete(ctx, s.Client, &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: meta}, components.Owned(stack)); err != nil {
		return err
	}
	if pdb := scaling.PodDisruptionBudget(stack); pdb != nil {
		_, _, err := apply.Apply(ctx, s.Applier, apply.PodDisruptionBudget, pdb)
		return err
	}
	_, err := apply.Delete(ctx, s.Client, &policyv1.PodDisruptionBudget{ObjectMeta: meta}, components.Owned(stack))
	return err
}
