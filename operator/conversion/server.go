// Package conversion is the InferenceStack conversion webhook: the HTTPS
// server the API server calls to convert InferenceStacks between the
// versions a CRD serves (through the hub, v1alpha2), with its own serving
// certificate. It ships with the CRD package, not with an operator major, so
// it lives as long as the CRD does whichever operators are installed
// (docs/api-versions.md).
//
// The certificate is made here, kept in a Secret (so a restart serves the
// same one), renewed in the last third of its validity, and its CA is put in
// the CRD's spec.conversion.webhook.clientConfig.caBundle: the one field of
// the CRD this server writes. The CRD package's bundle sets the rest of the
// conversion (strategy Webhook, the Service); that the bundle leaves
// caBundle out is what lets OLM v1 manage the CRD without undoing it.
package conversion

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	ctrlconversion "sigs.k8s.io/controller-runtime/pkg/webhook/conversion"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
)

// Path is where the server converts.
const Path = "/convert"

// Server is the conversion webhook.
type Server struct {
	Core       kubernetes.Interface
	Extensions apiextensionsclient.Interface
	// Namespace and SecretName are the Secret holding the serving
	// certificate.
	Namespace, SecretName string
	// CRDName is the CRD whose caBundle the server keeps.
	CRDName string
	// Service is the name of the server's Service (in Namespace).
	Service string
	// DNSNames and IPs the certificate is for (the Service's names).
	DNSNames []string
	IPs      []net.IP
	// Addr is the listen address (host:port).
	Addr string
	// Validity of a new certificate; CheckInterval is how often the server
	// looks at it (and at the CRD's caBundle).
	Validity, CheckInterval time.Duration
	// SwitchAfter is how long a renewed certificate's CA is in the CRD
	// before the server serves it (the API server must have seen it).
	SwitchAfter time.Duration
	Log         logr.Logger

	cert         atomic.Pointer[tls.Certificate]
	serving      servingCert
	pending      *servingCert
	pendingSince time.Time
	listener     net.Listener
}

// Scheme has every InferenceStack version.
func Scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	return s, errors.Join(v1alpha1.AddToScheme(s), v1alpha2.AddToScheme(s))
}

// Run serves until ctx ends.
func (s *Server) Run(ctx context.Context) error {
	scheme, err := Scheme()
	if err != nil {
		return err
	}
	if err := s.refresh(ctx, time.Now()); err != nil {
		if ctx.Err() != nil {
			// Told to stop while starting (a write of the caBundle may have
			// been made, its answer cut off): a stop, not a failure.
			return nil
		}
		return err
	}
	mux := http.NewServeMux()
	mux.Handle(Path, ctrlconversion.NewWebhookHandler(scheme, ctrlconversion.NewRegistry()))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{
			MinVersion:     tls.VersionTLS12,
			GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return s.cert.Load(), nil },
		},
	}
	if s.listener == nil {
		if s.listener, err = net.Listen("tcp", s.Addr); err != nil {
			return err
		}
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.ServeTLS(s.listener, "", "") }()
	s.Log.Info("serving InferenceStack conversions", "addr", s.listener.Addr().String(), "path", Path, "crd", s.CRDName)
	tick := time.NewTicker(s.CheckInterval)
	defer tick.Stop()
	for {
		select {
		case err := <-errc:
			return err
		case <-ctx.Done():
			shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			return srv.Shutdown(shutdown)
		case now := <-tick.C:
			if err := s.refresh(ctx, now); err != nil {
				// Keep serving the current certificate; try again later.
				s.Log.Error(err, "renewing the serving certificate or the CRD's caBundle")
			}
		}
	}
}

// Listen binds Addr now, so a caller knows the port before Run.
func (s *Server) Listen() (net.Addr, error) {
	l, err := net.Listen("tcp", s.Addr)
	if err != nil {
		return nil, err
	}
	s.listener = l
	return l.Addr(), nil
}

// refresh loads (or makes, or renews) the serving certificate, makes sure
// the CRD trusts its CA, then serves it: at once on start, SwitchAfter
// later on a renewal. The bundle keeps the previous CA, so the API server
// trusts both the old and the new certificate meanwhile.
func (s *Server) refresh(ctx context.Context, now time.Time) error {
	c, err := s.certificate(ctx, now)
	if err != nil {
		return err
	}
	if err := s.injectCABundle(ctx, c.caPEM); err != nil {
		return err
	}
	if s.cert.Load() != nil && !bytes.Equal(c.certPEM, s.serving.certPEM) {
		// A new certificate while serving another: the API server trusts
		// its CA once it has seen the CRD change, so the old one (still
		// valid, its CA still in the bundle) is served a while longer.
		if s.pending == nil || !bytes.Equal(s.pending.certPEM, c.certPEM) {
			s.pending, s.pendingSince = &c, now
			return nil
		}
		if now.Sub(s.pendingSince) < s.SwitchAfter {
			return nil
		}
	}
	s.pending = nil
	if bytes.Equal(c.certPEM, s.serving.certPEM) {
		return nil
	}
	pair, err := tls.X509KeyPair(c.certPEM, c.keyPEM)
	if err != nil {
		return err
	}
	s.Log.Info("serving a certificate", "notAfter", c.notAfter.UTC().Format(time.RFC3339))
	s.serving = c
	s.cert.Store(&pair)
	return nil
}

// certificate is the Secret's certificate, made (or renewed) when missing,
// unreadable or due, and stored with optimistic concurrency: when another
// replica wrote first, its certificate is used.
func (s *Server) certificate(ctx context.Context, now time.Time) (servingCert, error) {
	secrets := s.Core.CoreV1().Secrets(s.Namespace)
	sec, err := secrets.Get(ctx, s.SecretName, metav1.GetOptions{})
	missing := apierrors.IsNotFound(err)
	if err != nil && !missing {
		return servingCert{}, fmt.Errorf("reading Secret %s/%s: %w", s.Namespace, s.SecretName, err)
	}
	var previousCA []byte
	if !missing {
		c, perr := parse(sec.Data)
		if perr == nil && !c.due(now) {
			return c, nil
		}
		if perr != nil {
			s.Log.Info("the serving Secret holds no usable certificate; making one", "secret", s.Namespace+"/"+s.SecretName, "reason", perr.Error())
		} else {
			s.Log.Info("renewing the serving certificate", "notAfter", c.notAfter.UTC().Format(time.RFC3339))
			previousCA = c.caPEM
		}
	}
	c, err := issue(now, s.Validity, s.DNSNames, s.IPs, previousCA)
	if err != nil {
		return servingCert{}, err
	}
	if missing {
		_, err = secrets.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.SecretName,
				Labels: map[string]string{"app.kubernetes.io/name": "inferencestack-conversion", "app.kubernetes.io/managed-by": "inferencestack-conversion"}},
			Type: corev1.SecretTypeTLS,
			Data: c.data(),
		}, metav1.CreateOptions{})
	} else {
		sec.Type = corev1.SecretTypeTLS
		sec.Data = c.data()
		_, err = secrets.Update(ctx, sec, metav1.UpdateOptions{})
	}
	if apierrors.IsAlreadyExists(err) || apierrors.IsConflict(err) {
		// Another replica wrote one: use it.
		sec, err := secrets.Get(ctx, s.SecretName, metav1.GetOptions{})
		if err != nil {
			return servingCert{}, err
		}
		return parse(sec.Data)
	}
	if err != nil {
		return servingCert{}, fmt.Errorf("writing Secret %s/%s: %w", s.Namespace, s.SecretName, err)
	}
	return c, nil
}

// injectCABundle sets the CRD's conversion caBundle to ca, and nothing
// else; a CRD without webhook conversion is left alone (a release that
// serves one version needs no conversion).
func (s *Server) injectCABundle(ctx context.Context, ca []byte) error {
	crds := s.Extensions.ApiextensionsV1().CustomResourceDefinitions()
	crd, err := crds.Get(ctx, s.CRDName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading CRD %s: %w", s.CRDName, err)
	}
	conv := crd.Spec.Conversion
	if conv == nil || conv.Strategy != apiextensionsv1.WebhookConverter || conv.Webhook == nil || conv.Webhook.ClientConfig == nil {
		s.Log.Info("the CRD does not use webhook conversion: nothing to trust", "crd", s.CRDName)
		return nil
	}
	if svc := conv.Webhook.ClientConfig.Service; svc != nil && (svc.Namespace != s.Namespace || svc.Name != s.Service) {
		return fmt.Errorf("CRD %s calls the conversion webhook at Service %s/%s, but this webhook runs as Service %s/%s: "+
			"install the inferencestack-crds package into namespace %s (its bundle names it), or run the webhook with --service and --namespace matching the CRD",
			s.CRDName, svc.Namespace, svc.Name, s.Namespace, s.Service, svc.Namespace)
	}
	if bytes.Equal(conv.Webhook.ClientConfig.CABundle, ca) {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"conversion": map[string]any{"webhook": map[string]any{
		"clientConfig": map[string]any{"caBundle": ca}}}}})
	if err != nil {
		return err
	}
	if _, err := crds.Patch(ctx, s.CRDName, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "inferencestack-conversion"}); err != nil {
		return fmt.Errorf("setting the caBundle of CRD %s: %w", s.CRDName, err)
	}
	s.Log.Info("the CRD trusts the serving certificate's CA", "crd", s.CRDName)
	return nil
}
