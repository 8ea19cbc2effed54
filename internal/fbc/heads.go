package fbc

import (
	"context"
	"fmt"

	"github.com/operator-framework/operator-registry/alpha/declcfg"

	"github.com/inferencestack/inferencestack/internal/validate"
)

// Heads reads a catalog directory and returns, per package, the version of
// each channel's head as operator-registry's model computes it
// (model.Channel.Head): the bundle nothing else in the channel replaces or
// skips, the one a new install of the channel gets.
func Heads(ctx context.Context, dir string) (map[string]map[string]string, error) {
	cfg, err := validate.LoadCatalog(ctx, dir)
	if err != nil {
		return nil, err
	}
	m, err := declcfg.ConvertToModel(*cfg)
	if err != nil {
		return nil, fmt.Errorf("catalog %s: %w", dir, err)
	}
	out := map[string]map[string]string{}
	for name, p := range m {
		out[name] = map[string]string{}
		for cname, ch := range p.Channels {
			head, err := ch.Head()
			if err != nil {
				return nil, fmt.Errorf("catalog %s: package %s, channel %s: %w", dir, name, cname, err)
			}
			out[name][cname] = head.Version.String()
		}
	}
	return out, nil
}
