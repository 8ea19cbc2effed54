package v1alpha1

// KeyOrDefault is the key of the run config in the override ConfigMap
// (run.yaml when unset).
func (o *OverrideConfigSpec) KeyOrDefault() string {
	if o.Key != "" {
		return o.Key
	}
	return "run.yaml"
}

// KeyOrDefault is the key of the CA bundle in its ConfigMap (ca.crt when
// unset).
func (c *CABundleSource) KeyOrDefault() string {
	if c.Key != "" {
		return c.Key
	}
	return "ca.crt"
}
