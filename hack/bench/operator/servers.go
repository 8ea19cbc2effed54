package main

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/inferencestack/inferencestack/test/local"
)

// How the servers behave, as the prober sees them through the bench's
// front (front).
const (
	// caseAnswer: the stand-in answers at once.
	caseAnswer = "answer"
	// caseSlow: the stand-in answers, each request after the slow delay
	// (within the prober's timeout).
	caseSlow = "slow"
	// caseHang: the connection is accepted and the request read, but never
	// answered (until the prober gives up).
	caseHang = "hang"
	// caseMixed: every other server hangs, the others answer at once.
	caseMixed = "mixed"
)

// cases in the order they run by default: mixed before hang, so that the
// servers that hang in it answered until then (the prober still counts
// them among the servers that answer).
var cases = []string{caseAnswer, caseSlow, caseMixed, caseHang}

// front stands between the operator and the stand-in server and behaves
// as the current case says. It follows the requests it sees per server
// (the Host the prober asks for: the stack's Service), so the bench knows
// when every server has been polled in a case, and how long each waited
// between two polls.
type front struct {
	proxy *httputil.ReverseProxy
	slow  time.Duration
	srv   *http.Server
	addr  string

	mu       sync.Mutex
	mode     string
	switched time.Time
	// hanging are the servers that hang in the mixed case.
	hanging map[string]bool
	seen    map[string]*polls
}

// polls is what the front saw of one server since the last switch.
type polls struct {
	requests int
	last     time.Time
	// gap is the longest time without a request, the time from the
	// switch to the first included.
	gap time.Duration
}

// startFront serves on a free local port, in front of the stand-in at
// standin, in the answer case.
func startFront(standin string, slow time.Duration) (*front, error) {
	target, err := url.Parse("http://" + standin)
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f := &front{slow: slow, addr: l.Addr().String(), mode: caseAnswer, switched: time.Now(), seen: map[string]*polls{},
		proxy: &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(target) }}}
	f.srv = &http.Server{Handler: f, ReadHeaderTimeout: time.Minute}
	go func() { _ = f.srv.Serve(l) }()
	return f, nil
}

func (f *front) close() { _ = f.srv.Close() }

func (f *front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	f.mu.Lock()
	mode := f.mode
	if mode == caseMixed {
		mode = caseAnswer
		if f.hanging[r.Host] {
			mode = caseHang
		}
	}
	p := f.seen[r.Host]
	if p == nil {
		p = &polls{last: f.switched}
		f.seen[r.Host] = p
	}
	p.requests++
	p.gap, p.last = max(p.gap, now.Sub(p.last)), now
	f.mu.Unlock()
	switch mode {
	case caseHang:
		<-r.Context().Done() // until the prober gives up, or the bench ends
		return
	case caseSlow:
		select {
		case <-time.After(f.slow):
		case <-r.Context().Done():
			return
		}
	}
	f.proxy.ServeHTTP(w, r)
}

// set switches to the case c and forgets the requests seen; in the mixed
// case every other of hosts hangs.
func (f *front) set(c string, hosts []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mode, f.switched, f.seen, f.hanging = c, time.Now(), map[string]*polls{}, map[string]bool{}
	if c == caseMixed {
		for i, h := range slices.Sorted(slices.Values(hosts)) {
			f.hanging[h] = i%2 == 1
		}
	}
}

// servers are the servers (hosts) polled since the last set.
func (f *front) servers() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Collect(maps.Keys(f.seen))
}

// gaps are the longest waits between two requests (or from the switch to
// the first) of a server that answers and of one that hangs, among hosts,
// until now.
func (f *front) gaps(hosts []string) (answering, hanging time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	for _, h := range hosts {
		gap := now.Sub(f.switched)
		if p := f.seen[h]; p != nil {
			gap = max(p.gap, now.Sub(p.last))
		}
		if f.mode == caseHang || f.hanging[h] {
			hanging = max(hanging, gap)
		} else {
			answering = max(answering, gap)
		}
	}
	return answering, hanging
}

// waitPolled waits until each of hosts has been sent at least n requests
// since the last set.
func (f *front) waitPolled(ctx context.Context, hosts []string, n int) error {
	return local.Wait(ctx, 200*time.Millisecond, func() error {
		f.mu.Lock()
		defer f.mu.Unlock()
		behind := 0
		for _, h := range hosts {
			if p := f.seen[h]; p == nil || p.requests < n {
				behind++
			}
		}
		if behind > 0 {
			return fmt.Errorf("%d of %d servers not sent %d requests yet in the %s case", behind, len(hosts), n, f.mode)
		}
		return nil
	})
}

// caseResult is what one case measured over its window.
type caseResult struct {
	name string
	// switchStatus, switchEvents are the status writes and Events from the
	// switch until every server was sent two requests in the case.
	switchStatus, switchEvents int
	window                     time.Duration
	requests, writes           int64
	status, events             int
	// answeringGap, hangingGap are the longest waits between two polls
	// of a server that answers and of one that hangs, from the switch to
	// the window's end (0: none such in the case).
	answeringGap, hangingGap time.Duration
	// unsettled, when not "", says that not every server was sent two
	// requests within -case-timeout of the switch, and how many were not.
	unsettled string
}

func perMinute(n int64, d time.Duration) float64 { return float64(n) / d.Minutes() }

func printCases(stacks int, slow time.Duration, results []caseResult) {
	fmt.Printf("live status by how the servers behave (%s: answer at once; %s: answer after %s; %s: accept, never answer; %s: every other hangs):\n",
		caseAnswer, caseSlow, slow, caseHang, caseMixed)
	fmt.Printf("  %-7s %7s %12s %10s %14s %13s %11s %15s %15s   %s\n", "case", "window", "requests/min", "per stack",
		"status writes/min", "event writes/min", "all writes/min", "longest gap:", "longest gap:", "writes at the switch")
	fmt.Printf("  %-7s %7s %12s %10s %14s %13s %11s %15s %15s   %s\n", "", "", "", "", "", "", "", "answering", "hanging", "(status, events)")
	gap := func(d time.Duration) string {
		if d == 0 {
			return "-"
		}
		return d.Round(100 * time.Millisecond).String()
	}
	for _, c := range results {
		fmt.Printf("  %-7s %7s %12.1f %10.2f %14.1f %13.1f %11.1f %15s %15s   %d, %d\n", c.name, c.window.Round(time.Second),
			perMinute(c.requests, c.window), perMinute(c.requests, c.window)/float64(stacks),
			perMinute(int64(c.status), c.window), perMinute(int64(c.events), c.window), perMinute(c.writes, c.window),
			gap(c.answeringGap), gap(c.hangingGap), c.switchStatus, c.switchEvents)
		if c.unsettled != "" {
			fmt.Printf("  %-7s (the window began unsettled: %s)\n", "", c.unsettled)
		}
	}
}

// splitCases parses the -cases flag.
func splitCases(s string) ([]string, error) {
	var out []string
	for c := range strings.SplitSeq(s, ",") {
		c = strings.TrimSpace(c)
		if c == "" {
			continue
		}
		if !slices.Contains(cases, c) {
			return nil, fmt.Errorf("-cases %q: %q is none of %s", s, c, strings.Join(cases, ", "))
		}
		out = append(out, c)
	}
	return out, nil
}

// runCases has the servers behave as each of o.cases says in turn: it
// switches, waits until every server that answered so far has been sent
// two requests in the case (a poll of a server that answers sends two, of
// one that hangs one: the first poll's result is recorded by then), and
// measures the window that follows.
func runCases(ctx context.Context, o options, f *front, m *metrics, audit *auditLog) ([]caseResult, error) {
	hosts := f.servers()
	var out []caseResult
	for _, c := range o.cases {
		fmt.Fprintf(os.Stderr, "bench: servers %s: waiting until each of %d was sent two requests...\n", c, len(hosts))
		f.set(c, hosts)
		if _, err := audit.operators(); err != nil {
			return nil, err
		}
		res := caseResult{name: c}
		waitCtx, cancel := context.WithTimeout(ctx, o.caseTimeout)
		err := f.waitPolled(waitCtx, hosts, 2)
		cancel()
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case err != nil:
			// A finding, not a failure of the bench: the prober did not
			// get round to every server within -case-timeout.
			res.unsettled = fmt.Sprintf("after %s: %v", o.caseTimeout, err)
		}
		switched, err := audit.operators()
		if err != nil {
			return nil, err
		}
		res.switchStatus, res.switchEvents = statusWrites(switched)
		before, err := m.read()
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(os.Stderr, "bench: servers %s: measuring for %s...\n", c, o.window)
		start := time.Now()
		select { // a window to measure, not a wait for anything
		case <-time.After(o.window):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		res.window = time.Since(start)
		after, err := m.read()
		if err != nil {
			return nil, err
		}
		ws, err := audit.operators()
		if err != nil {
			return nil, err
		}
		res.requests, res.writes = after.serverRequests-before.serverRequests, after.writes-before.writes
		res.answeringGap, res.hangingGap = f.gaps(hosts)
		res.status, res.events = statusWrites(ws)
		out = append(out, res)
	}
	return out, nil
}
