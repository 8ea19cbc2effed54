package serverstatus

import (
	"context"
	"fmt"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/components"
)

// TokenLifetime is how long a requested token lives: the shortest the
// TokenRequest API issues (10 minutes). A token is renewed once RenewAfter
// of its life has passed, so a server never sees one about to expire.
const (
	TokenLifetime = 10 * time.Minute
	RenewAfter    = 0.8
)

// tokenCache keeps one token per stack, dropped when the prober forgets
// the stack.
type tokenCache struct {
	mu     sync.Mutex
	tokens map[types.NamespacedName]cachedToken
}

type cachedToken struct {
	// uid and identity are the stack and ServiceAccount it was issued for.
	uid      types.UID
	identity string
	token    string
	renewAt  time.Time
}

func (c *tokenCache) get(t Target, now time.Time) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	tok, ok := c.tokens[t.Stack]
	if !ok || tok.uid != t.UID || tok.identity != t.Identity || !now.Before(tok.renewAt) {
		return "", false
	}
	return tok.token, true
}

func (c *tokenCache) put(stack types.NamespacedName, tok cachedToken) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tokens == nil {
		c.tokens = map[types.NamespacedName]cachedToken{}
	}
	c.tokens[stack] = tok
}

func (c *tokenCache) drop(stack types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.tokens, stack)
}

// len is how many tokens the cache holds.
func (c *tokenCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.tokens)
}

// rbac: the prober requests tokens of the ServiceAccount the operator made for each stack with kubernetes auth
// (server.ProberServiceAccount); RBAC cannot narrow a verb to names that follow a pattern, so token checks ownership
// before each request
// +kubebuilder:rbac:groups="",resources=serviceaccounts/token,verbs=create

// token is a token the prober presents to the stack's server: of the
// ServiceAccount the operator made for that stack and nothing else
// (t.Identity), which holds no RBAC, bound to the stack's prober Secret (so
// deleting it, or the stack, revokes the token), for the API server's own
// audience (the server's kubernetes auth sends it back to the API server
// in a SelfSubjectReview: upstream core/server/auth_providers.py,
// KubernetesAuthProvider.validate_token, at v0.2.23 and v0.3.0; a token for
// any other audience is refused there), living TokenLifetime.
//
// Before each request it reads the ServiceAccount and the Secret from the
// API server and refuses unless both are the operator's for this very
// stack (its label and the stack's UID as controller): a name alone proves
// nothing, since a user may have made an object of that name.
func (p *Prober) token(ctx context.Context, t Target) (string, error) {
	if tok, ok := p.tokens.get(t, p.now()); ok {
		return tok, nil
	}
	key := client.ObjectKey{Namespace: t.Stack.Namespace, Name: t.Identity}
	ours := components.Owned(&v1alpha2.InferenceStack{ObjectMeta: metav1.ObjectMeta{
		Namespace: t.Stack.Namespace, Name: t.Stack.Name, UID: t.UID}})
	sa := &corev1.ServiceAccount{}
	secret := &corev1.Secret{}
	for _, obj := range []client.Object{sa, secret} {
		if err := p.Reader.Get(ctx, key, obj); err != nil {
			return "", fmt.Errorf("reading the prober's identity %s: %w", key, err)
		}
		if !ours(obj) {
			return "", fmt.Errorf("%T %s is not the operator's for this stack: no token is requested for it", obj, key)
		}
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: ptr.To(int64(TokenLifetime.Seconds())),
		BoundObjectRef:    &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Secret", Name: secret.Name, UID: secret.UID},
	}}
	if err := p.Client.SubResource("token").Create(ctx, sa, tr); err != nil {
		return "", fmt.Errorf("requesting a token of ServiceAccount %s: %w", key, err)
	}
	now := p.now()
	life := tr.Status.ExpirationTimestamp.Sub(now)
	p.tokens.put(t.Stack, cachedToken{uid: t.UID, identity: t.Identity, token: tr.Status.Token,
		renewAt: now.Add(time.Duration(float64(life) * RenewAfter))})
	return tr.Status.Token, nil
}

// now is the prober's clock (Clock, or time.Now).
func (p *Prober) now() time.Time {
	if p.Clock != nil {
		return p.Clock()
	}
	return time.Now()
}
