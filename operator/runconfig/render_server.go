package runconfig

import (
	"path"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
)

// accessActions are the actions an allowed group is permitted.
var accessActions = []string{"create", "read", "update", "delete"}

// configureServer writes the server section: port, TLS files and
// Kubernetes authentication.
func configureServer(cfg *runConfig, spec v1alpha2.InferenceStackSpec) {
	cfg.Server = server{Port: ServerPort}
	cfg.ProvidersDir = ProvidersDir
	if n := spec.Networking; n != nil {
		if t := n.TLS; t != nil && t.Enabled {
			cfg.Server.TLSCertFile = path.Join(TLSDir, "tls.crt")
			cfg.Server.TLSKeyFile = path.Join(TLSDir, "tls.key")
			if t.CABundle != nil {
				cfg.Server.TLSCAFile = path.Join(CADir, CAFile)
			}
		}
	}
	if spec.Auth == nil || spec.Auth.Kubernetes == nil {
		return
	}
	a := &auth{ProviderConfig: kubernetesAuth{
		Type:          "kubernetes",
		APIServerURL:  KubernetesAPIServerURL,
		VerifyTLS:     true,
		TLSCAFile:     KubeCAFile,
		ClaimsMapping: map[string]string{"groups": "roles"},
	}}
	for _, g := range spec.Auth.Kubernetes.AllowedGroups {
		a.AccessPolicy = append(a.AccessPolicy, accessRule{
			Permit:      permitScope{Actions: accessActions},
			When:        "user with " + g + " in roles",
			Description: "members of " + g + " may use the stack",
		})
	}
	cfg.Server.Auth = a
}
