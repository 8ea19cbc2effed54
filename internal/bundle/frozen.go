package bundle

import (
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/inferencestack/inferencestack/internal/manifests"
	"github.com/inferencestack/inferencestack/internal/release"
	"github.com/inferencestack/inferencestack/internal/validate"
)

// Shipped is what a bundle of the operator package holds about its images:
// the operand pin of its ConfigMap and the CSV's relatedImages by name.
type Shipped struct {
	// Pin is the pin ConfigMap's versions.yaml.
	Pin release.Pin
	// PinFile is the ConfigMap's file.
	PinFile string
	// Related maps a relatedImages name (manager, operand-<distribution>,
	// cache) to its image.
	Related map[string]string
	// CSVFile is the CSV's file.
	CSVFile string
}

// ReadShipped reads the pin and the related images of release version's
// operator bundle under root (bundle/).
func ReadShipped(root, version string) (Shipped, error) {
	dir := filepath.Join(root, PackageOperator, version, "manifests")
	docs, err := manifests.ReadDocuments(dir)
	if err != nil {
		return Shipped{}, fmt.Errorf("bundle of release %s: %w", version, err)
	}
	s := Shipped{Related: map[string]string{}}
	for _, d := range docs {
		switch d.Kind {
		case "ConfigMap":
			var cm corev1.ConfigMap
			if err := json.Unmarshal(d.Data, &cm); err != nil {
				return Shipped{}, fmt.Errorf("%s: %w", d.File, err)
			}
			if cm.Name != validate.PinConfigMapName {
				continue
			}
			if err := yaml.UnmarshalStrict([]byte(cm.Data[validate.PinKey]), &s.Pin); err != nil {
				return Shipped{}, fmt.Errorf("%s: data.%s: %w", d.File, validate.PinKey, err)
			}
			s.PinFile = d.File
		case "ClusterServiceVersion":
			var c v1alpha1.ClusterServiceVersion
			if err := json.Unmarshal(d.Data, &c); err != nil {
				return Shipped{}, fmt.Errorf("%s: %w", d.File, err)
			}
			for _, r := range c.Spec.RelatedImages {
				s.Related[r.Name] = r.Image
			}
			s.CSVFile = d.File
		}
	}
	if s.PinFile == "" {
		return Shipped{}, fmt.Errorf("bundle of release %s: %s holds no ConfigMap %s (the operand pin)", version, dir, validate.PinConfigMapName)
	}
	if s.CSVFile == "" {
		return Shipped{}, fmt.Errorf("bundle of release %s: %s holds no ClusterServiceVersion", version, dir)
	}
	return s, nil
}

// CompareImages lists, one line each, the images of images (pinned through
// the lock now) that differ from what the bundle shipped; none means the
// lock still gives the bundle's images.
func (s Shipped) CompareImages(images release.Images) []string {
	var diffs []string
	differ := func(what, file, shipped, now string) {
		if shipped != now {
			diffs = append(diffs, fmt.Sprintf("%s is %s in %s but %s through the image lock now", what, orNone(shipped), file, orNone(now)))
		}
	}
	for _, d := range slices.Sorted(maps.Keys(images.Operands)) {
		differ("operand "+d, s.PinFile, s.Pin.Operands[d], images.Operands[d])
		differ("related image operand-"+d, s.CSVFile, s.Related["operand-"+d], images.Operands[d])
	}
	for _, d := range slices.Sorted(maps.Keys(s.Pin.Operands)) {
		if _, ok := images.Operands[d]; !ok {
			differ("operand "+d, s.PinFile, s.Pin.Operands[d], "")
		}
	}
	differ("related image manager", s.CSVFile, s.Related["manager"], images.Operator)
	differ("related image cache", s.CSVFile, s.Related["cache"], images.Cache)
	return diffs
}

func orNone(s string) string {
	if s == "" {
		return "absent"
	}
	return s
}

// checkFrozenImages: the lock still pins a frozen release's images to the
// digests its bundle ships. A published release's lock digests never change.
func (g Generate) checkFrozenImages(in release.Input, lock release.Lock) error {
	const restore = "a published release's images never change: restore channels/images.lock from git (git checkout -- <file>); " +
		"a new image ships in channels/releases/<next version>.yaml"
	images, err := release.PinImages(in, lock, false)
	if err != nil {
		return fmt.Errorf("published release %s: %w; %s", in.Version, err, restore)
	}
	shipped, err := ReadShipped(g.OutputDir, in.Version)
	if err != nil {
		return fmt.Errorf("published release %s: %w", in.Version, err)
	}
	if diffs := shipped.CompareImages(images); len(diffs) > 0 {
		return fmt.Errorf("published release %s: the image lock %s no longer gives the images its frozen bundle ships: %s; %s",
			in.Version, g.LockPath, strings.Join(diffs, "; "), restore)
	}
	return nil
}
