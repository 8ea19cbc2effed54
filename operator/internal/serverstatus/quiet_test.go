package serverstatus

import (
	"crypto/tls"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// answer serves a server's version and providers.
func answer(w http.ResponseWriter, r *http.Request) {
	if strings.HasSuffix(r.URL.Path, "/version") {
		fmt.Fprint(w, `{"version":"0.3.0"}`)
		return
	}
	fmt.Fprint(w, `{"data":[]}`)
}

// TestConnectionIsReused: polls of one server go over one connection
// (keep-alive), not a new TCP (and TLS) handshake each.
func TestConnectionIsReused(t *testing.T) {
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(answer))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	p := &Prober{Interval: 5 * time.Millisecond, Resolve: func(string) string { return addr }}
	p.Source()
	p.Watch(targets(1)[0])
	start(t, p)
	require.Eventually(t, func() bool { return p.Requests() >= 20 }, 30*time.Second, time.Millisecond)
	require.Equal(t, int64(1), conns.Load(), "connections for %d requests", p.Requests())
}

// TestChangingErrorTextIsQuiet: a server whose error answers differ in
// every detail but their cause (here an ever-changing body of a 500)
// gives one result, and one event, not one per poll.
func TestChangingErrorTextIsQuiet(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, fmt.Sprintf("<html>upstream proxy error at request %d</html>", n.Add(1)), http.StatusBadGateway)
	}))
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	p := &Prober{Interval: time.Millisecond, Resolve: func(string) string { return addr }}
	p.Source()
	tg := targets(1)[0]
	p.Watch(tg)
	start(t, p)
	require.Eventually(t, func() bool { return n.Load() >= 6 }, 30*time.Second, time.Millisecond)
	require.Len(t, p.events, 1, "events for one server whose answers differ only in their text")
	r, ok := p.Watch(tg)
	require.True(t, ok)
	require.Equal(t, "GET /v1/version: HTTP 502", r.Err)
}

// TestGapsBetweenPollsOfAFailingServerGrow: a server that keeps failing
// is polled less and less often: the wait after each failed poll doubles
// (up to maxBackoff), and the jitter stays within ±20% of it.
func TestGapsBetweenPollsOfAFailingServerGrow(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "no", http.StatusInternalServerError)
	}))
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	interval := 20 * time.Millisecond
	p := &Prober{Interval: interval, Resolve: func(string) string { return addr }}
	p.Source()
	tg := targets(1)[0]
	p.Watch(tg)
	start(t, p)
	waits := map[int]time.Duration{}
	require.Eventually(t, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		e := p.entries[tg.Stack]
		if e.fails > 0 {
			waits[e.fails] = e.wait
			if lead := time.Until(e.next); lead > e.wait*12/10 {
				t.Errorf("after failure %d the next poll is %s away, more than the wait %s and 20%%", e.fails, lead, e.wait)
			}
		}
		return len(waits) >= 5
	}, 30*time.Second, 100*time.Microsecond)
	for fails := 2; fails <= 5; fails++ {
		if w, ok := waits[fails]; ok {
			if before, ok := waits[fails-1]; ok {
				require.Equal(t, 2*before, w, "the wait after failure %d, after %s", fails, before)
			}
		}
	}
	require.Equal(t, interval, waits[1], "the wait after the first failure")
}

// TestFailingServersDoNotDelayTheOthers: with more servers that stopped
// answering (their requests hang) than Concurrency, a server that answers
// is still polled: failing servers wait in a lane of their own.
func TestFailingServersDoNotDelayTheOthers(t *testing.T) {
	var hang atomic.Bool
	stuck := make(chan struct{})
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if hang.Load() {
			<-stuck
			return
		}
		http.Error(w, "overloaded", http.StatusServiceUnavailable)
	}))
	defer bad.Close()
	defer close(stuck) // first: bad.Close waits for the hanging requests
	p, ts, good := oneAnswersTheRestAt(t, bad, 7, 2)
	// Every failing server has failed once: from now on their polls hang.
	require.Eventually(t, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, tg := range ts[1:] {
			if p.entries[tg.Stack].fails == 0 {
				return false
			}
		}
		return true
	}, 30*time.Second, time.Millisecond)
	hang.Store(true)
	before := good.Load()
	require.Eventually(t, func() bool { return good.Load() >= before+20 }, 30*time.Second, time.Millisecond,
		"the answering server is polled while six others hang")
}

// TestServersThatNeverAnswerDoNotDelayTheOthers: servers that accept and
// never answer, from their first poll on (so in the lane of servers that
// answer), take a slot for slotHold each at most, not for the poll's
// Timeout: the one server that answers is polled again and again while
// they hang, with a single slot.
func TestServersThatNeverAnswerDoNotDelayTheOthers(t *testing.T) {
	stuck := make(chan struct{})
	var hung atomic.Int64
	bad := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		hung.Add(1)
		<-stuck
	}))
	defer bad.Close()
	defer close(stuck) // first: bad.Close waits for the hanging requests
	_, _, good := oneAnswersTheRestAt(t, bad, 4, 1)
	require.Eventually(t, func() bool { return hung.Load() == 3 && good.Load() >= 20 }, 30*time.Second, time.Millisecond,
		"the answering server is polled while three others hang")
}

// oneAnswersTheRestAt starts a prober (Concurrency slots) watching n
// stacks: the first one's server answers (good counts its requests), the
// others' are bad.
func oneAnswersTheRestAt(t *testing.T, bad *httptest.Server, n, concurrency int) (*Prober, []Target, *atomic.Int64) {
	t.Helper()
	good := new(atomic.Int64)
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		good.Add(1)
		answer(w, r)
	}))
	t.Cleanup(ok.Close)
	ts := targets(n)
	p := &Prober{Interval: 5 * time.Millisecond, Timeout: time.Hour, Concurrency: concurrency, Resolve: func(hostport string) string {
		if strings.HasPrefix(hostport, ts[0].Host) {
			return ok.Listener.Addr().String()
		}
		return bad.Listener.Addr().String()
	}}
	p.Source()
	for _, tg := range ts {
		p.Watch(tg)
	}
	start(t, p)
	return p, ts, good
}

// TestTLSConnectionIsReused: polls of a server with TLS go over one
// connection, one TLS handshake, not one handshake each.
func TestTLSConnectionIsReused(t *testing.T) {
	var conns, handshakes atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(answer))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.TLS = &tls.Config{VerifyConnection: func(tls.ConnectionState) error { handshakes.Add(1); return nil }} //nolint:gosec // a test server
	srv.StartTLS()
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	tg := targets(1)[0]
	tg.TLS = &TLS{SecretName: "s0-tls"}
	// The server's own certificate, pinned: it names example.com, not the
	// Service.
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s0-tls"},
		Data: map[string][]byte{corev1.TLSCertKey: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})}}
	c := (&tokenRequests{now: time.Now}).client(t, secret)
	p := &Prober{Reader: c, Client: c, Interval: 5 * time.Millisecond, Resolve: func(string) string { return addr }}
	p.Source()
	p.Watch(tg)
	start(t, p)
	require.Eventually(t, func() bool { return p.Requests() >= 20 }, 30*time.Second, time.Millisecond)
	r, ok := p.Watch(tg)
	require.True(t, ok)
	require.Empty(t, r.Err)
	require.Equal(t, int64(1), conns.Load(), "connections for %d requests", p.Requests())
	require.Equal(t, int64(1), handshakes.Load(), "TLS handshakes for %d requests", p.Requests())
}
