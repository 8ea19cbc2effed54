package serverstatus

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/inferencestack/inferencestack/operator/runconfig/stackconfig"
)

func targets(n int) []Target {
	var out []Target
	for i := range n {
		name := fmt.Sprintf("s%d", i)
		out = append(out, Target{Stack: types.NamespacedName{Namespace: "ns", Name: name}, UID: types.UID(name),
			Line: stackconfig.Line03, Host: name + ".ns.svc", Port: 8321})
	}
	return out
}

func start(t *testing.T, p *Prober) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = p.Start(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

// TestConcurrencyIsCapped: with more servers due than Concurrency, no
// more than Concurrency requests are in flight at once.
func TestConcurrencyIsCapped(t *testing.T) {
	var mu sync.Mutex
	inFlight, most := 0, 0
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		inFlight++
		most = max(most, inFlight)
		mu.Unlock()
		<-release
		mu.Lock()
		inFlight--
		mu.Unlock()
		if strings.HasSuffix(r.URL.Path, "/version") {
			fmt.Fprint(w, `{"version":"0.3.0"}`)
			return
		}
		fmt.Fprint(w, `{"data":[]}`)
	}))
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	p := &Prober{Interval: 50 * time.Millisecond, Concurrency: 3, Resolve: func(string) string { return addr }}
	p.Source()
	ts := targets(12)
	for _, tg := range ts {
		p.Watch(tg)
	}
	// Every server is due at once (not spread over the first interval).
	for _, e := range p.entries {
		e.next = time.Now()
	}
	start(t, p)
	// The first three hold their slot until released.
	require.Eventually(t, func() bool { return p.Requests() >= 3 }, 10*time.Second, time.Millisecond)
	close(release)
	require.Eventually(t, func() bool {
		for _, tg := range ts {
			if r, ok := p.Watch(tg); !ok || r.Err != "" {
				return false
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	require.LessOrEqual(t, most, 3, "requests in flight at once")
}

// TestRefusingServerIsQuiet: a server that refuses connections gives one
// result (and one event) per stack, not one per poll, and is polled less
// and less often.
func TestRefusingServerIsQuiet(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close()) // nothing listens there any more
	p := &Prober{Interval: 5 * time.Millisecond, Resolve: func(string) string { return addr }}
	p.Source()
	ts := targets(2)
	for _, tg := range ts {
		p.Watch(tg)
	}
	start(t, p)
	// Six polls each, or so (a refused poll sends one request).
	require.Eventually(t, func() bool { return p.Requests() >= 12 }, 30*time.Second, time.Millisecond)
	require.Len(t, p.events, 2, "events for two stacks whose server keeps refusing")
	for _, tg := range ts {
		r, ok := p.Watch(tg)
		require.True(t, ok)
		require.Contains(t, r.Err, "connection refused")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range p.entries {
		require.GreaterOrEqual(t, e.fails, 4, "refused polls of %s recorded", e.target.Stack)
	}
}
