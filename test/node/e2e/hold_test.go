//go:build e2e

package e2e_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/inferencestack/inferencestack/test/testenv"
)

// writeHold is a validating admission webhook, served by the test, that
// sees every write of one user to the objects an operator writes in one
// namespace and holds the first that pick accepts: the API server does
// not answer that write until Release or Deny, so its writer is observably
// in the middle of what made the write, and stays there. Every other write
// is allowed at once.
type writeHold struct {
	// Held receives the held write's request once.
	Held chan *admissionv1.AdmissionRequest

	user     string
	pick     func(*admissionv1.AdmissionRequest) bool
	release  chan struct{}
	released sync.Once
	deny     bool // the answer to the held write, set before release closes
	stopped  sync.Once
	server   *httptest.Server
	config   *admissionregistrationv1.ValidatingWebhookConfiguration

	mu      sync.Mutex
	holding bool
	probed  bool
	// seen are the user's writes before the held one ("OPERATION
	// resource/name").
	seen []string
}

// holdProbe is the ConfigMap a dry-run create of which tells that the API
// server calls the webhook.
const holdProbe = "write-hold-probe"

// holdWrite registers a writeHold for user's writes in namespace ns and
// waits until the API server calls it. It is removed when the test ends,
// or by Stop.
func holdWrite(t *testing.T, ns, user string, pick func(*admissionv1.AdmissionRequest) bool) *writeHold {
	t.Helper()
	ctx := context.Background()
	h := &writeHold{Held: make(chan *admissionv1.AdmissionRequest, 1), user: user, pick: pick, release: make(chan struct{})}
	cert, err := testenv.NewServingCert("test/node/e2e write hold CA", []string{"127.0.0.1"})
	require.NoError(t, err)
	pair, err := tls.X509KeyPair(cert.Cert, cert.Key)
	require.NoError(t, err)
	// The API server runs on this machine: it reaches the test on the
	// loopback address.
	h.server = httptest.NewUnstartedServer(http.HandlerFunc(h.serve))
	h.server.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	h.server.StartTLS()

	rule := func(group string, resources ...string) admissionregistrationv1.RuleWithOperations {
		return admissionregistrationv1.RuleWithOperations{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete},
			Rule: admissionregistrationv1.Rule{APIGroups: []string{group}, APIVersions: []string{"*"}, Resources: resources,
				Scope: ptr.To(admissionregistrationv1.NamespacedScope)},
		}
	}
	h.config = &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "test-write-hold-" + ns},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "write-hold.test.inferencestack.io",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: ptr.To(h.server.URL + "/hold"), CABundle: cert.CA},
			AdmissionReviewVersions: []string{"v1"},
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			// Ignore: a test that stops before Stop leaves no webhook that
			// blocks writes; the probe shows the webhook is called.
			FailurePolicy:  ptr.To(admissionregistrationv1.Ignore),
			TimeoutSeconds: ptr.To[int32](30),
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{
				corev1.LabelMetadataName: ns}},
			Rules: []admissionregistrationv1.RuleWithOperations{
				rule("", "configmaps", "secrets", "services", "serviceaccounts", "persistentvolumeclaims"),
				rule("apps", "deployments"),
				rule("networking.k8s.io", "networkpolicies"),
				rule("autoscaling", "horizontalpodautoscalers"),
				rule("policy", "poddisruptionbudgets"),
				rule("inferencestack.io", "inferencestacks", "inferencestacks/status"),
			},
		}},
	}
	require.NoError(t, node.Env.Client.Create(ctx, h.config))
	t.Cleanup(h.Stop)

	// The API server learns of webhooks from a watch: a dry-run write
	// matched by the webhook shows when it does.
	probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: holdProbe}}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := node.Env.Client.Create(ctx, probe.DeepCopy(), client.DryRunAll); err != nil {
			return false, err
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.probed, nil
	})
	require.NoError(t, err, "the API server did not call the write hold webhook at %s", h.server.URL)
	return h
}

// serve answers an AdmissionReview: allowed, but the held write once
// released, as Release or Deny said.
func (h *writeHold) serve(w http.ResponseWriter, r *http.Request) {
	review := &admissionv1.AdmissionReview{}
	if err := json.NewDecoder(r.Body).Decode(review); err != nil || review.Request == nil {
		http.Error(w, fmt.Sprintf("not an AdmissionReview: %v", err), http.StatusBadRequest)
		return
	}
	req := review.Request
	hold := false
	h.mu.Lock()
	switch {
	case req.Name == holdProbe && ptr.Deref(req.DryRun, false):
		h.probed = true
	case req.UserInfo.Username != h.user || ptr.Deref(req.DryRun, false):
	case !h.holding && h.pick(req):
		h.holding, hold = true, true
	default:
		h.seen = append(h.seen, fmt.Sprintf("%s %s/%s", req.Operation, resourceOf(req), req.Name))
	}
	h.mu.Unlock()
	review.Response = &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}
	if hold {
		h.Held <- req
		select {
		case <-h.release:
			if h.deny {
				review.Response.Allowed = false
				review.Response.Result = &metav1.Status{Message: "refused by the test's write hold", Code: http.StatusForbidden}
			}
		case <-r.Context().Done():
		}
	}
	review.Request = nil
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(review)
}

// Release lets the held write go on.
func (h *writeHold) Release() { h.released.Do(func() { close(h.release) }) }

// Deny refuses the held write: the API server does not make it.
func (h *writeHold) Deny() {
	h.released.Do(func() {
		h.deny = true
		close(h.release)
	})
}

// Seen returns the user's writes the webhook saw before the held one.
func (h *writeHold) Seen() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.seen...)
}

// Stop removes the webhook, releases a held write and stops the server.
func (h *writeHold) Stop() {
	h.stopped.Do(func() {
		_ = client.IgnoreNotFound(node.Env.Client.Delete(context.Background(), h.config))
		h.Release()
		h.server.Close()
	})
}

// resourceOf names the request's resource (and subresource).
func resourceOf(req *admissionv1.AdmissionRequest) string {
	if req.SubResource != "" {
		return req.Resource.Resource + "/" + req.SubResource
	}
	return req.Resource.Resource
}
