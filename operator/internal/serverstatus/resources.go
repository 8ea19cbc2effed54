package serverstatus

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"
)

// maxListTime bounds one asking of a server for its resources (all
// tables together): the reconcile that asks waits for it.
const maxListTime = 3 * time.Second

// ListError is why a server's resources could not be listed. Its Error is
// a classified cause (as describe's, never the server's own words or a
// body), the same from one try to the next while the cause is; Detail is
// the error as it came, for the log.
type ListError struct {
	Cause  string
	Detail string
}

func (e *ListError) Error() string { return e.Cause }

// Resources asks t's server (its line: the old line's server) for the
// identifiers of the resources of each routing table in tables, sorted,
// by the line's ResourceList facts, through the stack's client: the same
// TLS material, keep-alive connection and token as the polls (made as a
// poll would make them when the stack is not polled). It takes at most
// Timeout or 3 s, whichever is shorter, for all tables, and stops at the
// first that fails, with a *ListError.
func (p *Prober) Resources(ctx context.Context, t Target, tables []string) (map[string][]string, error) {
	p.mu.Lock()
	p.init()
	var material *tlsMaterial
	var hc *http.Client
	e := p.entries[t.Stack]
	if e != nil && sameServer(e.target, t) {
		material, hc = e.tls, e.client
	}
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, min(p.timeout(), maxListTime))
	defer cancel()
	c, material, hc, err := p.connect(ctx, t, material, hc)
	out := map[string][]string{}
	for _, table := range tables {
		if err != nil {
			break
		}
		var ids []string
		if ids, err = c.resources(ctx, table); err == nil {
			out[table] = ids
		}
	}
	p.keep(t, material, hc, err != nil && tlsError(err))
	if err != nil {
		return nil, &ListError{Cause: classify(err), Detail: err.Error()}
	}
	return out, nil
}

// keep gives the client a listing made to the stack's entry when it has
// none yet (the next poll reuses its connection); one the entry does not
// take is closed.
func (p *Prober) keep(t Target, material *tlsMaterial, hc *http.Client, tlsFailed bool) {
	if hc == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.entries[t.Stack]
	switch {
	case e != nil && e.client == hc && tlsFailed:
		e.tls = nil
		e.drop()
	case e != nil && e.client == hc:
	case e != nil && e.client == nil && !e.running && !tlsFailed && sameServer(e.target, t):
		e.client, e.tls = hc, material
	default:
		hc.CloseIdleConnections()
	}
}

// sameServer: a and b reach the same server the same way (their lines may
// differ: the poll's is the stack's new line while a move waits).
func sameServer(a, b Target) bool {
	a.Line = b.Line
	return equalTargets(a, b)
}

// resources lists the identifiers of the resources of a routing table.
func (c *serverClient) resources(ctx context.Context, table string) ([]string, error) {
	lf, ok := c.line.ResourceList(table)
	if !ok {
		return nil, fmt.Errorf("the facts of Llama Stack %s name no list of %s", c.line.Tag(), table)
	}
	var answer map[string]any
	if err := c.get(ctx, lf.Endpoint, &answer); err != nil {
		return nil, err
	}
	ep, _ := c.line.Endpoint(lf.Endpoint)
	shapeError := func() error {
		return &requestError{method: ep.Method, path: ep.Path, notShaped: ep.Response,
			err: fmt.Errorf("the answer's %s is not a list of %s with %s", lf.ListField, lf.Item, lf.IdentifierField)}
	}
	items, ok := answer[lf.ListField].([]any)
	if !ok {
		return nil, shapeError()
	}
	ids := make([]string, 0, len(items))
	for _, item := range items {
		m, _ := item.(map[string]any)
		id, _ := m[lf.IdentifierField].(string)
		if id == "" {
			return nil, shapeError()
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return slices.Compact(ids), nil
}

// classify is the cause of a failed listing for a status: the request,
// and what happened in the operator's words (never the server's message
// or body, which describe keeps for the providers' status).
func classify(err error) string {
	var se *setupError
	if errors.As(err, &se) {
		return se.cause
	}
	var re *requestError
	if !errors.As(err, &re) {
		return "the request cannot be made"
	}
	what := re.method + " " + re.path + ": "
	var cert *tls.CertificateVerificationError
	switch {
	case re.status != 0:
		return fmt.Sprintf("%sHTTP %d", what, re.status)
	case re.notShaped != "":
		return what + "the answer is not a " + re.notShaped
	case errors.As(err, &cert):
		return what + "the server's certificate is not trusted"
	}
	if d := describe(err); d != re.Error() {
		return d
	}
	return what + "the request failed"
}
