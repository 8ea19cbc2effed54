package serverstatus

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	"github.com/inferencestack/inferencestack/operator/runconfig/stackconfig"
)

// maxAnswer bounds what is read of one answer.
const maxAnswer = 1 << 20

// serverClient calls a server's endpoints as the facts of its line define them.
type serverClient struct {
	http  *http.Client
	base  string
	line  stackconfig.Line
	token string
	count func()
}

// get calls the endpoint name and decodes its JSON answer into out. The
// token goes only where the line's auth middleware demands one.
func (c *serverClient) get(ctx context.Context, name string, out any) error {
	ep, err := c.line.Endpoint(name)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, ep.Method, c.base+ep.Path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	if c.token != "" && ep.RequiresAuthentication {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	c.count()
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", ep.Method, ep.Path, unwrapURL(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return fmt.Errorf("%s %s: reading the answer: %w", ep.Method, ep.Path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: HTTP %d: %.200s", ep.Method, ep.Path, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("%s %s: the answer is not a %s: %w", ep.Method, ep.Path, ep.Response, err)
	}
	return nil
}

// unwrapURL drops the url.Error's method and URL, which the caller names.
func unwrapURL(err error) error {
	if u, ok := err.(interface{ Unwrap() error }); ok && strings.HasPrefix(err.Error(), "Get ") {
		return u.Unwrap()
	}
	return err
}

func (c *serverClient) version(ctx context.Context) (string, error) {
	var v stackconfig.VersionInfo
	if err := c.get(ctx, stackconfig.EndpointVersion, &v); err != nil {
		return "", err
	}
	return v.Version, nil
}

// providers lists the server's providers without their config.
func (c *serverClient) providers(ctx context.Context) ([]v1alpha1.ProviderStatus, error) {
	var list stackconfig.ListProvidersResponse
	if err := c.get(ctx, stackconfig.EndpointListProviders, &list); err != nil {
		return nil, err
	}
	out := make([]v1alpha1.ProviderStatus, 0, len(list.Data))
	for _, p := range list.Data {
		out = append(out, v1alpha1.ProviderStatus{API: p.API, ProviderID: p.ProviderID, ProviderType: p.ProviderType,
			Health: v1alpha1.ProviderHealth{Status: p.Health.Status, Message: p.Health.Message}})
	}
	return out, nil
}
