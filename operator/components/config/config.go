// Package config is the config component's pure part: the run-config
// ConfigMap and the Secret split from an external PostgreSQL's connection
// string, the list of user objects a stack references and the hash of
// their data. The controller's config step reads those objects, generates
// the run config and applies what these build.
package config

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/components"
	"github.com/inferencestack/inferencestack/operator/runconfig"
)

// ConfigMapName is the run-config ConfigMap of a stack.
func ConfigMapName(stack string) string { return stack + "-run-config" }

// ConfigMap is the run-config ConfigMap: the config under
// runconfig.ConfigKey, its hash in an annotation.
func ConfigMap(stack *v1alpha2.InferenceStack, result runconfig.Result) *corev1ac.ConfigMapApplyConfiguration {
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
func SQLSecret(stack *v1alpha2.InferenceStack, values map[string]string) *corev1ac.SecretApplyConfiguration {
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

func watchedLabels(stack *v1alpha2.InferenceStack) map[string]string {
	l := components.Labels(stack, components.ComponentServer)
	l[components.LabelWatched] = "true"
	return l
}

// PostgresConnection is the Secret key of storage.sql.connectionString when
// the SQL store is an external PostgreSQL, else nil.
func PostgresConnection(spec v1alpha2.InferenceStackSpec) *corev1.SecretKeySelector {
	if st := spec.Storage; st != nil && st.SQL != nil && st.SQL.Type == v1alpha2.SQLStorePostgres {
		return st.SQL.ConnectionString
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
