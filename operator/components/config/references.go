package config

import (
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
)

// Kinds of referenced user objects.
const (
	KindSecret    = "Secret"
	KindConfigMap = "ConfigMap"
)

// Reference is one key of a user Secret or ConfigMap the stack uses; the
// operator watches it without owning it.
type Reference struct {
	Kind string
	Name string
	// Keys the stack reads; empty means every key (a mounted TLS Secret).
	Keys []string
	// Path is the spec field that names it, for messages.
	Path string
}

// IndexKey is how the controller indexes stacks by the objects they
// reference: "Secret/name" or "ConfigMap/name".
func IndexKey(kind, name string) string { return kind + "/" + name }

// References lists the user objects the spec references, merged by object
// and sorted by kind and name, so the same spec gives the same list.
func References(spec v1alpha2.InferenceStackSpec) []Reference {
	var refs []Reference
	add := func(kind, name, key string, path *field.Path) {
		if name == "" {
			return
		}
		for i := range refs {
			if refs[i].Kind == kind && refs[i].Name == name {
				if key != "" && len(refs[i].Keys) > 0 && !slices.Contains(refs[i].Keys, key) {
					refs[i].Keys = append(refs[i].Keys, key)
					slices.Sort(refs[i].Keys)
				} else if key == "" {
					refs[i].Keys = nil
				}
				return
			}
		}
		r := Reference{Kind: kind, Name: name, Path: path.String()}
		if key != "" {
			r.Keys = []string{key}
		}
		refs = append(refs, r)
	}
	secret := func(sel *corev1.SecretKeySelector, path *field.Path) {
		if sel != nil && (sel.Optional == nil || !*sel.Optional) {
			add(KindSecret, sel.Name, sel.Key, path)
		}
	}
	root := field.NewPath("spec")
	if p := spec.Providers; p != nil {
		for _, api := range []struct {
			name string
			list v1alpha2.ProviderList
		}{
			{"inference", p.Inference}, {"safety", p.Safety}, {"vectorIo", p.VectorIO},
			{"toolRuntime", p.ToolRuntime}, {"telemetry", p.Telemetry},
		} {
			for i, prov := range api.list {
				path := root.Child("providers", api.name).Index(i)
				secret(prov.APIKey, path.Child("apiKey"))
				for _, k := range slices.Sorted(maps.Keys(prov.SecretRefs)) {
					sel := prov.SecretRefs[k]
					secret(&sel, path.Child("secretRefs").Key(k))
				}
			}
		}
	}
	if st := spec.Storage; st != nil {
		if st.KV != nil {
			secret(st.KV.Password, root.Child("storage", "kv", "password"))
		}
		if st.SQL != nil {
			secret(st.SQL.ConnectionString, root.Child("storage", "sql", "connectionString"))
		}
	}
	if o := spec.OverrideConfig; o != nil {
		add(KindConfigMap, o.ConfigMapName, o.KeyOrDefault(), root.Child("overrideConfig", "configMapName"))
	}
	if n := spec.Networking; n != nil && n.TLS != nil && n.TLS.Enabled {
		add(KindSecret, n.TLS.SecretName, "tls.crt", root.Child("networking", "tls", "secretName"))
		add(KindSecret, n.TLS.SecretName, "tls.key", root.Child("networking", "tls", "secretName"))
		if ca := n.TLS.CABundle; ca != nil {
			add(KindConfigMap, ca.ConfigMapName, ca.KeyOrDefault(), root.Child("networking", "tls", "caBundle"))
		}
	}
	if w := spec.Workload; w != nil {
		for i, e := range w.Env {
			if e.ValueFrom == nil {
				continue
			}
			path := root.Child("workload", "env").Index(i).Child("valueFrom")
			secret(e.ValueFrom.SecretKeyRef, path.Child("secretKeyRef"))
			if cm := e.ValueFrom.ConfigMapKeyRef; cm != nil && (cm.Optional == nil || !*cm.Optional) {
				add(KindConfigMap, cm.Name, cm.Key, path.Child("configMapKeyRef"))
			}
		}
	}
	slices.SortFunc(refs, func(a, b Reference) int {
		if c := strings.Compare(a.Kind, b.Kind); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return refs
}
