package testenv

import (
	"context"
	"fmt"
	"os"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Token requests a token of the ServiceAccount namespace/name, valid for
// ttl (at least 10 minutes), from the TokenRequest API (what `kubectl create
// token` calls).
func (e *Env) Token(ctx context.Context, namespace, name string, ttl time.Duration) (string, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(ttl.Seconds()))}}
	if err := e.Client.SubResource("token").Create(ctx, sa, tr); err != nil {
		return "", fmt.Errorf("testenv: requesting a token for service account %s/%s (does it exist?): %w", namespace, name, err)
	}
	return tr.Status.Token, nil
}

// KubeconfigFor writes a kubeconfig that reaches the API server (trusting
// its CA) with token as bearer token, and returns its path. The file lives
// until Stop.
func (e *Env) KubeconfigFor(token string) (string, error) {
	return e.writeKubeconfig(&clientcmdapi.AuthInfo{Token: token})
}

// KubeconfigForUser writes a kubeconfig that reaches the API server as the
// user name in groups, authenticated by a client certificate (as the
// control plane's components and kubelets are), and returns its path. The
// file lives until Stop.
func (e *Env) KubeconfigForUser(name string, groups ...string) (string, error) {
	user, err := e.env.AddUser(envtest.User{Name: name, Groups: groups}, nil)
	if err != nil {
		return "", fmt.Errorf("testenv: adding user %s: %w", name, err)
	}
	cfg := user.Config()
	return e.writeKubeconfig(&clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData})
}

func (e *Env) writeKubeconfig(auth *clientcmdapi.AuthInfo) (string, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["testenv"] = &clientcmdapi.Cluster{Server: e.Config.Host, CertificateAuthorityData: e.Config.CAData}
	cfg.AuthInfos["user"] = auth
	cfg.Contexts["testenv"] = &clientcmdapi.Context{Cluster: "testenv", AuthInfo: "user"}
	cfg.CurrentContext = "testenv"
	f, err := os.CreateTemp(e.dir, "kubeconfig-")
	if err != nil {
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	if err := clientcmd.WriteToFile(*cfg, f.Name()); err != nil {
		return "", fmt.Errorf("testenv: writing a kubeconfig: %w", err)
	}
	return f.Name(), nil
}
