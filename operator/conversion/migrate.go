package conversion

import (
	"context"
	"errors"
	"fmt"
	"slices"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// Migration is what Migrate did.
type Migration struct {
	// Storage is the CRD's storage version every object is now stored in.
	Storage string
	// Rewritten is how many objects were written again.
	Rewritten int
	// Before is status.storedVersions before; after it is [Storage].
	Before []string
}

// Migrate moves every object of the CRD to its storage version, the way
// kube-storage-version-migrator does: each object is written back unchanged
// through the storage version (the API server then encodes it in that
// version), and once all are, status.storedVersions is trimmed to the
// storage version. Only then may a CRD release stop serving the older
// versions: OLM v1's preflight refuses a CRD that drops a version still in
// storedVersions. An object changed meanwhile by someone else is read again
// and rewritten; one deleted meanwhile is skipped; one the API server
// refuses to write fails only itself: the others are rewritten, and the
// error names each one while storedVersions stays as it was.
func Migrate(ctx context.Context, dyn dynamic.Interface, ext apiextensionsclient.Interface, crdName string) (Migration, error) {
	crds := ext.ApiextensionsV1().CustomResourceDefinitions()
	crd, err := crds.Get(ctx, crdName, metav1.GetOptions{})
	if err != nil {
		return Migration{}, fmt.Errorf("reading CRD %s: %w", crdName, err)
	}
	m := Migration{Before: slices.Clone(crd.Status.StoredVersions)}
	if m.Storage = StorageVersion(crd); m.Storage == "" {
		return m, fmt.Errorf("CRD %s has no storage version", crdName)
	}
	res := dyn.Resource(schema.GroupVersionResource{Group: crd.Spec.Group, Version: m.Storage, Resource: crd.Spec.Names.Plural})
	// One object the API server refuses to write back fails that object
	// only: the others are rewritten, and storedVersions is not trimmed.
	var failed []error
	cont := ""
	for {
		list, err := res.List(ctx, metav1.ListOptions{Limit: 250, Continue: cont})
		if err != nil {
			return m, fmt.Errorf("listing %s through %s: %w", crdName, m.Storage, err)
		}
		for _, item := range list.Items {
			obj := item.DeepCopy()
			for {
				_, err := res.Namespace(obj.GetNamespace()).Update(ctx, obj, metav1.UpdateOptions{})
				if err == nil {
					m.Rewritten++
					break
				}
				if apierrors.IsNotFound(err) {
					break
				}
				if !apierrors.IsConflict(err) {
					failed = append(failed, fmt.Errorf("rewriting %s %s/%s: %w", crd.Spec.Names.Kind, obj.GetNamespace(), obj.GetName(), err))
					break
				}
				if obj, err = res.Namespace(obj.GetNamespace()).Get(ctx, obj.GetName(), metav1.GetOptions{}); err != nil {
					if !apierrors.IsNotFound(err) {
						failed = append(failed, fmt.Errorf("reading %s %s/%s again: %w", crd.Spec.Names.Kind, item.GetNamespace(), item.GetName(), err))
					}
					break
				}
			}
		}
		if cont = list.GetContinue(); cont == "" {
			break
		}
	}
	if len(failed) > 0 {
		return m, fmt.Errorf("%d objects of CRD %s were not rewritten through %s (%d were), so status.storedVersions stays %v: "+
			"fix or delete them and run the migration again: %w", len(failed), crdName, m.Storage, m.Rewritten, m.Before, errors.Join(failed...))
	}
	for {
		crd.Status.StoredVersions = []string{m.Storage}
		_, err := crds.UpdateStatus(ctx, crd, metav1.UpdateOptions{})
		if err == nil {
			return m, nil
		}
		if !apierrors.IsConflict(err) {
			return m, fmt.Errorf("trimming status.storedVersions of CRD %s to [%s]: %w", crdName, m.Storage, err)
		}
		if crd, err = crds.Get(ctx, crdName, metav1.GetOptions{}); err != nil {
			return m, err
		}
		if StorageVersion(crd) != m.Storage {
			return m, fmt.Errorf("CRD %s changed its storage version during the migration: run it again", crdName)
		}
	}
}

// StorageVersion is the version crd stores ("" when it names none).
func StorageVersion(crd *apiextensionsv1.CustomResourceDefinition) string {
	i := slices.IndexFunc(crd.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool { return v.Storage })
	if i < 0 {
		return ""
	}
	return crd.Spec.Versions[i].Name
}
