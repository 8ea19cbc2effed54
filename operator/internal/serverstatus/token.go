package serverstatus

import (
	"context"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// tokenLifetime is how long a requested token lives: long enough that the
// (writing) TokenRequests are rare, renewed at 80% of it.
const tokenLifetime = time.Hour

// tokenCache keeps one token per ServiceAccount ("namespace/name").
type tokenCache struct {
	mu     sync.Mutex
	tokens map[string]cachedToken
}

type cachedToken struct {
	token   string
	renewAt time.Time
}

// rbac: the prober requests a token of a stack's server ServiceAccount (TokenRequest) to read a server with kubernetes auth
// +kubebuilder:rbac:groups="",resources=serviceaccounts/token,verbs=create

// token is a token of the ServiceAccount, for the API server's audience:
// the server's kubernetes auth provider sends it back to the API server in
// a SelfSubjectReview (upstream core/server/auth_providers.py at v0.2.23
// and v0.3.0), which admits any authenticated principal. It is the
// identity the server already runs as, so the server learns nothing it
// could not act as already.
func (p *Prober) token(ctx context.Context, namespace, name string) (string, error) {
	key := namespace + "/" + name
	p.tokens.mu.Lock()
	t, ok := p.tokens.tokens[key]
	p.tokens.mu.Unlock()
	if ok && time.Now().Before(t.renewAt) {
		return t.token, nil
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(tokenLifetime.Seconds()))}}
	if err := p.Client.SubResource("token").Create(ctx, sa, tr); err != nil {
		return "", err
	}
	now := time.Now()
	life := tr.Status.ExpirationTimestamp.Sub(now)
	p.tokens.mu.Lock()
	defer p.tokens.mu.Unlock()
	if p.tokens.tokens == nil {
		p.tokens.tokens = map[string]cachedToken{}
	}
	p.tokens.tokens[key] = cachedToken{token: tr.Status.Token, renewAt: now.Add(life * 8 / 10)}
	return tr.Status.Token, nil
}
