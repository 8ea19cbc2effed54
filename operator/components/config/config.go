// Package config is the config component: it resolves the server image from
// the operand pin, generates the run config (or takes the user's
// overrideConfig), reads and watches the user objects the stack references,
// and applies the run-config ConfigMap (and, for an external PostgreSQL, the
// Secret split from its connection string).
package config

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	"github.com/inferencestack/inferencestack/operator/apply"
	"github.com/inferencestack/inferencestack/operator/components"
	"github.com/inferencestack/inferencestack/operator/runconfig"
	"github.com/inferencestack/inferencestack/operator/runconfig/stackconfig"
)

// ConfigMapName is the run-config ConfigMap of a stack.
func ConfigMapName(stack string) string { return stack + "-run-config" }

// ConfigMap is the run-config ConfigMap: the config under
// runconfig.ConfigKey, its hash in an annotation.
func ConfigMap(stack *v1alpha1.InferenceStack, result runconfig.Result) *corev1ac.ConfigMapApplyConfiguration {
	return corev1ac.ConfigMap(ConfigMapName(stack.Name), stack.Namespace).
		WithLabels(watchedLabels(stack)).
		WithAnnotations(map[string]string{components.AnnotationConfigHash: result.Hash}).
		WithOwnerReferences(components.OwnerReference(stack)).
		WithData(map[string]string{runconfig.ConfigKey: string(result.YAML)})
}

// SQLSecret is the Secret holding the parts of storage.sql.connectionString
// that the server's POSTGRES_* variables read. It is applied as data, not
// stringData: the API server folds stringData into data and never returns
// it, so the fields read back would never equal a stringData apply and
// every reconcile would write it again.
func SQLSecret(stack *v1alpha1.InferenceStack, values map[string]string) *corev1ac.SecretApplyConfiguration {
	data := make(map[string][]byte, len(values))
	for k, v := range values {
		data[k] = []byte(v)
	}
	return corev1ac.Secret(runconfig.ExternalSQLSecretName(stack.Name), stack.Namespace).
		WithLabels(watchedLabels(stack)).
		WithOwnerReferences(components.OwnerReference(stack)).
		WithType(corev1.SecretTypeOpaque).
		WithData(data)
}

func watchedLabels(stack *v1alpha1.InferenceStack) map[string]string {
	l := components.Labels(stack, components.ComponentServer)
	l[components.LabelWatched] = "true"
	return l
}

// Image is the server image of a stack: its custom image, or the pinned
// image of its distribution.
func Image(s *components.State) (string, error) {
	d := s.Stack.Spec.Distribution
	if d.Image != "" {
		return d.Image, nil
	}
	image, err := s.Pin.Image(runconfig.ImageDistribution(d.Name))
	if err != nil {
		return "", components.Errorf(v1alpha1.TypeDegraded, v1alpha1.ReasonDistributionNotPinned,
			"%v: choose another spec.distribution.name or upgrade the operator", err)
	}
	return image, nil
}

// Operand is what the pin says of the server the operator deploys.
func Operand(s *components.State) runconfig.Operand {
	return runconfig.Operand{LlamaStackVersion: s.Pin.LlamaStackVersion}
}

// Step runs the config component.
var Step = components.Step{Name: "config", Run: run}

func run(ctx context.Context, s *components.State) error {
	stack := s.Stack
	image, err := Image(s)
	if err != nil {
		return err
	}
	s.Image = image

	data, missing, err := readReferences(ctx, s)
	if err != nil {
		return err
	}
	if err := Unwatch(ctx, s.Client, s.APIReader, stack, false); err != nil {
		return err
	}
	var result runconfig.Result
	if o := stack.Spec.OverrideConfig; o != nil {
		text, ok := data[IndexKey(KindConfigMap, o.ConfigMapName)][o.KeyOrDefault()]
		if !ok {
			return components.Errorf(v1alpha1.TypeConfigGenerated, v1alpha1.ReasonOverrideConfigNotFound,
				"spec.overrideConfig: ConfigMap %s/%s with key %s not found: create it, or remove overrideConfig",
				stack.Namespace, o.ConfigMapName, o.KeyOrDefault())
		}
		result, err = runconfig.FromOverride(stack.Name, stack.Spec, Operand(s), []byte(text))
	} else {
		result, err = runconfig.Generate(stack.Name, stack.Spec, Operand(s))
	}
	var unknown *stackconfig.UnknownVersionError
	if errors.As(err, &unknown) {
		return components.Errorf(v1alpha1.TypeDegraded, v1alpha1.ReasonUnsupportedOperandVersion,
			"operator %s: %v; no run config is written rather than a guessed one: install an operator release that pins a known version",
			s.Pin.OperatorVersion, err)
	}
	if err != nil {
		return components.Errorf(v1alpha1.TypeConfigGenerated, v1alpha1.ReasonInvalidConfig, "%v", err)
	}
	if len(missing) > 0 {
		return components.Errorf(v1alpha1.TypeDegraded, v1alpha1.ReasonSecretNotFound,
			"waiting for %s in namespace %s: create it (the server is not rolled out until it exists)",
			strings.Join(missing, ", "), stack.Namespace)
	}
	if sql := postgresConnection(stack.Spec); sql != nil {
		uri := data[IndexKey(KindSecret, sql.Name)][sql.Key]
		parts, err := runconfig.PostgresSecretData(uri)
		if err != nil {
			return components.Errorf(v1alpha1.TypeConfigGenerated, v1alpha1.ReasonInvalidConfig,
				"spec.storage.sql.connectionString: Secret %s key %s: %v", sql.Name, sql.Key, err)
		}
		if _, err := apply.Apply(ctx, s.Client, apply.Secret, SQLSecret(stack, parts)); err != nil {
			return err
		}
	}
	if _, err := apply.Apply(ctx, s.Client, apply.ConfigMap, ConfigMap(stack, result)); err != nil {
		return err
	}
	s.Config = result
	s.ConfigMapName = ConfigMapName(stack.Name)
	s.ReferencesHash = HashReferences(References(stack.Spec), data)
	return nil
}

func postgresConnection(spec v1alpha1.InferenceStackSpec) *corev1.SecretKeySelector {
	if st := spec.Storage; st != nil && st.SQL != nil && st.SQL.Type == v1alpha1.SQLStorePostgres {
		return st.SQL.ConnectionString
	}
	return nil
}

// readReferences reads every user object the stack references: from the
// cache when it carries the watched label, else from the API server, and
// then labels it so the cache sees its next change. It returns the data by
// IndexKey, and the references that do not exist (or lack a key).
func readReferences(ctx context.Context, s *components.State) (map[string]map[string]string, []string, error) {
	data := map[string]map[string]string{}
	var missing []string
	for _, ref := range References(s.Stack.Spec) {
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
		data[IndexKey(ref.Kind, ref.Name)] = values
	}
	return data, missing, nil
}

func readReference(ctx context.Context, s *components.State, ref Reference) (map[string]string, bool, error) {
	var (
		obj  client.Object
		read func() map[string]string
	)
	switch ref.Kind {
	case KindSecret:
		sec := &corev1.Secret{}
		obj, read = sec, func() map[string]string {
			out := map[string]string{}
			for k, v := range sec.Data {
				out[k] = string(v)
			}
			for k, v := range sec.StringData {
				out[k] = v
			}
			return out
		}
	default:
		cm := &corev1.ConfigMap{}
		obj, read = cm, func() map[string]string {
			out := maps.Clone(cm.Data)
			if out == nil {
				out = map[string]string{}
			}
			for k, v := range cm.BinaryData {
				out[k] = string(v)
			}
			return out
		}
	}
	key := client.ObjectKey{Namespace: s.Stack.Namespace, Name: ref.Name}
	err := s.Client.Get(ctx, key, obj)
	if apierrors.IsNotFound(err) {
		// Not labelled yet, so not in the cache: ask the API server.
		err = s.APIReader.Get(ctx, key, obj)
		if apierrors.IsNotFound(err) {
			return nil, false, nil
		}
		if err == nil && obj.GetLabels()[components.LabelWatched] != "true" {
			err = watch(ctx, s.Client, obj)
		}
	}
	if err != nil {
		return nil, false, fmt.Errorf("reading %s %s: %w", ref.Kind, key, err)
	}
	return read(), true, nil
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

// HashReferences hashes the referenced keys' data (every key for a
// reference without keys), so the pod template changes exactly when data the
// server uses changes.
func HashReferences(refs []Reference, data map[string]map[string]string) string {
	h := sha256.New()
	for _, ref := range refs {
		values := data[IndexKey(ref.Kind, ref.Name)]
		keys := ref.Keys
		if len(keys) == 0 {
			keys = slices.Sorted(maps.Keys(values))
		}
		for _, k := range keys {
			fmt.Fprintf(h, "%s/%s/%s=%d:%s\n", ref.Kind, ref.Name, k, len(values[k]), values[k])
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}
