package v1alpha2

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

// MetricsOrDefault is what the autoscaler aims at: the metrics, or CPU at
// 80% of the request when the list is empty (nil without autoscaling).
func (s *ScalingSpec) MetricsOrDefault() []ResourceMetric {
	if s == nil || s.Autoscaling == nil {
		return nil
	}
	if len(s.Autoscaling.Metrics) == 0 {
		return []ResourceMetric{{Resource: ResourceCPU, AverageUtilization: 80}}
	}
	return s.Autoscaling.Metrics
}
