package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/apply"
	"github.com/inferencestack/inferencestack/operator/components"
	"github.com/inferencestack/inferencestack/operator/components/config"
	"github.com/inferencestack/inferencestack/operator/runconfig"
	"github.com/inferencestack/inferencestack/operator/runconfig/stackconfig"
)

// serverImage is the server image of a stack: its custom image, or the pinned
// image of its distribution.
func serverImage(s *state) (string, error) {
	d := s.Stack.Spec.Distribution
	if d.Image != "" {
		return d.Image, nil
	}
	image, err := s.Pin.Image(runconfig.ImageDistribution(d.Name))
	if err != nil {
		return "", errorf(v1alpha2.TypeDegraded, v1alpha2.ReasonDistributionNotPinned,
			"%v: choose another spec.distribution.name or upgrade the operator", err)
	}
	return image, nil
}

// operand is what the pin says of the server the operator deploys, and
// the line whose names the stack's state uses (stateLine), so that a
// stack moved from another line reads the state that line wrote.
func operand(s *state) runconfig.Operand {
	return runconfig.Operand{LlamaStackVersion: s.Pin.LlamaStackVersion, StateLine: s.stateLine()}
}

// stateLine is the line whose names the stack's state uses
// (status.stateLine; for a stack that has none yet, the line its server
// runs, else this operator's line).
func (s *state) stateLine() stackconfig.Line {
	target, _ := stackconfig.LineOf(s.Pin.LlamaStackVersion)
	return stateLine(s.Stack, target)
}

// configStep resolves the server image, reads (and watches) the user objects
// the stack references, generates the run config (or takes the override)
// and applies its ConfigMap (and, for an external PostgreSQL, the Secret
// split from its connection string). What it made is the server step's
// input; on an error it returns what it had got so far (the image), for
// the status.
func configStep(ctx context.Context, s *state) (rendered, error) {
	stack := s.Stack
	var out rendered
	image, err := serverImage(s)
	if err != nil {
		return out, err
	}
	out.Image = image

	data, missing, err := readReferences(ctx, s)
	if err != nil {
		return out, err
	}
	if err := unwatch(ctx, s.Client, s.APIReader, stack, false); err != nil {
		return out, err
	}
	cmKey := client.ObjectKey{Namespace: stack.Namespace, Name: config.ConfigMapName(stack.Name)}
	var override *string
	if o := stack.Spec.OverrideConfig; o != nil {
		text, ok := data[config.IndexKey(config.KindConfigMap, o.ConfigMapName)][o.KeyOrDefault()]
		if !ok {
			return out, errorf(v1alpha2.TypeConfigGenerated, v1alpha2.ReasonOverrideConfigNotFound,
				"spec.overrideConfig: ConfigMap %s/%s with key %s not found: create it, or remove overrideConfig",
				stack.Namespace, o.ConfigMapName, o.KeyOrDefault())
		}
		override = &text
	}
	inputs := configInputs(stack, s.Pin.LlamaStackVersion, s.stateLine(), override)
	memo, remembered := s.Configs.get(stack.UID, inputs)
	if remembered {
		// The ConfigMap may have been changed or deleted since.
		if _, remembered, err = apply.Holds(ctx, s.Applier, apply.ConfigMap, cmKey, memo.digest); err != nil {
			return out, err
		}
	}
	result := memo.result
	if !remembered {
		if result, err = makeRunConfig(s, override); err != nil {
			return out, err
		}
	}
	if len(missing) > 0 {
		return out, errorf(v1alpha2.TypeDegraded, v1alpha2.ReasonSecretNotFound,
			"waiting for %s in namespace %s: create it (the server is not rolled out until it exists)",
			strings.Join(missing, ", "), stack.Namespace)
	}
	if sql := config.PostgresConnection(stack.Spec); sql != nil {
		uri := data[config.IndexKey(config.KindSecret, sql.Name)][sql.Key]
		parts, err := runconfig.PostgresSecretData(uri)
		if err != nil {
			return out, errorf(v1alpha2.TypeConfigGenerated, v1alpha2.ReasonInvalidConfig,
				"spec.storage.sql.connectionString: Secret %s key %s: %v", sql.Name, sql.Key, err)
		}
		if _, _, err := apply.Apply(ctx, s.Applier, apply.Secret, config.SQLSecret(stack, parts)); err != nil {
			return out, err
		}
	}
	if !remembered {
		cm := config.ConfigMap(stack, result)
		digest, err := apply.Digest(cm)
		if err != nil {
			return out, err
		}
		if _, _, err := apply.ApplyDigest(ctx, s.Applier, apply.ConfigMap, cm, digest); err != nil {
			return out, err
		}
		s.Configs.put(stack.UID, inputs, result, digest)
	}
	out.Config = result
	out.ConfigMapName = cmKey.Name
	out.ReferencesHash = config.HashReferences(config.References(stack.Spec), data)
	return out, nil
}

// makeRunConfig runs the run-config pipeline for the stack, or checks its
// override (the text of override, when not nil).
func makeRunConfig(s *state, override *string) (runconfig.Result, error) {
	stack := s.Stack
	var result runconfig.Result
	var err error
	if override != nil {
		result, err = runconfig.FromOverride(stack.Name, stack.Spec, operand(s), []byte(*override))
	} else {
		result, err = runconfig.Generate(stack.Name, stack.Spec, operand(s))
	}
	var unknown *stackconfig.UnknownVersionError
	if errors.As(err, &unknown) {
		return result, errorf(v1alpha2.TypeDegraded, v1alpha2.ReasonUnsupportedOperandVersion,
			"operator %s: %v; no run config is written rather than a guessed one: install an operator release that pins a known version",
			s.Pin.OperatorVersion, err)
	}
	if err != nil {
		return result, errorf(v1alpha2.TypeConfigGenerated, v1alpha2.ReasonInvalidConfig, "%v", err)
	}
	return result, nil
}

// readReferences reads every user object the stack references: from the
// cache when it carries the watched label, else from the API server, and
// then labels it so the cache sees its next change. It returns the data by
// config.IndexKey, and the references that do not exist (or lack a key).
func readReferences(ctx context.Context, s *state) (map[string]map[string]string, []string, error) {
	data := map[string]map[string]string{}
	var missing []string
	for _, ref := range config.References(s.Stack.Spec) {
		values, found, err := readReference(ctx, s, ref)
		if err != nil {
			return nil, nil, err
		}
		what := fmt.Sprintf("%s %s (%s)", ref.Kind, ref.Name, ref.Path)
		if !found {
			missing = append(missing, what)
			continue
		}
		for _, k := range ref.Keys {
			if _, ok := values[k]; !ok {
				missing = append(missing, fmt.Sprintf("key %s of %s", k, what))
			}
		}
		data[config.IndexKey(ref.Kind, ref.Name)] = values
	}
	return data, missing, nil
}

func readReference(ctx context.Context, s *state, ref config.Reference) (map[string]string, bool, error) {
	newObject := func() client.Object {
		if ref.Kind == config.KindSecret {
			return &corev1.Secret{}
		}
		return &corev1.ConfigMap{}
	}
	key := client.ObjectKey{Namespace: s.Stack.Namespace, Name: ref.Name}
	obj := newObject()
	err := s.Client.Get(ctx, key, obj)
	if err == nil && trimmed(obj) {
		// One of the operator's own, whose data its cache does not hold.
		obj = newObject()
		err = s.APIReader.Get(ctx, key, obj)
	}
	if apierrors.IsNotFound(err) {
		// Not labelled yet (or not seen by the cache yet), so ask the API
		// server, and label it. Stacks that reference the same object and are
		// reconciled at the same time share one read and one label patch.
		var shared any
		shared, err, _ = s.Watching.Do(config.IndexKey(ref.Kind, key.String()), func() (any, error) {
			fresh := newObject()
			if err := s.APIReader.Get(ctx, key, fresh); err != nil {
				return nil, err
			}
			if fresh.GetLabels()[components.LabelWatched] != "true" {
				if err := watch(ctx, s.Client, fresh); err != nil {
					return nil, err
				}
			}
			return fresh, nil
		})
		if apierrors.IsNotFound(err) {
			return nil, false, nil
		}
		if err == nil {
			obj = shared.(client.Object)
		}
	}
	if err != nil {
		return nil, false, fmt.Errorf("reading %s %s: %w", ref.Kind, key, err)
	}
	return objectData(obj), true, nil
}

// objectData is the data of a Secret or ConfigMap, by key.
func objectData(obj client.Object) map[string]string {
	out := map[string]string{}
	switch o := obj.(type) {
	case *corev1.Secret:
		for k, v := range o.Data {
			out[k] = string(v)
		}
		for k, v := range o.StringData {
			out[k] = v
		}
	case *corev1.ConfigMap:
		maps.Copy(out, o.Data)
		for k, v := range o.BinaryData {
			out[k] = string(v)
		}
	}
	return out
}

// watch adds the watched label to a user object with a merge patch of that
// label alone, so the operator's cache (which selects on it) sees the
// object's changes. Nothing else of the object is touched.
func watch(ctx context.Context, c client.Client, obj client.Object) error {
	patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
	labels := maps.Clone(obj.GetLabels())
	if labels == nil {
		labels = map[string]string{}
	}
	labels[components.LabelWatched] = "true"
	obj.SetLabels(labels)
	if err := c.Patch(ctx, obj, patch); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("labelling %s %s/%s %s=true to watch it: %w",
			obj.GetObjectKind().GroupVersionKind().Kind, obj.GetNamespace(), obj.GetName(), components.LabelWatched, err)
	}
	return nil
}
