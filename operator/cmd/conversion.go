package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/inferencestack/inferencestack/operator/conversion"
)

// ConversionCommand is the first argument that makes the binary the
// InferenceStack conversion webhook (it ships in the CRD package) instead
// of the operator.
const ConversionCommand = "conversion-webhook"

// conversionMain runs the conversion webhook with args (after the command).
func conversionMain(args []string) {
	fs := flag.NewFlagSet(ConversionCommand, flag.ExitOnError)
	s := &conversion.Server{}
	var migrate bool
	fs.StringVar(&s.Namespace, "namespace", os.Getenv("POD_NAMESPACE"), "Namespace of the webhook's Service and certificate Secret (default: $POD_NAMESPACE).")
	fs.StringVar(&s.Service, "service", "inferencestack-conversion", "Name of the Service the API server calls; the certificate is for <service>.<namespace>.svc.")
	fs.StringVar(&s.SecretName, "secret", "inferencestack-conversion-tls", "Secret holding the serving certificate (made and renewed by the webhook).")
	fs.StringVar(&s.CRDName, "crd", "inferencestacks.inferencestack.io", "CRD whose conversion caBundle the webhook keeps.")
	fs.StringVar(&s.Addr, "bind-address", ":9443", "Address the webhook serves HTTPS on.")
	fs.DurationVar(&s.Validity, "cert-validity", 365*24*time.Hour, "Validity of a new serving certificate; it is renewed in the last third.")
	fs.DurationVar(&s.CheckInterval, "check-interval", time.Minute, "How often the certificate and the CRD's caBundle are checked.")
	fs.DurationVar(&s.SwitchAfter, "switch-after", 5*time.Minute, "How long a renewed certificate's CA is in the CRD before the webhook serves it.")
	fs.BoolVar(&migrate, "migrate", false, "Instead of serving: rewrite every InferenceStack in the CRD's storage version and trim status.storedVersions to it, then exit (docs/api-versions.md, before a CRD release stops serving an older version).")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(fs)
	_ = fs.Parse(args)
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	s.Log = ctrl.Log.WithName("conversion")
	if err := runConversion(s, migrate); err != nil {
		s.Log.Error(err, "conversion webhook stopped")
		os.Exit(1)
	}
}

func runConversion(s *conversion.Server, migrate bool) error {
	if migrate {
		cfg, err := ctrl.GetConfig()
		if err != nil {
			return fmt.Errorf("finding the API server: %w", err)
		}
		dyn, err := dynamic.NewForConfig(cfg)
		if err != nil {
			return err
		}
		ext, err := apiextensionsclient.NewForConfig(cfg)
		if err != nil {
			return err
		}
		m, err := conversion.Migrate(context.Background(), dyn, ext, s.CRDName)
		if err != nil {
			return err
		}
		s.Log.Info("migrated", "crd", s.CRDName, "storage", m.Storage, "rewritten", m.Rewritten, "storedVersionsBefore", m.Before)
		return nil
	}
	if s.Namespace == "" {
		return fmt.Errorf("--namespace is empty and POD_NAMESPACE is not set: give the namespace of the webhook's Service")
	}
	s.DNSNames = []string{s.Service + "." + s.Namespace + ".svc", s.Service + "." + s.Namespace + ".svc.cluster.local"}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("finding the API server: %w", err)
	}
	if s.Core, err = kubernetes.NewForConfig(cfg); err != nil {
		return err
	}
	if s.Extensions, err = apiextensionsclient.NewForConfig(cfg); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return s.Run(ctx)
}
