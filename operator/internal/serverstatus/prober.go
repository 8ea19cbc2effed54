// Package serverstatus reads what running Llama Stack servers say of
// themselves (their version, their providers and the providers' health)
// for the InferenceStacks' status. A Prober polls each server the
// reconciler says is Available, over its Service, with the server's TLS and
// auth, at most Concurrency at a time, every Interval (with jitter; longer
// after failures), and keeps the last result in memory. Only a result that
// differs from the one before is passed on (an event that brings the stack
// to the reconciler, which writes the status), so an idle stack costs no
// API write.
package serverstatus

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/runconfig/stackconfig"
)

// Defaults of the polling.
const (
	DefaultInterval    = time.Minute
	DefaultTimeout     = 5 * time.Second
	DefaultConcurrency = 8
	// maxBackoff bounds how far the interval grows while a server fails.
	maxBackoff = 10 * time.Minute
	// maxSlotHold bounds how long one poll holds its slot (the poll's
	// Timeout when shorter): a server that has not answered by then goes
	// on waiting without one, so that servers which accept and never
	// answer, or answer slowly, cannot take every slot for a Timeout each.
	// A server answers its version in milliseconds; with the default
	// Concurrency, even when every server hangs, 40 polls start a second:
	// a round of 2,000 stacks in 50 s, within the default Interval.
	maxSlotHold = 200 * time.Millisecond
	// jitter is the fraction of the interval each wait varies by, so
	// stacks made together are not polled together.
	jitter = 0.2
)

// requestsTotal counts the requests sent to servers, for the operator's
// metrics (the bench reads it).
var requestsTotal = prometheus.NewCounter(prometheus.CounterOpts{
	Name: "inferencestack_server_status_requests_total",
	Help: "HTTP requests the operator sent to Llama Stack servers to read their status.",
})

func init() {
	metrics.Registry.MustRegister(requestsTotal)
}

// Target is how to reach one stack's server; the reconciler makes it from
// the stack.
type Target struct {
	// Stack names the InferenceStack; UID tells a re-created one apart.
	Stack types.NamespacedName
	UID   types.UID
	// Line is the server's Llama Stack line: its endpoints and auth rules.
	Line stackconfig.Line
	// Host and Port are the server's Service (<name>.<namespace>.svc).
	Host string
	Port int32
	// TLS, when set, is the server's TLS: HTTPS, the server's certificate
	// verified against the stack's TLS Secret.
	TLS *TLS
	// Identity, when set (the stack's kubernetes auth), names the
	// ServiceAccount the operator made for the stack for this alone, whose
	// token the prober sends, and the Secret the token is bound to
	// (server.ProberServiceAccount, server.ProberSecret).
	Identity string
}

// TLS is what verifies the server and, with mutual TLS, what the operator
// presents to it.
type TLS struct {
	// SecretName is the server's kubernetes.io/tls Secret: its tls.crt
	// (and ca.crt, when present) are trusted for the server's certificate.
	SecretName string
	// ClientSecretName, with mutual TLS, is a kubernetes.io/tls Secret
	// holding a certificate the server's client CA signed, which the
	// operator presents; "" when the server asks for none.
	ClientSecretName string
}

// Result is what one poll of a server found.
type Result struct {
	// Version and Providers are what the server reported (Err == "").
	Version   string
	Providers []v1alpha2.ProviderStatus
	// Err says why the server could not be read, "" when it was: a
	// classified cause (describe), the same from poll to poll while the
	// cause is, whatever ephemeral detail the error carried.
	Err string
	// detail is the error as it came, for the log.
	detail string
}

// Unhealthy lists the providers that report an error, as
// "<id> (<api>, <type>): <message>".
func (r Result) Unhealthy(line stackconfig.Line) []string {
	var out []string
	errStatus := line.Facts().ServerAPI.Health.Error
	for _, p := range r.Providers {
		if p.Health.Status == errStatus {
			out = append(out, fmt.Sprintf("%s (%s, %s): %s", p.ProviderID, p.API, p.ProviderType, p.Health.Message))
		}
	}
	return out
}

// Prober polls the servers of the stacks it is told of. It is a manager
// Runnable (Start), and its Source brings a stack to the reconciler when
// its result changes.
type Prober struct {
	// Client requests tokens of the prober's ServiceAccounts (TokenRequest).
	Client client.Client
	// Reader reads the TLS Secrets (the manager's cache holds them without
	// data) and the prober's identities from the API server.
	Reader client.Reader
	// Interval between two polls of a server (DefaultInterval when 0).
	Interval time.Duration
	// Timeout of one poll (DefaultTimeout when 0).
	Timeout time.Duration
	// Concurrency is how many servers are polled at once
	// (DefaultConcurrency when 0).
	Concurrency int
	// Resolve, when set, maps a server's host:port to the address dialled
	// instead. Only tests and the bench set it (the servers then run as
	// processes, with no cluster network); TLS still verifies the
	// Service's name.
	Resolve func(hostport string) string
	// Clock, when set, replaces time.Now for the tokens' lifetimes (tests).
	Clock func() time.Time

	mu      sync.Mutex
	entries map[types.NamespacedName]*entry
	wake    chan struct{}
	events  chan event.GenericEvent
	tokens  tokenCache
	// requests counts the HTTP requests sent to servers (for the bench).
	requests int64
}

// entry is one polled stack.
type entry struct {
	target  Target
	result  *Result
	next    time.Time
	running bool
	fails   int
	// tls is the client TLS config made from the target's Secrets; nil
	// until read, and again after a TLS failure (the Secret may have
	// been rotated).
	tls *tlsMaterial
	// wait is how long record waited after the last poll (before jitter).
	wait time.Duration
	// client is the HTTP client of this target and TLS material, kept
	// from poll to poll so its connection is reused (keep-alive); nil
	// until the first poll, and again when either changes.
	client *http.Client
}

// drop closes the entry's idle connections and forgets its client.
func (e *entry) drop() {
	if e.client != nil {
		e.client.CloseIdleConnections()
		e.client = nil
	}
}

func (p *Prober) init() {
	if p.entries == nil {
		p.entries = map[types.NamespacedName]*entry{}
		p.wake = make(chan struct{}, 1)
		p.events = make(chan event.GenericEvent, 1024)
	}
}

// Source brings a stack to its reconciler whenever its result changes.
func (p *Prober) Source() source.Source {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.init()
	return source.Channel(p.events, &handler.EnqueueRequestForObject{})
}

// Watch has the prober poll t's server (from now on, or still), and
// returns the last result for it, if any. A changed target is polled again
// soon, its old result kept until then.
func (p *Prober) Watch(t Target) (Result, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.init()
	e := p.entries[t.Stack]
	switch {
	case e == nil || e.target.UID != t.UID:
		if e != nil {
			// A stack of that name made anew: the old one's is of no use.
			e.drop()
			p.tokens.drop(t.Stack)
		}
		e = &entry{target: t, next: time.Now().Add(p.jittered(p.interval() / 10))}
		p.entries[t.Stack] = e
		p.poke()
	case !equalTargets(e.target, t):
		e.drop()
		if e.target.Identity != t.Identity {
			p.tokens.drop(t.Stack)
		}
		e.target, e.tls, e.fails = t, nil, 0
		e.next = time.Now()
		p.poke()
	}
	if e.result == nil {
		return Result{}, false
	}
	return *e.result, true
}

// Forget stops polling a stack's server (no longer Available, or gone).
func (p *Prober) Forget(stack types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e := p.entries[stack]; e != nil {
		e.drop()
	}
	delete(p.entries, stack)
	p.tokens.drop(stack)
}

// Tokens is how many tokens the prober holds (one per stack with
// kubernetes auth that it polls).
func (p *Prober) Tokens() int { return p.tokens.len() }

// Requests is how many HTTP requests the prober has sent to servers.
func (p *Prober) Requests() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.requests
}

func equalTargets(a, b Target) bool {
	return a.Stack == b.Stack && a.UID == b.UID && a.Line == b.Line && a.Host == b.Host && a.Port == b.Port &&
		a.Identity == b.Identity && (a.TLS == nil) == (b.TLS == nil) && (a.TLS == nil || *a.TLS == *b.TLS)
}

func (p *Prober) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (p *Prober) interval() time.Duration {
	if p.Interval > 0 {
		return p.Interval
	}
	return DefaultInterval
}

func (p *Prober) timeout() time.Duration {
	if p.Timeout > 0 {
		return p.Timeout
	}
	return DefaultTimeout
}

func (p *Prober) concurrency() int {
	if p.Concurrency > 0 {
		return p.Concurrency
	}
	return DefaultConcurrency
}

// slotHold is how long a poll holds its slot at most.
func (p *Prober) slotHold() time.Duration {
	return min(p.timeout(), maxSlotHold)
}

// jittered varies d by up to ±jitter.
func (p *Prober) jittered(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (1 - jitter + 2*jitter*rand.Float64())) //nolint:gosec // spreading polls needs no secure randomness
}

// Start polls until ctx ends: each due server, at most Concurrency at once,
// and beside them at most a quarter as many (at least one) whose last poll
// failed, in a lane of their own. A poll holds its slot until it ends or
// for 200 ms (slotHold), whichever comes first, then waits for its
// server without one: a server that accepts and never answers delays the
// others by those 200 ms at most, not by the poll's Timeout (at most one
// poll per stack is in flight, so those waiting are at most one per
// stack). The loop never waits for a slot itself.
func (p *Prober) Start(ctx context.Context) error {
	p.mu.Lock()
	p.init()
	p.mu.Unlock()
	answering := make(chan struct{}, p.concurrency())
	failing := make(chan struct{}, max(1, p.concurrency()/4))
	var wg sync.WaitGroup
	defer wg.Wait()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		type poll struct {
			e    *entry
			lane chan struct{}
		}
		var due []poll
		now := time.Now()
		earliest := now.Add(time.Hour)
		p.mu.Lock()
		for _, e := range p.entries {
			switch {
			case e.running:
			case !e.next.After(now):
				e.running = true
				lane := answering
				if e.fails > 0 {
					lane = failing
				}
				due = append(due, poll{e, lane})
			case e.next.Before(earliest):
				earliest = e.next
			}
		}
		p.mu.Unlock()
		for _, d := range due {
			e, lane := d.e, d.lane
			wg.Add(1)
			go func() {
				defer wg.Done()
				select {
				case lane <- struct{}{}:
				case <-ctx.Done():
					return
				}
				var once sync.Once
				release := func() { once.Do(func() { <-lane }) }
				defer release()
				hold := time.AfterFunc(p.slotHold(), release)
				defer hold.Stop()
				p.poll(ctx, e)
			}()
		}
		timer.Reset(time.Until(earliest))
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		case <-p.wake:
		}
	}
}

// poll reads one server and records the result; a changed result brings
// the stack to the reconciler.
func (p *Prober) poll(ctx context.Context, e *entry) {
	p.mu.Lock()
	t, material, hc := e.target, e.tls, e.client
	p.mu.Unlock()
	pctx, cancel := context.WithTimeout(ctx, p.timeout())
	res, material, hc, tlsFailed := p.read(pctx, t, material, hc)
	cancel()
	if ctx.Err() != nil {
		return
	}
	if p.record(ctx, e, t, res, material, hc, tlsFailed) {
		// Sent outside the lock: the reconciler's queue may be slow to take
		// it, and reconciles call Watch meanwhile.
		obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: t.Stack.Namespace, Name: t.Stack.Name}}
		select {
		case p.events <- event.GenericEvent{Object: obj}:
		case <-ctx.Done():
		}
	}
}

// record keeps a poll's result (and the client that made it, for the next
// poll) and schedules the next poll; it reports whether the result differs
// from the one before.
func (p *Prober) record(ctx context.Context, e *entry, t Target, res Result, material *tlsMaterial, hc *http.Client, tlsFailed bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	e.running = false
	// The scheduler left this entry out of its wait: it must learn its
	// next time.
	defer p.poke()
	if p.entries[t.Stack] != e || !equalTargets(e.target, t) {
		// Forgotten, or changed while read: the next poll says.
		if hc != nil && hc != e.client {
			hc.CloseIdleConnections()
		}
		return false
	}
	if e.client != hc {
		e.drop()
		e.client = hc
	}
	e.tls = material
	if tlsFailed {
		e.tls = nil
		e.drop()
	}
	wait := p.interval()
	if res.Err != "" {
		e.fails++
		for range min(e.fails-1, 6) {
			wait *= 2
		}
		wait = min(wait, maxBackoff)
	} else {
		e.fails = 0
	}
	e.wait = wait
	e.next = time.Now().Add(p.jittered(wait))
	if e.result != nil && equalResults(*e.result, res) {
		return false
	}
	if res.Err != "" {
		log.FromContext(ctx).Info("cannot read the server of a stack", "stack", t.Stack, "error", res.Err, "detail", res.detail)
	}
	e.result = &res
	return true
}

func equalResults(a, b Result) bool {
	return a.Version == b.Version && a.Err == b.Err && slices.Equal(a.Providers, b.Providers)
}

// client is the HTTP client of a target with its TLS material: one
// transport per stack, kept from poll to poll (read).
func (p *Prober) client(t Target, material *tlsMaterial) *http.Client {
	// The connection outlives the wait between two polls (up to 20% over
	// the interval), not the longer waits of a server that keeps failing.
	transport := &http.Transport{MaxIdleConnsPerHost: 1, IdleConnTimeout: 2*p.interval() + p.timeout(), DisableCompression: true, ForceAttemptHTTP2: false}
	if material != nil {
		transport.TLSClientConfig = material.config(t.Host)
	}
	dialer := &net.Dialer{}
	transport.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if p.Resolve != nil {
			addr = p.Resolve(addr)
		}
		return dialer.DialContext(ctx, network, addr)
	}
	return &http.Client{Transport: transport}
}

// read asks the server for its version and providers, with hc, the
// target's client from the poll before (nil: made anew, as it is when the
// TLS material is read anew).
func (p *Prober) read(ctx context.Context, t Target, material *tlsMaterial, hc *http.Client) (res Result, _ *tlsMaterial, _ *http.Client, tlsFailed bool) {
	fail := func(err error) Result { return Result{Err: describe(err), detail: err.Error()} }
	c, material, hc, err := p.connect(ctx, t, material, hc)
	if err != nil {
		return fail(err), material, hc, material == nil && t.TLS != nil
	}
	version, err := c.version(ctx)
	if err == nil {
		var providers []v1alpha2.ProviderStatus
		if providers, err = c.providers(ctx); err == nil {
			return Result{Version: version, Providers: providers}, material, hc, false
		}
	}
	return fail(err), material, hc, tlsError(err)
}

// connect is the client of t's server: with the TLS material and HTTP
// client given (read anew when nil) and, with auth, the identity's token.
func (p *Prober) connect(ctx context.Context, t Target, material *tlsMaterial, hc *http.Client) (*serverClient, *tlsMaterial, *http.Client, error) {
	scheme := "http"
	if t.TLS != nil {
		scheme = "https"
		if material == nil {
			var err error
			if material, err = p.loadTLS(ctx, t); err != nil {
				return nil, nil, nil, &setupError{cause: "the server's TLS Secret cannot be read", err: err}
			}
			hc = nil
		}
	}
	if hc == nil {
		hc = p.client(t, material)
	}
	var token string
	if t.Identity != "" {
		var err error
		if token, err = p.token(ctx, t); err != nil {
			return nil, material, hc, &setupError{cause: "no token for the server's auth", err: fmt.Errorf("a token for the server's auth: %w", err)}
		}
	}
	return &serverClient{http: hc, base: fmt.Sprintf("%s://%s", scheme, net.JoinHostPort(t.Host, fmt.Sprint(t.Port))),
		line: t.Line, token: token, count: func() { p.mu.Lock(); p.requests++; p.mu.Unlock(); requestsTotal.Inc() }}, material, hc, nil
}

// setupError is what the operator could not prepare to call a server
// (its TLS material, a token): cause, classified, and the error.
type setupError struct {
	cause string
	err   error
}

func (e *setupError) Error() string { return e.err.Error() }
func (e *setupError) Unwrap() error { return e.err }

// tlsError: the request failed on the server's TLS (the Secret may have
// been rotated: the material is read anew).
func tlsError(err error) bool {
	var verr *tls.CertificateVerificationError
	return errors.As(err, &verr) || strings.Contains(err.Error(), "tls:")
}

// fingerprint is a short digest for log lines and errors.
func fingerprint(b []byte) string {
	sum := sha256.Sum256(b)
	return fmt.Sprintf("%x", sum[:6])
}
