// Package imagetest serves an in-process OCI registry on 127.0.0.1 for tests
// and benchmarks, so images can be pushed and pulled without Docker or the
// network.
package imagetest

import (
	"io"
	"log"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
)

// Server is a running in-process registry.
type Server struct {
	srv *httptest.Server
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

// Close stops the registry and drops every image.
func (s *Server) Close() {
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
