// Package registry serves an in-process OCI registry on 127.0.0.1 for tests
// and benchmarks, so images can be pushed and pulled without Docker or the
// network.
package registry

import (
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
)

// Server is a running in-process registry.
type Server struct {
	srv *httptest.Server

	mu    sync.Mutex
	extra []*http.Server
}

// Start serves a registry on a free port of 127.0.0.1 over plain HTTP. Stop it
// with Close.
func Start() *Server {
	return &Server{srv: httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))}
}

// Host is the registry address, "127.0.0.1:PORT", to put in front of image
// references ("127.0.0.1:PORT/repo:tag").
func (s *Server) Host() string {
	return strings.TrimPrefix(s.srv.URL, "http://")
}

// ServeOn serves the same registry (the same images) also on addr, an
// "IP:port" of this machine (port 0 picks a free one), for clients that
// cannot reach 127.0.0.1, such as a container runtime in another network
// namespace. It returns the address served ("IP:PORT"); Close stops it.
func (s *Server) ServeOn(addr string) (string, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	srv := &http.Server{Handler: s.srv.Config.Handler, ReadHeaderTimeout: time.Minute}
	s.mu.Lock()
	s.extra = append(s.extra, srv)
	s.mu.Unlock()
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Printf("test/registry: serving on %s: %v", l.Addr(), err)
		}
	}()
	return l.Addr().String(), nil
}

// Close stops the registry and drops every image.
func (s *Server) Close() {
	s.mu.Lock()
	for _, srv := range s.extra {
		_ = srv.Close()
	}
	s.extra = nil
	s.mu.Unlock()
	s.srv.Close()
}

// Registry starts a registry for the test and returns its host
// ("127.0.0.1:PORT"); it stops when the test ends.
func Registry(tb testing.TB) string {
	tb.Helper()
	s := Start()
	tb.Cleanup(s.Close)
	return s.Host()
}
