package runconfig

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/runconfig/stackconfig"
)

// Stage 3 of the walk (doc.go): render. The spec goes onto the base config,
// one part per file: render_providers.go (overlay the user's providers by
// id, alias checks), render_resources.go (disabled APIs, registered
// models, shields and tool groups), render_storage.go (stores onto the
// chosen backends), render_state.go (the names of the state, as the line
// that wrote it named them: Operand.StateLine), render_server.go (port,
// TLS, authentication); then the
// config is written in the line's layout. origins remembers which spec
// field wrote which provider, so stage 4's refusals name it.
func render(cfg *runConfig, lay layout, line stackconfig.Line, name string, spec v1alpha2.InferenceStackSpec, server []corev1.EnvVar, state stackconfig.Line) ([]byte, *envSet, specOrigins, error) {
	env := newEnvSet(server)
	origins := specOrigins{}
	if err := overlayProviders(cfg, line, spec, env, origins); err != nil {
		return nil, nil, nil, err
	}
	if err := checkAlias(cfg, spec); err != nil {
		return nil, nil, nil, err
	}
	if err := disable(cfg, line, spec); err != nil {
		return nil, nil, nil, err
	}
	if err := register(cfg, spec, env); err != nil {
		return nil, nil, nil, err
	}
	if err := configureStorage(cfg, line, name, spec, env); err != nil {
		return nil, nil, nil, err
	}
	if err := nameState(cfg, line, state); err != nil {
		return nil, nil, nil, err
	}
	configureServer(cfg, spec)
	if err := env.checkUserEnv(line, spec); err != nil {
		return nil, nil, nil, err
	}
	data, err := marshal(*cfg, lay)
	if err != nil {
		return nil, nil, nil, err
	}
	return data, env, origins, nil
}

// marshal writes the config in the layout's file shape, deterministically.
func marshal(cfg runConfig, lay layout) ([]byte, error) {
	data, err := lay.file(cfg)
	if err != nil {
		return nil, fmt.Errorf("marshal run config: %w", err)
	}
	return data, nil
}
