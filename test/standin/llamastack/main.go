// Command llama is a test-only stand-in for a Llama Stack server image,
// used where the real images (docker.io/llamastack/distribution-*) cannot be
// pulled. It is not Llama Stack: it enforces the start-up contract of the
// pinned line as upstream's source defines it, and nothing more.
//
// Run as `llama stack run <config>` (the operator's command), with the line
// in LLAMA_STACK_STANDIN_VERSION (set in the stand-in image), it:
//   - loads the config with the conformance model of that line
//     (operator/runconfig/stackconfig) and exits 1 on any error, an unset
//     ${env.NAME} without a default included (upstream's EnvVarError);
//   - creates every folder the config makes the server write to, the
//     external providers folder included (os.makedirs in `llama stack run`
//     at v0.2.23 and v0.3.0, "None" in the working directory when unset),
//     and exits 1 when one is not writable;
//   - serves GET /v1/health on server.port (default 8321) on every address:
//     HTTPS with tls_certfile/tls_keyfile, requiring a client certificate
//     signed by tls_cafile when set (uvicorn ssl_cert_reqs=CERT_REQUIRED);
//     with server.auth, a bearer token is demanded on every path on 0.2
//     and on every path but /v1/health and /v1/version on 0.3 (the token
//     itself is not checked: the real server asks the API server).
package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/inferencestack/inferencestack/operator/runconfig/stackconfig"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "llama (stand-in):", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) != 3 || args[0] != "stack" || args[1] != "run" {
		return fmt.Errorf("usage: llama stack run <config>, got %q", args)
	}
	line, err := stackconfig.LineOf(os.Getenv("LLAMA_STACK_STANDIN_VERSION"))
	if err != nil {
		return err
	}
	data, err := os.ReadFile(args[2])
	if err != nil {
		return err
	}
	home, _ := os.UserHomeDir()
	if h := os.Getenv("HOME"); h != "" {
		home = h
	}
	res, err := stackconfig.Check(line, data, stackconfig.Options{Env: env, Home: home})
	if err != nil {
		return fmt.Errorf("%s: %w", args[2], err)
	}
	for _, dir := range res.WritableDirs {
		if err := writable(dir); err != nil {
			return err
		}
	}
	srv := stackconfig.ServerConfig{}
	if res.Server != nil {
		srv = *res.Server
	}
	port := int64(8321)
	if srv.Port != nil {
		port = *srv.Port
	}
	handler := http.NewServeMux()
	handler.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		open := line != stackconfig.Line02 && (r.URL.Path == "/v1/health" || r.URL.Path == "/v1/version")
		if srv.Auth != nil && !open && !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
			http.Error(w, `{"error":{"message":"Authentication required"}}`, http.StatusUnauthorized)
			return
		}
		switch r.URL.Path {
		case "/v1/health":
			fmt.Fprintln(w, `{"status":"OK"}`)
		case "/v1/version":
			fmt.Fprintf(w, "{\"version\":%q}\n", os.Getenv("LLAMA_STACK_STANDIN_VERSION"))
		default:
			http.NotFound(w, r)
		}
	})
	server := &http.Server{Addr: fmt.Sprintf(":%d", port), Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	fmt.Printf("llama (stand-in %s): config valid, serving on :%d\n", line, port)
	if srv.TLSCertFile == nil {
		return server.ListenAndServe()
	}
	server.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	if srv.TLSCAFile != nil {
		pem, err := os.ReadFile(*srv.TLSCAFile)
		if err != nil {
			return err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("server.tls_cafile %s holds no PEM certificate", *srv.TLSCAFile)
		}
		server.TLSConfig.ClientCAs, server.TLSConfig.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return server.ListenAndServeTLS(*srv.TLSCertFile, *srv.TLSKeyFile)
}

// env is the process environment; an empty value counts as unset, as
// upstream's replace_env_vars treats it.
func env(name string) (string, bool) {
	v, ok := os.LookupEnv(name)
	return v, ok && v != ""
}

// writable creates dir (as the server would) and proves it can write there.
func writable(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("the config makes the server write to %s: %w", dir, err)
	}
	f, err := os.CreateTemp(dir, ".standin-*")
	if err != nil {
		return fmt.Errorf("the config makes the server write to %s: %w", dir, err)
	}
	name := f.Name()
	return errors.Join(f.Close(), os.Remove(filepath.Clean(name)))
}
