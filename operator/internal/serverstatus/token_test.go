package serverstatus

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/inferencestack/inferencestack/operator/components"
	"github.com/inferencestack/inferencestack/operator/runconfig/stackconfig"
)

// tokenRequests records the TokenRequests a fake API server answered, and
// answers them as the API server does: a token living what was asked,
// from the test's clock.
type tokenRequests struct {
	now  func() time.Time
	seen []string
}

func (r *tokenRequests) client(t *testing.T, objs ...client.Object) client.Client {
	s := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(s))
	return fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
		SubResourceCreate: func(ctx context.Context, c client.Client, sub string, obj client.Object, in client.Object, _ ...client.SubResourceCreateOption) error {
			tr, ok := in.(*authenticationv1.TokenRequest)
			if sub != "token" || !ok {
				return fmt.Errorf("unexpected create of %s", sub)
			}
			ref := tr.Spec.BoundObjectRef
			bound := "<none>"
			if ref != nil {
				bound = ref.Kind + "/" + ref.Name
			}
			r.seen = append(r.seen, fmt.Sprintf("%s/%s bound=%s exp=%d audiences=%v", obj.GetNamespace(), obj.GetName(),
				bound, ptr.Deref(tr.Spec.ExpirationSeconds, 0), tr.Spec.Audiences))
			tr.Status.Token = fmt.Sprintf("token-%d", len(r.seen))
			tr.Status.ExpirationTimestamp = metav1.NewTime(r.now().Add(time.Duration(*tr.Spec.ExpirationSeconds) * time.Second))
			return nil
		},
	}).Build()
}

// identity is the prober's ServiceAccount and Secret for the stack ns/name
// with uid, as the operator makes them.
func identity(name string, uid types.UID) []client.Object {
	meta := func() metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: "ns", Name: name + "-prober",
			Labels: map[string]string{components.LabelManagedBy: components.ManagedBy, components.LabelInstance: name},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "inferencestack.io/v1alpha1", Kind: "InferenceStack",
				Name: name, UID: uid, Controller: ptr.To(true)}}}
	}
	return []client.Object{&corev1.ServiceAccount{ObjectMeta: meta()}, &corev1.Secret{ObjectMeta: meta()}}
}

// TestTokenIsTheProbersShortLivedAndBound: the prober asks for a token of
// the stack's prober ServiceAccount only, bound to the stack's prober
// Secret, for the API server's audience, living 10 minutes; it reuses it
// until 80% of its life has passed, then renews it, and drops it when it
// forgets the stack.
func TestTokenIsTheProbersShortLivedAndBound(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	reqs := &tokenRequests{now: clock}
	c := reqs.client(t, identity("s", "uid-s")...)
	p := &Prober{Client: c, Reader: c, Clock: clock}
	target := Target{Stack: types.NamespacedName{Namespace: "ns", Name: "s"}, UID: "uid-s", Line: stackconfig.Line03,
		Identity: "s-prober"}

	tok, err := p.token(context.Background(), target)
	require.NoError(t, err)
	require.Equal(t, "token-1", tok)
	require.Equal(t, []string{"ns/s-prober bound=Secret/s-prober exp=600 audiences=[]"}, reqs.seen)

	now = now.Add(7*time.Minute + 59*time.Second)
	tok, err = p.token(context.Background(), target)
	require.NoError(t, err)
	require.Equal(t, "token-1", tok, "a token is reused until 80% of its life has passed")

	now = now.Add(time.Second)
	tok, err = p.token(context.Background(), target)
	require.NoError(t, err)
	require.Equal(t, "token-2", tok, "a token at 80% of its life is renewed")
	require.Equal(t, 1, p.Tokens())

	p.Forget(target.Stack)
	require.Equal(t, 0, p.Tokens(), "a forgotten stack's token is dropped")

	// A re-created stack (another UID) gets a token of its own.
	p.tokens.put(target.Stack, cachedToken{uid: "old", identity: "s-prober", token: "old", renewAt: now.Add(time.Hour)})
	tok, err = p.token(context.Background(), target)
	require.NoError(t, err)
	require.Equal(t, "token-3", tok)
}

// TestNoTokenForAnObjectThatIsNotTheStacks: a ServiceAccount or Secret of
// the prober's name that the operator did not make for this stack (a
// user's, another stack's) gets no token.
func TestNoTokenForAnObjectThatIsNotTheStacks(t *testing.T) {
	users := func() []client.Object {
		objs := identity("s", "uid-s")
		objs[0].SetLabels(nil)
		return objs
	}
	others := func() []client.Object {
		objs := identity("s", "uid-s")
		objs[1] = identity("s", "uid-other")[1]
		return objs
	}
	for name, objs := range map[string][]client.Object{
		"a user's ServiceAccount":     users(),
		"another stack's Secret":      others(),
		"no ServiceAccount at all":    identity("s", "uid-s")[1:],
		"no Secret to bind the token": identity("s", "uid-s")[:1],
	} {
		t.Run(name, func(t *testing.T) {
			reqs := &tokenRequests{now: time.Now}
			c := reqs.client(t, objs...)
			p := &Prober{Client: c, Reader: c}
			_, err := p.token(context.Background(), Target{Stack: types.NamespacedName{Namespace: "ns", Name: "s"},
				UID: "uid-s", Line: stackconfig.Line03, Identity: "s-prober"})
			require.Error(t, err)
			require.Empty(t, reqs.seen, "no token may be requested")
		})
	}
}

// TestTokenIsDroppedWhenNoLongerOfUse: the token cache shrinks when a
// stack no longer has the identity it was issued for (auth turned off) or
// is made anew (another UID), not only when the stack is forgotten.
func TestTokenIsDroppedWhenNoLongerOfUse(t *testing.T) {
	target := Target{Stack: types.NamespacedName{Namespace: "ns", Name: "s"}, UID: "uid-s", Line: stackconfig.Line03,
		Identity: "s-prober"}
	withToken := func() *Prober {
		p := &Prober{}
		p.Watch(target)
		p.tokens.put(target.Stack, cachedToken{uid: target.UID, identity: target.Identity, token: "t", renewAt: time.Now().Add(time.Hour)})
		return p
	}

	p := withToken()
	p.Watch(target)
	require.Equal(t, 1, p.Tokens(), "the same target keeps its token")

	noAuth := target
	noAuth.Identity = ""
	p.Watch(noAuth)
	require.Equal(t, 0, p.Tokens(), "a stack whose auth was turned off")

	p = withToken()
	again := target
	again.UID = "uid-s2"
	p.Watch(again)
	require.Equal(t, 0, p.Tokens(), "a stack made anew under the same name")
}
