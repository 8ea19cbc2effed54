package validate

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	apimanifests "github.com/operator-framework/api/pkg/manifests"
	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/inferencestack/inferencestack/internal/release"
	"github.com/inferencestack/inferencestack/operator/pin"
)

// PinConfigMapName and PinMountDir are the pin ConfigMap's name and where the
// operator Deployment mounts it.
const (
	PinConfigMapName = "inferencestack-operator-pin"
	PinKey           = "versions.yaml"
	PinMountDir      = "/etc/inferencestack/pin"
	// managerContainer is the operator's container (bundle.ManagerContainer).
	managerContainer = "manager"
)

// operatorDeployment is the index of the operator's Deployment among deps,
// the one with the container "manager", or -1: the CRD package's conversion
// webhook runs the same image, with no pin and with rights that
// internal/bundle/conversion.go gives it, not the RBAC manifests.
func operatorDeployment(deps []v1alpha1.StrategyDeploymentSpec) int {
	return slices.IndexFunc(deps, func(d v1alpha1.StrategyDeploymentSpec) bool {
		return slices.ContainsFunc(d.Spec.Template.Spec.Containers, func(c corev1.Container) bool { return c.Name == managerContainer })
	})
}

// checkPin: a bundle that runs the operator ships the pin ConfigMap, its
// Deployment mounts it, and the RELATED_IMAGE_ variables equal the pinned images.
func checkPin(b *apimanifests.Bundle, files map[fileKey]string, csvFile string) []Finding {
	deps := b.CSV.Spec.InstallStrategy.StrategySpec.DeploymentSpecs
	if operatorDeployment(deps) < 0 {
		return nil
	}
	var out []Finding
	fail := func(file, field, format string, args ...any) {
		out = append(out, Finding{Severity: SeverityError, Source: "bundlegen", File: file, Field: field, Message: fmt.Sprintf(format, args...)})
	}
	var cm *corev1.ConfigMap
	for _, o := range b.Objects {
		if o.GetKind() == "ConfigMap" && o.GetName() == PinConfigMapName {
			cm = &corev1.ConfigMap{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, cm); err != nil {
				fail(files[fileKey{"ConfigMap", PinConfigMapName}], "", "decoding the pin ConfigMap: %v", err)
				return out
			}
		}
	}
	if cm == nil {
		fail("manifests/", "", "the operator bundle has no ConfigMap %s holding the operand pin: regenerate it with bundlegen bundle", PinConfigMapName)
		return out
	}
	cmFile := files[fileKey{"ConfigMap", PinConfigMapName}]
	var p release.Pin
	if err := yaml.UnmarshalStrict([]byte(cm.Data[PinKey]), &p); err != nil || len(p.Operands) == 0 {
		fail(cmFile, "data."+PinKey, "not a valid pin (operatorVersion, operands): %v", err)
		return out
	}
	if want := b.CSV.Spec.Version.String(); p.OperatorVersion != want {
		fail(cmFile, "data."+PinKey+".operatorVersion", "is %q, but the CSV's version is %q", p.OperatorVersion, want)
	}
	if p.LlamaStackVersion == "" {
		fail(cmFile, "data."+PinKey+".llamaStackVersion", "is empty: the operator would not know which run-config layout its operands read; set llamaStackVersion in the release input and regenerate the bundle")
	}
	for i, d := range deps {
		pod := d.Spec.Template.Spec
		base := fmt.Sprintf("spec.install.spec.deployments[%d].spec.template.spec", i)
		vol := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool {
			return v.ConfigMap != nil && v.ConfigMap.Name == PinConfigMapName
		})
		if vol < 0 {
			fail(csvFile, base+".volumes", "no volume mounts ConfigMap %s: the operator would not read the pin", PinConfigMapName)
			continue
		}
		for j, c := range pod.Containers {
			if c.Name != "manager" {
				continue
			}
			cbase := fmt.Sprintf("%s.containers[%d]", base, j)
			if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
				return m.Name == pod.Volumes[vol].Name && path.Clean(m.MountPath) == PinMountDir
			}) {
				fail(csvFile, cbase+".volumeMounts", "the pin volume %s is not mounted at %s", pod.Volumes[vol].Name, PinMountDir)
			}
			lsv := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == pin.LlamaStackVersionEnv })
			switch {
			case lsv < 0 && p.LlamaStackVersion != "":
				fail(csvFile, cbase+".env", "has no %s: set it to the pin's llamaStackVersion %s (bundlegen bundle does)", pin.LlamaStackVersionEnv, p.LlamaStackVersion)
			case lsv >= 0 && c.Env[lsv].Value != p.LlamaStackVersion:
				fail(csvFile, cbase+".env."+pin.LlamaStackVersionEnv, "is %q, but the pin says llamaStackVersion %q: the pin and the Deployment must agree", c.Env[lsv].Value, p.LlamaStackVersion)
			}
			env := map[string]string{}
			for _, e := range c.Env {
				if strings.HasPrefix(e.Name, pin.EnvPrefix) {
					env[e.Name] = e.Value
				}
			}
			for _, dist := range slices.Sorted(maps.Keys(p.Operands)) {
				name := pin.EnvName(dist)
				if got, ok := env[name]; ok && got != p.Operands[dist] {
					fail(csvFile, cbase+".env."+name, "is %s, but the pin says %s for %s: the pin and the Deployment must agree", got, p.Operands[dist], dist)
				}
				delete(env, name)
			}
			// The PostgreSQL image of spec.cache is not an operand; relatedImages
			// must list it like every image (checkRelatedImages).
			delete(env, pin.CacheImageEnv)
			for _, name := range slices.Sorted(maps.Keys(env)) {
				fail(csvFile, cbase+".env."+name, "names an image the pin does not: add the distribution to the release input or drop the variable")
			}
		}
	}
	return out
}
