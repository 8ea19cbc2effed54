package cache_test

import (
	"errors"
	"path"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	"github.com/inferencestack/inferencestack/operator/components/cache"
	"github.com/inferencestack/inferencestack/test/testutil"
)

func TestDataOutlivesTheStack(t *testing.T) {
	stack := testutil.Hub(testutil.Stack("s", testutil.WithCache(), testutil.WithSpec(func(s *v1alpha1.InferenceStackSpec) {
		s.Cache.StorageSize = ptr(resource.MustParse("5Gi"))
	})))
	pvc := cache.PVC(stack)
	if len(pvc.OwnerReferences) != 0 {
		t.Error("the cache volume claim has an owner reference: garbage collection would delete its data")
	}
	if got := pvc.Spec.Resources.Requests.Storage().String(); got != "5Gi" {
		t.Errorf("storage %s, want 5Gi", got)
	}
	secret, err := cache.PasswordSecret(stack)
	if err != nil {
		t.Fatal(err)
	}
	if len(secret.OwnerReferences) != 0 || len(secret.Data["password"]) < 24 {
		t.Errorf("password Secret %+v", secret)
	}
	other, _ := cache.PasswordSecret(stack)
	if string(other.Data["password"]) == string(secret.Data["password"]) {
		t.Error("two password Secrets share a password")
	}
	if !cache.Retained(stack) {
		t.Error("retainOnDelete defaults to true")
	}
}

func ptr[T any](v T) *T { return &v }

// TestPodSecurity: restricted in both modes; a user, group and fsGroup only
// when the operator is given one (never on OpenShift, whose restricted-v2
// SCC assigns them), and PGDATA below the volume's root either way.
func TestPodSecurity(t *testing.T) {
	tests := []struct {
		name string
		user *int64
	}{
		{name: "assigned by the platform"},
		{name: "fixed user", user: ptr(cache.PostgresUID)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := cache.Deployment(testutil.Hub(testutil.Stack("s", testutil.WithCache())), cache.Pod{Image: "postgres:16", RunAsUser: tc.user})
			pod := d.Spec.Template.Spec
			psc := pod.SecurityContext
			if !*psc.RunAsNonRoot || *psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
				t.Errorf("pod security context %+v is not restricted", psc)
			}
			for what, got := range map[string]*int64{"runAsUser": psc.RunAsUser, "runAsGroup": psc.RunAsGroup, "fsGroup": psc.FSGroup} {
				if !equal(got, tc.user) {
					t.Errorf("%s = %v, want %v", what, deref(got), deref(tc.user))
				}
			}
			c := pod.Containers[0]
			sc := c.SecurityContext
			if *sc.AllowPrivilegeEscalation || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" || !*sc.RunAsNonRoot || sc.RunAsUser != nil {
				t.Errorf("container security context %+v is not restricted", sc)
			}
			var pgdata string
			for _, e := range c.Env {
				if *e.Name == "PGDATA" {
					pgdata = *e.Value
				}
			}
			var mount string
			for _, m := range c.VolumeMounts {
				if *m.Name == "data" {
					mount = *m.MountPath
				}
			}
			if pgdata != cache.PGData || path.Dir(pgdata) != mount {
				t.Errorf("PGDATA %q, data volume at %q: PGDATA must be a directory right below the volume's root", pgdata, mount)
			}
		})
	}
}

// TestProbes: the cache is ready as soon as pg_isready says so; only the
// liveness probe waits 30 s (found on the node: a shared probe made the
// readiness probe wait too).
func TestProbes(t *testing.T) {
	c := cache.Deployment(testutil.Hub(testutil.Stack("s", testutil.WithCache())), cache.Pod{Image: "postgres:16"}).Spec.Template.Spec.Containers[0]
	require.Nil(t, c.ReadinessProbe.InitialDelaySeconds, "readiness probe delay")
	require.Equal(t, int32(30), *c.LivenessProbe.InitialDelaySeconds, "liveness probe delay")
	require.Equal(t, []string{"pg_isready", "-U", "llamastack", "-d", "llamastack"}, c.ReadinessProbe.Exec.Command)
	require.Equal(t, c.ReadinessProbe.Exec.Command, c.LivenessProbe.Exec.Command)
}

func TestRunAsUser(t *testing.T) {
	groups := func(names ...string) func() (*metav1.APIGroupList, error) {
		return func() (*metav1.APIGroupList, error) {
			l := &metav1.APIGroupList{}
			for _, n := range names {
				l.Groups = append(l.Groups, metav1.APIGroup{Name: n})
			}
			return l, nil
		}
	}
	failing := func() (*metav1.APIGroupList, error) { return nil, errors.New("connection refused") }
	tests := []struct {
		name      string
		flag      string
		groups    func() (*metav1.APIGroupList, error)
		want      *int64
		assertion require.ErrorAssertionFunc
	}{
		{name: "auto on OpenShift", flag: cache.Auto, groups: groups("apps", "security.openshift.io"), assertion: require.NoError},
		{name: "auto elsewhere", flag: cache.Auto, groups: groups("apps", "policy"), want: ptr(cache.PostgresUID), assertion: require.NoError},
		{name: "platform", flag: cache.Platform, groups: failing, assertion: require.NoError},
		{name: "a user id", flag: "26", groups: failing, want: ptr[int64](26), assertion: require.NoError},
		{name: "auto without discovery", flag: cache.Auto, groups: failing, assertion: require.Error},
		{name: "root", flag: "0", groups: failing, assertion: require.Error},
		{name: "a name", flag: "postgres", groups: failing, assertion: require.Error},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := cache.RunAsUser(tc.flag, tc.groups)
			tc.assertion(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func equal(a, b *int64) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func deref(p *int64) any {
	if p == nil {
		return "unset"
	}
	return *p
}
