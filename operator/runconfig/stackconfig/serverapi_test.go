package stackconfig

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestServerAPITypesFollowUpstream: the Go answers' JSON fields are the
// fields of upstream's response models at each line's tag, and each
// endpoint the operator reads is in the facts.
func TestServerAPITypesFollowUpstream(t *testing.T) {
	types := map[string]any{
		"VersionInfo": VersionInfo{}, "ListProvidersResponse": ListProvidersResponse{},
		"ProviderInfo": ProviderInfo{}, "HealthInfo": HealthInfo{},
	}
	for _, l := range []Line{Line02, Line03} {
		f := l.Facts().ServerAPI
		for name, v := range types {
			m, ok := f.Models[name]
			require.True(t, ok, "%s: upstream has no model %s", l.Tag(), name)
			var fields []string
			rt := reflect.TypeOf(v)
			for i := range rt.NumField() {
				fields = append(fields, strings.Split(rt.Field(i).Tag.Get("json"), ",")[0])
			}
			var want []string
			for k := range m.Fields {
				want = append(want, k)
			}
			slices.Sort(fields)
			slices.Sort(want)
			require.Equal(t, want, fields, "%s: fields of %s (%s)", l.Tag(), name, m.Source)
		}
		for _, name := range []string{EndpointHealth, EndpointVersion, EndpointListProviders} {
			e, err := l.Endpoint(name)
			require.NoError(t, err)
			require.Equal(t, "GET", e.Method)
		}
		require.Contains(t, f.Health.Statuses, f.Health.Error)
	}
	p, _ := Line03.Endpoint(EndpointListProviders)
	require.True(t, p.RequiresAuthentication)
	v2, _ := Line02.Endpoint(EndpointVersion)
	v3, _ := Line03.Endpoint(EndpointVersion)
	require.True(t, v2.RequiresAuthentication, "0.2's middleware guards every path")
	require.False(t, v3.RequiresAuthentication, "0.3 exempts /v1/version")
}
