package olm

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/inferencestack/inferencestack/test/testenv"
)

// CatalogNameLabel is the label catalogd's mutating webhook puts on every
// ClusterCatalog; ClusterExtensions select catalogs by it.
const CatalogNameLabel = "olm.operatorframework.io/metadata.name"

// Condition types and reasons of OLM v1 (operator-controller api/v1) read by the tests.
const (
	TypeServing     = "Serving"
	TypeInstalled   = "Installed"
	TypeProgressing = "Progressing"
	ReasonSucceeded = "Succeeded"
	ReasonRetrying  = "Retrying"
)

// ReadObjects decodes every YAML document of path into unstructured objects.
func ReadObjects(path string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var objs []*unstructured.Unstructured
	for {
		doc, err := dec.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		u := &unstructured.Unstructured{}
		if err := utilyaml.Unmarshal(doc, &u.Object); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		objs = append(objs, u)
	}
}

// Apply server-side applies objs in order. A ClusterCatalog gets the
// CatalogNameLabel catalogd's (absent) webhook would set.
func (c *Cluster) Apply(ctx context.Context, objs ...*unstructured.Unstructured) error {
	for _, u := range objs {
		if u.GetKind() == "ClusterCatalog" {
			labels := u.GetLabels()
			if labels == nil {
				labels = map[string]string{}
			}
			labels[CatalogNameLabel] = u.GetName()
			u.SetLabels(labels)
		}
		err := c.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("test/olm"), client.ForceOwnership)
		if err != nil {
			return fmt.Errorf("applying %s %s: %w", u.GetKind(), name(u), err)
		}
	}
	return nil
}

// WaitCondition polls obj until its condition condType has status True (and
// returns it), or fails after timeout naming every condition it last had.
func (c *Cluster) WaitCondition(ctx context.Context, obj *unstructured.Unstructured, condType string, timeout time.Duration) (metav1.Condition, error) {
	return c.WaitFor(ctx, obj, timeout, func(conds []metav1.Condition) (metav1.Condition, bool) {
		cond := meta.FindStatusCondition(conds, condType)
		if cond == nil || cond.Status != metav1.ConditionTrue || cond.ObservedGeneration != obj.GetGeneration() {
			return metav1.Condition{}, false
		}
		return *cond, true
	})
}

// WaitFor polls obj (refreshed in place) until done accepts its conditions,
// or fails after timeout naming every condition it last had.
func (c *Cluster) WaitFor(ctx context.Context, obj *unstructured.Unstructured, timeout time.Duration, done func([]metav1.Condition) (metav1.Condition, bool)) (metav1.Condition, error) {
	var found metav1.Condition
	var last []metav1.Condition
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		var err error
		if last, err = Conditions(obj); err != nil {
			return false, err
		}
		var ok bool
		found, ok = done(last)
		return ok, nil
	})
	if err != nil {
		return found, fmt.Errorf("%s %s (generation %d) did not get there in %s: %w; its conditions: %s",
			obj.GetKind(), name(obj), obj.GetGeneration(), timeout, err, FormatConditions(last))
	}
	return found, nil
}

// Conditions reads status.conditions of an unstructured object.
func Conditions(obj *unstructured.Unstructured) ([]metav1.Condition, error) {
	raw, _, err := unstructured.NestedSlice(obj.Object, "status", "conditions")
	if err != nil {
		return nil, err
	}
	var conds []metav1.Condition
	for _, r := range raw {
		m, ok := r.(map[string]any)
		if !ok {
			continue
		}
		var cond metav1.Condition
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &cond); err != nil {
			return nil, err
		}
		conds = append(conds, cond)
	}
	return conds, nil
}

// FormatConditions prints conditions one per line for error messages.
func FormatConditions(conds []metav1.Condition) string {
	if len(conds) == 0 {
		return "(none)"
	}
	var b strings.Builder
	for _, c := range conds {
		fmt.Fprintf(&b, "\n  %s=%s reason=%s generation=%d: %s", c.Type, c.Status, c.Reason, c.ObservedGeneration, c.Message)
	}
	return b.String()
}

// ApplyForTest applies objs and, when the test ends, deletes them in reverse
// order (namespaces too) and waits until they are gone, so the next test
// starts from a clean cluster.
func (c *Cluster) ApplyForTest(t testing.TB, timeout time.Duration, objs ...*unstructured.Unstructured) {
	t.Helper()
	ctx := context.Background()
	if err := c.Apply(ctx, objs...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for i := len(objs) - 1; i >= 0; i-- {
			if err := c.Delete(ctx, timeout, objs[i]); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
	})
}

// Delete deletes objs and waits until they are gone (OLM's finalizers and the
// garbage collector included).
func (c *Cluster) Delete(ctx context.Context, timeout time.Duration, objs ...*unstructured.Unstructured) error {
	for _, u := range objs {
		if err := c.Client.Delete(ctx, u); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting %s %s: %w", u.GetKind(), name(u), err)
		}
	}
	for _, u := range objs {
		err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
			err := c.Client.Get(ctx, client.ObjectKeyFromObject(u), u.DeepCopy())
			return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
		})
		if err != nil {
			return fmt.Errorf("%s %s still exists %s after deletion: %w%s", u.GetKind(), name(u), timeout, err, c.stuck(ctx, u))
		}
	}
	return nil
}

// CatalogContent fetches everything catalogd serves for a Serving
// ClusterCatalog (its /api/v1/all endpoint, a stream of JSON objects) over
// HTTPS, trusting the test CA.
func (c *Cluster) CatalogContent(ctx context.Context, catalog *unstructured.Unstructured) ([]byte, error) {
	base, _, err := unstructured.NestedString(catalog.Object, "status", "urls", "base")
	if err != nil || base == "" {
		return nil, fmt.Errorf("ClusterCatalog %s has no status.urls.base (is it Serving?)", catalog.GetName())
	}
	ca, err := os.ReadFile(filepath.Join(c.dir, "certs", "ca.crt"))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(base, "/")+"/api/v1/all", nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetching the content of ClusterCatalog %s from catalogd: %w", catalog.GetName(), err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("catalogd answered %s for %s: %s", resp.Status, req.URL, body)
	}
	return body, nil
}

// ClusterRolesWithPrefix lists the names of ClusterRoles starting with prefix
// (OLM v1 names a CSV's generated roles <csv>-<serviceaccount>-<hash>).
func (c *Cluster) ClusterRolesWithPrefix(ctx context.Context, prefix string) ([]string, error) {
	list := &unstructured.UnstructuredList{}
	list.SetAPIVersion("rbac.authorization.k8s.io/v1")
	list.SetKind("ClusterRoleList")
	if err := c.Client.List(ctx, list); err != nil {
		return nil, err
	}
	var names []string
	for _, r := range list.Items {
		if strings.HasPrefix(r.GetName(), prefix) {
			names = append(names, r.GetName())
		}
	}
	slices.Sort(names)
	return names, nil
}

func name(u *unstructured.Unstructured) string {
	if u.GetNamespace() == "" {
		return u.GetName()
	}
	return u.GetNamespace() + "/" + u.GetName()
}

// WaitOwnerReferences waits until the API server's
// OwnerReferencesPermissionEnforcement admission plugin, which refreshes its
// list of API types every 30 s, knows the kind of owner (an object that
// exists): until then it refuses owner references to that kind with
// blockOwnerDeletion from anyone who may not update the finalizers of every
// resource. It probes as the client as, with a dry-run ConfigMap in owner's
// namespace, and fails at once on any other refusal (as lacks a permission).
func (c *Cluster) WaitOwnerReferences(ctx context.Context, as client.Client, owner client.Object, timeout time.Duration) error {
	gvk, err := c.Client.GroupVersionKindFor(owner)
	if err != nil {
		return err
	}
	probe := &unstructured.Unstructured{}
	probe.SetAPIVersion("v1")
	probe.SetKind("ConfigMap")
	probe.SetNamespace(owner.GetNamespace())
	probe.SetGenerateName("owner-reference-probe-")
	probe.SetOwnerReferences([]metav1.OwnerReference{{
		APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Name: owner.GetName(), UID: owner.GetUID(),
		BlockOwnerDeletion: ptr.To(true),
	}})
	var last error
	err = wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		last = as.Create(ctx, probe.DeepCopy(), client.DryRunAll)
		switch {
		case last == nil:
			return true, nil
		case strings.Contains(last.Error(), "cannot find RESTMapping"):
			return false, nil
		default:
			return false, last
		}
	})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, last):
		return fmt.Errorf("owner references to %s: %w", gvk.Kind, err)
	default:
		return fmt.Errorf("owner references to %s: %w (last: %w)", gvk.Kind, err, last)
	}
}

// stuck says why a deleted object may still be there: its finalizers and
// conditions, and whether catalogd and operator-controller still run.
func (c *Cluster) stuck(ctx context.Context, u *unstructured.Unstructured) string {
	var b strings.Builder
	now := u.DeepCopy()
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(u), now); err == nil {
		conds, _ := Conditions(now)
		fmt.Fprintf(&b, "\n  deletionTimestamp %v, finalizers %q, conditions: %s", now.GetDeletionTimestamp(), now.GetFinalizers(), FormatConditions(conds))
	}
	for _, p := range c.procs {
		if ended, err := p.Wait(0); ended {
			fmt.Fprintf(&b, "\n  %s exited: %v; its log:\n%s", p.name, err, testenv.LastLines(p.Log(), 20))
		} else {
			fmt.Fprintf(&b, "\n  %s runs (pid %d)", p.name, p.Cmd.Process.Pid)
		}
	}
	return b.String()
}
