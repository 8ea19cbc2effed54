package testenv_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/inferencestack/inferencestack/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.RunMain(m, testenv.Options{
		CRDDirectoryPaths: []string{"testdata/widgets.yaml"},
		GarbageCollector:  true,
	}, &env)
}

func widget(name string, min, max int64) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("testenv.inferencestack.io/v1")
	u.SetKind("Widget")
	u.SetNamespace("default")
	u.SetName(name)
	u.Object["spec"] = map[string]any{"min": min, "max": max}
	return u
}

func TestCELRuleIsEnforced(t *testing.T) {
	ctx := context.Background()

	err := env.Client.Create(ctx, widget("inverted", 5, 1))
	require.True(t, apierrors.IsInvalid(err), "want Invalid, got %v", err)
	require.ErrorContains(t, err, "spec.min must not be greater than spec.max")

	require.NoError(t, env.Client.Create(ctx, widget("ordered", 1, 5)))
}

func TestOwnedObjectIsGarbageCollected(t *testing.T) {
	ctx := context.Background()
	owner := widget("owner", 0, 1)
	require.NoError(t, env.Client.Create(ctx, owner))

	owned := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: "owned", Namespace: "default",
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "testenv.inferencestack.io/v1", Kind: "Widget",
			Name: owner.GetName(), UID: owner.GetUID(), Controller: ptr.To(true),
		}},
	}}
	require.NoError(t, env.Client.Create(ctx, owned))

	require.NoError(t, env.Client.Delete(ctx, owner))
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(owned), &corev1.ConfigMap{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	require.NoError(t, err, "the owned ConfigMap was not garbage-collected after its owner was deleted")
}

// TestServingHostsUsersAndRemovedFlags starts a second control plane with
// extra names in the serving certificate (as for the `kubernetes` Service),
// without the flag envtest sets to disable the ServiceAccount admission
// plugin, and checks a client certificate user's identity.
func TestServingHostsUsersAndRemovedFlags(t *testing.T) {
	ctx := context.Background()
	e, err := testenv.Start(testenv.Options{
		ServingAddress: "127.0.0.1",
		ServingHosts:   []string{"10.0.0.1", "kubernetes.default.svc"},
		APIServerArgs:  map[string][]string{"disable-admission-plugins": nil},
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, e.Stop()) })

	// The serving certificate names the extra hosts and is trusted through Config.
	u, err := url.Parse(e.Config.Host)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(e.Config.CAData))
	conn, err := tls.Dial("tcp", u.Host, &tls.Config{RootCAs: pool, ServerName: "10.0.0.1", MinVersion: tls.VersionTLS12})
	require.NoError(t, err, "the serving certificate is not valid for 10.0.0.1")
	cert := conn.ConnectionState().PeerCertificates[0]
	require.NoError(t, conn.Close())
	require.Contains(t, cert.DNSNames, "kubernetes.default.svc")

	// A user authenticated by a client certificate.
	kubeconfig, err := e.KubeconfigForUser("alice", "devs")
	require.NoError(t, err)
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	require.NoError(t, err)
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Equal(t, "alice", review.Status.UserInfo.Username)
	require.Contains(t, review.Status.UserInfo.Groups, "devs")

	// The ServiceAccount admission plugin runs: with no controller making
	// the default ServiceAccount, a pod needing it is refused.
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.invalid/c"}}},
	}
	err = e.Client.Create(ctx, pod)
	require.ErrorContains(t, err, `serviceaccount "default" not found`)
}
