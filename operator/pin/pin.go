// Package pin reads the operand version pin: the file, shipped with each
// operator release as a ConfigMap in its bundle, that names the operand image
// the operator deploys for every distribution.
package pin

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/blang/semver/v4"

	"sigs.k8s.io/yaml"
)

const (
	// DefaultPath is where the operator Deployment mounts the pin ConfigMap.
	DefaultPath = "/etc/inferencestack/pin/" + ConfigMapKey
	// ConfigMapKey is the key of the pin file in its ConfigMap.
	ConfigMapKey = "versions.yaml"
	// EnvPrefix starts the environment variables that stand in for a missing
	// pin file: RELATED_IMAGE_<DISTRIBUTION> holds that distribution's image,
	// and OPERATOR_VERSION the operator's version.
	EnvPrefix = "RELATED_IMAGE_"
	// OperatorVersionEnv names the operator version when no pin file exists.
	OperatorVersionEnv = "OPERATOR_VERSION"
	// CacheImageEnv carries the PostgreSQL image of spec.cache; the bundle
	// sets it from the release's cacheImage (and lists it in relatedImages).
	CacheImageEnv = EnvPrefix + "CACHE"
	// LlamaStackVersionEnv names the Llama Stack version of the operands
	// when no pin file exists.
	LlamaStackVersionEnv = "LLAMA_STACK_VERSION"
)

// Pin is the content of the pin file.
type Pin struct {
	// OperatorVersion is the operator release that ships this pin.
	OperatorVersion string `json:"operatorVersion"`
	// LlamaStackVersion is the Llama Stack release of every operand image
	// (e.g. 0.3.0). It selects the run-config layout the operator writes;
	// empty means unknown, and the operator then refuses to guess one.
	LlamaStackVersion string `json:"llamaStackVersion,omitempty"`
	// Operands maps a distribution name to the image reference (by digest
	// when known) of its Llama Stack server.
	Operands map[string]string `json:"operands"`
}

// EnvName is the RELATED_IMAGE_ variable that carries a distribution's image:
// "remote-vllm" becomes RELATED_IMAGE_REMOTE_VLLM.
func EnvName(distribution string) string {
	return EnvPrefix + strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(distribution))
}

// Parse decodes a pin file and checks that it names a version and at least one operand.
func Parse(data []byte) (Pin, error) {
	var p Pin
	if err := yaml.UnmarshalStrict(data, &p); err != nil {
		return Pin{}, err
	}
	if p.OperatorVersion == "" {
		return Pin{}, errors.New("operatorVersion is empty")
	}
	if len(p.Operands) == 0 {
		return Pin{}, errors.New("operands is empty: name at least one distribution's image")
	}
	if err := checkLlamaStackVersion(p.LlamaStackVersion); err != nil {
		return Pin{}, fmt.Errorf("llamaStackVersion: %w", err)
	}
	for name, image := range p.Operands {
		if image == "" {
			return Pin{}, fmt.Errorf("operands[%s] is empty", name)
		}
	}
	return p, nil
}

// Marshal encodes a pin file; keys come out sorted, so equal pins give equal bytes.
func (p Pin) Marshal() ([]byte, error) {
	return yaml.Marshal(p)
}

// Load reads the pin from path. When that file does not exist it falls back to
// the RELATED_IMAGE_* and OPERATOR_VERSION variables of environ (for the
// distributions named in distributions), and fails when neither is there.
func Load(path string, environ []string, distributions []string) (Pin, error) {
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		p, perr := Parse(data)
		if perr != nil {
			return Pin{}, fmt.Errorf("operand pin %s: %w", path, perr)
		}
		return p, nil
	case !errors.Is(err, os.ErrNotExist):
		return Pin{}, fmt.Errorf("reading operand pin: %w", err)
	}
	env := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	p := Pin{OperatorVersion: env[OperatorVersionEnv], LlamaStackVersion: env[LlamaStackVersionEnv], Operands: map[string]string{}}
	for _, d := range distributions {
		if image := env[EnvName(d)]; image != "" {
			p.Operands[d] = image
		}
	}
	if len(p.Operands) == 0 {
		names := make([]string, 0, len(distributions))
		for _, d := range distributions {
			names = append(names, EnvName(d))
		}
		return Pin{}, fmt.Errorf("no operand pin: %s does not exist and none of %s is set; "+
			"mount the operator's pin ConfigMap there or set those variables", path, strings.Join(names, ", "))
	}
	if p.OperatorVersion == "" {
		p.OperatorVersion = "unknown"
	}
	if err := checkLlamaStackVersion(p.LlamaStackVersion); err != nil {
		return Pin{}, fmt.Errorf("%s: %w", LlamaStackVersionEnv, err)
	}
	return p, nil
}

// checkLlamaStackVersion accepts an empty (unknown) version or a strict
// semantic version.
func checkLlamaStackVersion(v string) error {
	if v == "" {
		return nil
	}
	if _, err := semver.Parse(v); err != nil {
		return fmt.Errorf("%q is not a semantic version such as 0.3.0: %w", v, err)
	}
	return nil
}

// Major is the major version of the operator release that ships the pin
// ("2.0.1" gives "2"). The operator of that major reconciles the stacks
// labelled with it, so a pin without a semantic version is an error.
func (p Pin) Major() (string, error) {
	v, err := semver.ParseTolerant(p.OperatorVersion)
	if err != nil {
		return "", fmt.Errorf("operator version %q of the operand pin is not a semantic version (%w): "+
			"set operatorVersion in the pin file, or %s", p.OperatorVersion, err, OperatorVersionEnv)
	}
	return strconv.FormatUint(v.Major, 10), nil
}

// Image returns the pinned image of a distribution.
func (p Pin) Image(distribution string) (string, error) {
	if image, ok := p.Operands[distribution]; ok {
		return image, nil
	}
	return "", fmt.Errorf("operator %s pins no image for distribution %q (pinned: %s)",
		p.OperatorVersion, distribution, strings.Join(slices.Sorted(maps.Keys(p.Operands)), ", "))
}
