package bundle

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// TestCRDVersionsFromTheReleaseInput: the CRD package of a release serves
// exactly the versions its input's api field names, stores its storage
// version, and is refused naming the field when the CRD lacks a version or
// would serve two without a conversion webhook. The CRD is the repository's
// own (every version operator/api has).
func TestCRDVersionsFromTheReleaseInput(t *testing.T) {
	tests := []struct {
		name    string
		api     string
		want    map[string][2]bool // version -> served, storage
		webhook bool               // the CRD converts through the webhook the package ships
		wantErr []string
	}{{
		name: "v1alpha1 only",
		api:  "api: {reads: v1alpha1, served: [v1alpha1], storage: v1alpha1}",
		want: map[string][2]bool{"v1alpha1": {true, true}},
	}, {
		name: "v1alpha2 only",
		api:  "api: {reads: v1alpha2, served: [v1alpha2], storage: v1alpha2}",
		want: map[string][2]bool{"v1alpha2": {true, true}},
	}, {
		name:    "both: the package ships the conversion webhook",
		api:     "api: {reads: v1alpha1, served: [v1alpha1, v1alpha2], storage: v1alpha1}",
		want:    map[string][2]bool{"v1alpha1": {true, true}, "v1alpha2": {true, false}},
		webhook: true,
	}, {
		name:    "a version the CRD does not have",
		api:     "api: {reads: v1beta1, served: [v1beta1], storage: v1beta1}",
		wantErr: []string{"field api.served[0]: the CRD inferencestacks.inferencestack.io has no version v1beta1 (it has v1alpha1, v1alpha2)"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := fixture(t, func(root string) {
				require.NoError(t, copyPath(filepath.Join(repo, "operator/config/crd/bases/inferencestack.io_inferencestacks.yaml"),
					filepath.Join(root, "crd", "inferencestack.io_inferencestacks.yaml")))
				rewrite(t, filepath.Join(root, "releases", "1.0.0.yaml"), "api:\n  reads: v1alpha1\n  served: [v1alpha1]\n  storage: v1alpha1\n", tt.api+"\n")
			})
			if tt.wantErr != nil {
				_, err := g.Run(context.Background())
				for _, w := range tt.wantErr {
					require.ErrorContains(t, err, w)
				}
				_, err = os.Stat(g.OutputDir)
				require.ErrorIs(t, err, os.ErrNotExist, "nothing written")
				return
			}
			_, err := g.Run(context.Background())
			require.NoError(t, err)
			data, err := os.ReadFile(filepath.Join(g.OutputDir, PackageCRDs, "1.0.0", "manifests", "inferencestack.io_inferencestacks.yaml"))
			require.NoError(t, err)
			var crd apiextensionsv1.CustomResourceDefinition
			require.NoError(t, yaml.Unmarshal(data, &crd))
			got := map[string][2]bool{}
			for _, v := range crd.Spec.Versions {
				got[v.Name] = [2]bool{v.Served, v.Storage}
			}
			require.Equal(t, tt.want, got)
			// The operator reads api.reads: a flag only when it is not the
			// operator's default, v1alpha1.
			opCSV, err := os.ReadFile(filepath.Join(g.OutputDir, PackageOperator, "1.0.0", "manifests", PackageOperator+".clusterserviceversion.yaml"))
			require.NoError(t, err)
			reads := strings.TrimSpace(strings.Split(strings.Split(tt.api, "reads:")[1], ",")[0])
			require.Equal(t, reads != "v1alpha1", strings.Contains(string(opCSV), "- "+APIVersionFlag+"="+reads), "the manager's %s for api.reads %s", APIVersionFlag, reads)
			require.Equal(t, reads != "v1alpha1", strings.Contains(string(opCSV), APIVersionFlag))
			csvData, err := os.ReadFile(filepath.Join(g.OutputDir, PackageCRDs, "1.0.0", "manifests", PackageCRDs+".clusterserviceversion.yaml"))
			require.NoError(t, err)
			_, err = os.Stat(filepath.Join(g.OutputDir, PackageCRDs, "1.0.0", "manifests", ConversionName+"_v1_service.yaml"))
			if !tt.webhook {
				require.Nil(t, crd.Spec.Conversion)
				require.ErrorIs(t, err, os.ErrNotExist)
				require.NotContains(t, string(csvData), ConversionName)
				return
			}
			require.NoError(t, err, "the webhook's Service")
			require.Equal(t, apiextensionsv1.WebhookConverter, crd.Spec.Conversion.Strategy)
			require.Equal(t, &apiextensionsv1.ServiceReference{Namespace: ConversionNamespace, Name: ConversionName, Path: ptr.To("/convert"), Port: ptr.To(int32(443))},
				crd.Spec.Conversion.Webhook.ClientConfig.Service)
			require.Empty(t, crd.Spec.Conversion.Webhook.ClientConfig.CABundle, "the webhook writes it, not the bundle (OLM keeps it then)")
			require.Contains(t, string(csvData), "- conversion-webhook")
		})
	}
}
