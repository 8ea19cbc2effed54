package validate

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	opproperty "github.com/operator-framework/operator-registry/alpha/property"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// The CRD package release that ships a conversion webhook, and its files.
const (
	webhookBundle = "../../bundle/inferencestack-crds/2.1.0"
	crdFile       = "manifests/inferencestack.io_inferencestacks.yaml"
	csvFile       = "manifests/inferencestack-crds.clusterserviceversion.yaml"
	serviceFile   = "manifests/inferencestack-conversion_v1_service.yaml"
)

// mutate rewrites the YAML object in path through f.
func mutate(t *testing.T, path string, f func(m map[string]any)) {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, yaml.Unmarshal(data, &m))
	f(m)
	out, err := yaml.Marshal(m)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, out, 0o644))
}

// at walks m along keys (a number indexes a list) and returns the map there.
func at(t *testing.T, m map[string]any, keys ...any) map[string]any {
	t.Helper()
	var cur any = m
	for _, k := range keys {
		switch k := k.(type) {
		case string:
			next, ok := cur.(map[string]any)[k]
			require.True(t, ok, "no %q in %v", k, keys)
			cur = next
		case int:
			cur = cur.([]any)[k]
		}
	}
	return cur.(map[string]any)
}

func webhook(t *testing.T, m map[string]any) map[string]any {
	return at(t, m, "spec", "conversion", "webhook")
}

func webhookDeployment(t *testing.T, m map[string]any) map[string]any {
	return at(t, m, "spec", "install", "spec", "deployments", 0, "spec")
}

func webhookContainer(t *testing.T, m map[string]any) map[string]any {
	return at(t, webhookDeployment(t, m), "template", "spec", "containers", 0)
}

// TestConversionWebhookAsTheAPIServerJudgesIt: every way the CRD package's
// conversion webhook would not work once installed (or would work against
// the cluster's interest) is an error naming the file and the field; the
// committed 2.1.0 bundle has none.
func TestConversionWebhookAsTheAPIServerJudgesIt(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(t *testing.T, dir string)
		file  string
		field string
		want  string
	}{
		{name: "the conversion calls a URL", file: crdFile, field: "spec.conversion.webhook.clientConfig.url", want: "never a URL",
			edit: func(t *testing.T, dir string) {
				mutate(t, filepath.Join(dir, crdFile), func(m map[string]any) {
					webhook(t, m)["clientConfig"] = map[string]any{"url": "https://evil.example.com/convert"}
				})
			}},
		{name: "a caBundle baked in", file: crdFile, field: "spec.conversion.webhook.clientConfig.caBundle", want: "remove it",
			edit: func(t *testing.T, dir string) {
				mutate(t, filepath.Join(dir, crdFile), func(m map[string]any) {
					at(t, webhook(t, m), "clientConfig")["caBundle"] = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg=="
				})
			}},
		{name: "v1beta1 reviews only", file: crdFile, field: "spec.conversion.webhook.conversionReviewVersions", want: "lacks v1",
			edit: func(t *testing.T, dir string) {
				mutate(t, filepath.Join(dir, crdFile), func(m map[string]any) { webhook(t, m)["conversionReviewVersions"] = []any{"v1beta1"} })
			}},
		{name: "two storage versions", file: crdFile, field: "spec.versions[*].storage", want: "2 versions are marked storage (v1alpha1, v1alpha2)",
			edit: func(t *testing.T, dir string) {
				mutate(t, filepath.Join(dir, crdFile), func(m map[string]any) {
					for _, v := range m["spec"].(map[string]any)["versions"].([]any) {
						v.(map[string]any)["storage"] = true
					}
				})
			}},
		{name: "the Service removed", file: crdFile, field: "spec.conversion.webhook.clientConfig.service.name", want: "which the bundle does not ship",
			edit: func(t *testing.T, dir string) { require.NoError(t, os.Remove(filepath.Join(dir, serviceFile))) }},
		{name: "the Service on another port", file: crdFile, field: "spec.conversion.webhook.clientConfig.service.port", want: "has no such port",
			edit: func(t *testing.T, dir string) {
				mutate(t, filepath.Join(dir, serviceFile), func(m map[string]any) { at(t, m, "spec", "ports", 0)["port"] = 8443 })
			}},
		{name: "the Service selecting other pods", file: crdFile, field: "spec.conversion.webhook.clientConfig.service", want: "no Deployment of the CSV's install strategy",
			edit: func(t *testing.T, dir string) {
				mutate(t, filepath.Join(dir, serviceFile), func(m map[string]any) { at(t, m, "spec")["selector"] = map[string]any{"app": "other"} })
			}},
		{name: "the Service selecting nothing", file: crdFile, field: "spec.conversion.webhook.clientConfig.service", want: "has no selector",
			edit: func(t *testing.T, dir string) {
				mutate(t, filepath.Join(dir, serviceFile), func(m map[string]any) { delete(at(t, m, "spec"), "selector") })
			}},
		{name: "the Service's targetPort closed", file: csvFile, field: "spec.install.spec.deployments[inferencestack-conversion].spec.template.spec.containers[*].ports",
			want: "targetPort 9999",
			edit: func(t *testing.T, dir string) {
				mutate(t, filepath.Join(dir, serviceFile), func(m map[string]any) { at(t, m, "spec", "ports", 0)["targetPort"] = 9999 })
			}},
		{name: "the webhook at 0 replicas", file: csvFile, field: "spec.install.spec.deployments[inferencestack-conversion].spec.replicas", want: "run at least 1",
			edit: func(t *testing.T, dir string) {
				mutate(t, filepath.Join(dir, csvFile), func(m map[string]any) { webhookDeployment(t, m)["replicas"] = 0 })
			}},
		{name: "the webhook privileged", file: csvFile, field: "spec.install.spec.deployments[inferencestack-conversion].spec.template.spec.containers[webhook].securityContext.privileged",
			want: "restricted Pod Security Standard",
			edit: func(t *testing.T, dir string) {
				mutate(t, filepath.Join(dir, csvFile), func(m map[string]any) { at(t, webhookContainer(t, m), "securityContext")["privileged"] = true })
			}},
		{name: "the webhook may escalate", file: csvFile, field: "spec.install.spec.deployments[inferencestack-conversion].spec.template.spec.containers[webhook].securityContext.allowPrivilegeEscalation",
			want: "set it to false",
			edit: func(t *testing.T, dir string) {
				mutate(t, filepath.Join(dir, csvFile), func(m map[string]any) {
					delete(at(t, webhookContainer(t, m), "securityContext"), "allowPrivilegeEscalation")
				})
			}},
		{name: "the webhook keeps capabilities", file: csvFile, field: "spec.install.spec.deployments[inferencestack-conversion].spec.template.spec.containers[webhook].securityContext.capabilities.drop",
			want: "drop ALL",
			edit: func(t *testing.T, dir string) {
				mutate(t, filepath.Join(dir, csvFile), func(m map[string]any) { delete(at(t, webhookContainer(t, m), "securityContext"), "capabilities") })
			}},
		{name: "the webhook may run as root", file: csvFile, field: "spec.install.spec.deployments[inferencestack-conversion].spec.template.spec.containers[webhook].securityContext.runAsNonRoot",
			want: "set runAsNonRoot: true",
			edit: func(t *testing.T, dir string) {
				mutate(t, filepath.Join(dir, csvFile), func(m map[string]any) {
					delete(at(t, webhookDeployment(t, m), "template", "spec", "securityContext"), "runAsNonRoot")
				})
			}},
		{name: "the webhook without seccomp", file: csvFile, field: "spec.install.spec.deployments[inferencestack-conversion].spec.template.spec.containers[webhook].securityContext.seccompProfile",
			want: "RuntimeDefault",
			edit: func(t *testing.T, dir string) {
				mutate(t, filepath.Join(dir, csvFile), func(m map[string]any) {
					delete(at(t, webhookDeployment(t, m), "template", "spec", "securityContext"), "seccompProfile")
				})
			}},
		{name: "the webhook on the host network", file: csvFile, field: "spec.install.spec.deployments[inferencestack-conversion].spec.template.spec",
			want: "host's network",
			edit: func(t *testing.T, dir string) {
				mutate(t, filepath.Join(dir, csvFile), func(m map[string]any) { at(t, webhookDeployment(t, m), "template", "spec")["hostNetwork"] = true })
			}},
		{name: "the webhook's ServiceAccount granted */*/*", file: csvFile, field: "spec.install.spec.clusterPermissions[inferencestack-conversion].rules[1]",
			want: "wildcard",
			edit: func(t *testing.T, dir string) {
				mutate(t, filepath.Join(dir, csvFile), func(m map[string]any) {
					p := at(t, m, "spec", "install", "spec", "clusterPermissions", 0)
					p["rules"] = append(p["rules"].([]any), map[string]any{"apiGroups": []any{"*"}, "resources": []any{"*"}, "verbs": []any{"*"}})
				})
			}},
		{name: "the webhook's ServiceAccount granted every secret verb", file: csvFile, field: "spec.install.spec.permissions[inferencestack-conversion].rules[0]",
			want: "wildcard",
			edit: func(t *testing.T, dir string) {
				mutate(t, filepath.Join(dir, csvFile), func(m map[string]any) {
					at(t, m, "spec", "install", "spec", "permissions", 0, "rules", 0)["verbs"] = []any{"*"}
				})
			}},
		{name: "a CSV larger than the API server stores", file: csvFile, want: "more than the 1572864 (1.5 MiB) etcd accepts",
			edit: func(t *testing.T, dir string) {
				mutate(t, filepath.Join(dir, csvFile), func(m map[string]any) { at(t, m, "spec")["description"] = strings.Repeat("x", 2<<20) })
			}},
	}
	rep, err := Bundle{Dir: webhookBundle}.Run(context.Background())
	require.NoError(t, err)
	require.False(t, rep.HasErrors(), "the committed bundle: %v", rep.Findings)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "2.1.0")
			require.NoError(t, os.CopyFS(dir, os.DirFS(webhookBundle)))
			tc.edit(t, dir)
			rep, err := Bundle{Dir: dir}.Run(context.Background())
			require.NoError(t, err)
			var found []string
			for _, f := range rep.Findings {
				if f.Severity == SeverityError && f.Source == "bundlegen" && f.File == tc.file && f.Field == tc.field && strings.Contains(f.Message, tc.want) {
					return
				}
				found = append(found, f.String())
			}
			t.Fatalf("no error in %s %s saying %q; found:\n%s", tc.file, tc.field, tc.want, strings.Join(found, "\n"))
		})
	}
}

// TestCatalogConversionWebhook: validate catalog judges the bundles it
// carries (olm.bundle.object) the same way.
func TestCatalogConversionWebhook(t *testing.T) {
	cfg, err := LoadCatalog(context.Background(), "../../catalog")
	require.NoError(t, err)
	for _, f := range CatalogConfig(*cfg, false) {
		require.NotEqual(t, RuleInstall, f.Rule, "the committed catalog: %s", f)
	}
	edited := false
	for i, b := range cfg.Bundles {
		if b.Name != "inferencestack-crds.v2.1.0" {
			continue
		}
		for j, p := range b.Properties {
			if p.Type != opproperty.TypeBundleObject {
				continue
			}
			var obj struct {
				Data []byte `json:"data"`
			}
			require.NoError(t, json.Unmarshal(p.Value, &obj))
			var m map[string]any
			require.NoError(t, json.Unmarshal(obj.Data, &m))
			if m["kind"] != "CustomResourceDefinition" {
				continue
			}
			webhook(t, m)["clientConfig"] = map[string]any{"url": "https://evil.example.com/convert"}
			data, err := json.Marshal(m)
			require.NoError(t, err)
			cfg.Bundles[i].Properties[j] = opproperty.MustBuildBundleObject(data)
			edited = true
		}
	}
	require.True(t, edited)
	for _, f := range CatalogConfig(*cfg, false) {
		if f.Rule == RuleInstall && f.Bundle == "inferencestack-crds.v2.1.0" && strings.Contains(f.Message, "clientConfig.url") && strings.Contains(f.Message, "never a URL") {
			return
		}
	}
	t.Fatal("validate catalog did not refuse a conversion webhook calling a URL")
}
