package serverstatus

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
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
		return &requestError{method: ep.Method, path: ep.Path, err: err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return &requestError{method: ep.Method, path: ep.Path, err: fmt.Errorf("reading the answer: %w", err)}
	}
	if resp.StatusCode != http.StatusOK {
		return &requestError{method: ep.Method, path: ep.Path, status: resp.StatusCode, message: errorMessage(body),
			err: fmt.Errorf("HTTP %d: %.200s", resp.StatusCode, strings.TrimSpace(string(body)))}
	}
	if err := json.Unmarshal(body, out); err != nil {
		return &requestError{method: ep.Method, path: ep.Path, notShaped: ep.Response, err: fmt.Errorf("the answer is not a %s: %w", ep.Response, err)}
	}
	return nil
}

// requestError is a request to a server that failed: how, in err; for an
// answer other than 200, its status and upstream's error message.
type requestError struct {
	method, path string
	status       int
	message      string
	// notShaped is the response model an answer of 200 did not match.
	notShaped string
	err       error
}

func (e *requestError) Error() string {
	return fmt.Sprintf("%s %s: %v", e.method, e.path, unwrapURL(e.err))
}
func (e *requestError) Unwrap() error { return e.err }

// errorMessage is the message of an error answer in upstream's shapes
// ({"error": {"message": ...}}, or FastAPI's {"detail": ...}), "" for
// another body (a proxy's page, say), cut to 200 characters.
func errorMessage(body []byte) string {
	var answer struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
		Detail any `json:"detail"`
	}
	if json.Unmarshal(body, &answer) != nil {
		return ""
	}
	msg := answer.Error.Message
	if d, ok := answer.Detail.(string); ok && msg == "" {
		msg = d
	}
	if len(msg) > 200 {
		msg = msg[:200] + "..."
	}
	return msg
}

// describe is the cause of a failed poll as the status records it:
// classified, so that it stays the same from poll to poll while the cause
// does (an error's text may carry an ephemeral port, a remote address or
// the server's own words, which would make every poll a change and every
// change a status write). The error as it came goes to the log.
func describe(err error) string {
	var re *requestError
	if !errors.As(err, &re) {
		return err.Error()
	}
	what := re.method + " " + re.path + ": "
	var dns *net.DNSError
	var cert *tls.CertificateVerificationError
	var ne net.Error
	switch {
	case re.status != 0 && re.message != "":
		return fmt.Sprintf("%sHTTP %d: %s", what, re.status, re.message)
	case re.status != 0:
		return fmt.Sprintf("%sHTTP %d", what, re.status)
	case errors.As(err, &dns):
		return fmt.Sprintf("%scannot resolve %s: %s", what, dns.Name, dns.Err)
	case errors.Is(err, syscall.ECONNREFUSED):
		return what + "connection refused"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return what + "no route to the server"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return what + "no answer within the timeout"
	case errors.As(err, &cert):
		return what + cert.Error()
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return what + "the server closed the connection before answering"
	}
	return re.Error()
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
func (c *serverClient) providers(ctx context.Context) ([]v1alpha2.ProviderStatus, error) {
	var list stackconfig.ListProvidersResponse
	if err := c.get(ctx, stackconfig.EndpointListProviders, &list); err != nil {
		return nil, err
	}
	out := make([]v1alpha2.ProviderStatus, 0, len(list.Data))
	for _, p := range list.Data {
		out = append(out, v1alpha2.ProviderStatus{API: p.API, ProviderID: p.ProviderID, ProviderType: p.ProviderType,
			Health: v1alpha2.ProviderHealth{Status: p.Health.Status, Message: p.Health.Message}})
	}
	return out, nil
}
