// Command llama is a test-only stand-in for a Llama Stack server image,
// used where the real images (docker.io/llamastack/distribution-*, and
// docker.io/ogx/distribution-* from OGX 0.8.0) cannot be pulled. It is not
// Llama Stack: it enforces the start-up contract of the pinned line as
// upstream's source defines it, and nothing more.
//
// Run as the line's run command with a config, `llama stack run <config>
// [options]` (`ogx stack run` at OGX 0.8, whose image holds no llama; the
// line's facts name it, and its port and config-folder variables, OGX_PORT
// and OGX_CONFIG_DIR: 0.8 reads no LLAMA_STACK_* variable) or,
// called as uvicorn, `uvicorn llama_stack.core.server.server:create_app
// --factory [options]` with the config's path in LLAMA_STACK_CONFIG (the
// operator's command with workload.workers), and no other way
// (stackconfig.Line.ParseCommand: the forms of the line's facts), with the
// line in LLAMA_STACK_STANDIN_VERSION (set in the stand-in image), it:
//   - loads the config with the conformance model of that line
//     (operator/runconfig/stackconfig) and exits 1 on any error, an unset
//     ${env.NAME} without a default included (upstream's EnvVarError);
//   - creates every folder the config makes the server write to, the
//     external providers folder included (os.makedirs in `llama stack run`
//     at v0.2.23 and v0.3.0, "None" in the working directory when unset),
//     and exits 1 when one is not writable; run as uvicorn, which creates
//     no external providers folder, it exits 1 when a set one is missing
//     (upstream's FileNotFoundError in core/distribution.py);
//   - opens the server's own stores where the config, or upstream's
//     defaults, place them (stackconfig.Result.Stores: the registry, the
//     prompts store, 0.3's conversations store): a SQLite store is kept
//     as a JSON file at the SQLite file's path, read back at start (it
//     exits 1 when one cannot be written); PostgreSQL and Redis stores
//     are held in memory (no client here). It registers the config's
//     models into the registry, as register_resources does;
//   - serves, with upstream's shapes, GET and POST /v1/models and
//     /v1/prompts, and on 0.3 POST /v1/conversations and GET
//     /v1/conversations/{id}, and, where the line keeps an inference store
//     (stackconfig.Result.Stores["inference"]: its table as the line's code
//     names it, hard-coded at 0.3.0, table_name at 0.7.1), POST and GET
//     /v1/chat/completions and GET /v1/chat/completions/{id} (a canned
//     reply of a registered model, kept as the history row), each reading
//     and writing those stores; and
//     GET /standin/v1/stores (the stand-in's own, not upstream's): where
//     each store is kept and how many entries it read back at start;
//   - listens on the command's port (llama stack run:
//     --port, else $LLAMA_STACK_PORT, else 8321; server.port of the config
//     is not read, as upstream's run.py never reaches it), on server.host
//     or every address (llama stack run) or the --host address (uvicorn's
//     default 127.0.0.1): HTTPS with the TLS files (tls_certfile/
//     tls_keyfile of the config, or --ssl-certfile/--ssl-keyfile),
//     requiring a client certificate signed by tls_cafile (or
//     --ssl-ca-certs with --ssl-cert-reqs 2) when set;
//   - one process stands for uvicorn's --workers; GET /standin/v1/process
//     (the stand-in's own) tells the form, workers, port and hosts it was
//     started with, and GET /standin/v1/file?path=P answers the content of
//     file P as the server reads it (for tests of mounted volumes);
//   - serves GET /v1/health, /v1/version and /v1/providers where the
//     line's facts place them (stackconfig.Line.Endpoint, derived from
//     upstream's @webmethod routes), with upstream's response shapes: the
//     providers are the config's enabled ones, each reporting upstream's
//     "Not Implemented" health unless a test set another with the
//     stand-in's own PUT /standin/v1/health/{provider_id};
//   - serves the list endpoints of the routing tables a later line drops
//     (datasets, scoring functions and benchmarks up to 0.7) where the
//     line's facts place them (resource_lists), answering what its
//     registry holds of each; a test registers one with the stand-in's own
//     POST /standin/v1/registry/{type} ({"identifier": ...}), as a client
//     would through the server's API (the stand-in registers only the
//     config's models at start);
//   - with server.auth, a bearer token is demanded where the line's facts say
//     the auth middleware does (every path on 0.2; on 0.3 all but
//     /v1/health and /v1/version). With the kubernetes provider the token
//     is checked as upstream does it, by a SelfSubjectReview sent with it
//     to api_server_url (verified with tls_cafile), when
//     LLAMA_STACK_STANDIN_CHECK_TOKENS=1 (a test that runs the stand-in
//     beside its API server); otherwise only its presence is. GET
//     /standin/v1/principals (the stand-in's own) lists the usernames
//     admitted so far.
package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/inferencestack/inferencestack/operator/runconfig/stackconfig"
)

func main() {
	// Called as the line's program (llama, ogx) or as uvicorn (the image
	// holds both names).
	if err := run(append([]string{filepath.Base(os.Args[0])}, os.Args[1:]...)); err != nil {
		fmt.Fprintln(os.Stderr, "llama (stand-in):", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	srv, err := start(args)
	if err != nil {
		return err
	}
	return srv.serve()
}

// server is a stand-in that passed its start-up checks.
type server struct {
	line    stackconfig.Line
	cmd     stackconfig.Command
	config  stackconfig.ServerConfig
	res     stackconfig.Result
	state   *state
	handler http.Handler
	// health is what each provider reports (by provider id), as tests set
	// it; absent: upstream's default for a provider without a check.
	healthMu sync.Mutex
	health   map[string]stackconfig.HealthResponse
	// reviews checks bearer tokens (nil: only their presence is checked).
	reviews *tokenReviewer
}

// start does what the real server does before it serves: check the config,
// make the folders it writes to, open its stores (reading back what they
// hold) and register the config's models.
func start(argv []string) (*server, error) {
	line, err := stackconfig.LineOf(os.Getenv("LLAMA_STACK_STANDIN_VERSION"))
	if err != nil {
		return nil, err
	}
	cmd, err := line.ParseCommand(argv, env)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(cmd.Config)
	if err != nil {
		return nil, err
	}
	home, _ := os.UserHomeDir()
	if h := os.Getenv("HOME"); h != "" {
		home = h
	}
	res, err := stackconfig.Check(line, data, stackconfig.Options{Env: env, Home: home})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cmd.Config, err)
	}
	for _, dir := range res.WritableDirs {
		if cmd.Uvicorn && dir == res.ExternalProvidersDir {
			// Only `llama stack run` creates it; the app factory needs it.
			if _, err := os.Stat(dir); err != nil {
				r, _ := line.Facts().Rule("external_providers_dir.exists")
				return nil, fmt.Errorf("%s: %s (%s)", r.Message, dir, r.Source)
			}
		}
		if err := writable(dir); err != nil {
			return nil, err
		}
	}
	history, ok, err := historyStore(line, data, env, home)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cmd.Config, err)
	}
	if ok {
		res.Stores["inference"] = history
	}
	st, err := openState(line, res.Stores)
	if err != nil {
		return nil, err
	}
	// register_resources: the config's models, into the registry. A model
	// with provider_id "all" (rule resource.provider_all: 0.8.0's starter
	// registers three) goes on the first inference provider that is on, a
	// failure only logged; with none on, it is skipped.
	_, providerAll := line.Facts().Rule("resource.provider_all")
	for _, m := range res.Models {
		if providerAll && m.ProviderID != nil && *m.ProviderID == "all" {
			if len(res.Providers["inference"]) == 0 {
				continue
			}
			m.ProviderID = &res.Providers["inference"][0]
			if _, err := st.registerModel(res.Providers["inference"], m, "via_register_api"); err != nil {
				fmt.Fprintf(os.Stderr, "registering model %s on provider all: %v\n", *m.ModelID, err)
			}
			continue
		}
		if _, err := st.registerModel(res.Providers["inference"], m, "via_register_api"); err != nil {
			return nil, fmt.Errorf("registering model %s: %w", *m.ModelID, err)
		}
	}
	s := &server{line: line, cmd: cmd, res: res, state: st, health: map[string]stackconfig.HealthResponse{}}
	if res.Server != nil {
		s.config = *res.Server
	}
	if cmd.Uvicorn {
		// uvicorn takes the listen address and TLS from its options only.
		s.config.TLSCertFile, s.config.TLSKeyFile, s.config.TLSCAFile = nil, nil, nil
		if cmd.CertFile != "" {
			s.config.TLSCertFile, s.config.TLSKeyFile = &cmd.CertFile, &cmd.KeyFile
			if cmd.CAFile != "" && cmd.CertReqs == stackconfig.UvicornCertRequired {
				s.config.TLSCAFile = &cmd.CAFile
			}
		}
	}
	if s.config.Auth != nil && os.Getenv("LLAMA_STACK_STANDIN_CHECK_TOKENS") == "1" {
		if s.reviews, err = newTokenReviewer(s.config.Auth.ProviderConfig); err != nil {
			return nil, err
		}
	}
	s.handler = s.routes()
	return s, nil
}

// routes is the HTTP API: the line's auth middleware, then the endpoints.
func (s *server) routes() http.Handler {
	mux := http.NewServeMux()
	endpoint := func(name string) string {
		e, err := s.line.Endpoint(name)
		if err != nil {
			panic(err) // the facts are embedded and tested
		}
		return e.Method + " " + e.Path
	}
	mux.HandleFunc(endpoint(stackconfig.EndpointHealth), func(w http.ResponseWriter, _ *http.Request) {
		reply(w, stackconfig.HealthInfo{Status: "OK"}, nil)
	})
	mux.HandleFunc(endpoint(stackconfig.EndpointVersion), func(w http.ResponseWriter, _ *http.Request) {
		reply(w, stackconfig.VersionInfo{Version: os.Getenv("LLAMA_STACK_STANDIN_VERSION")}, nil)
	})
	mux.HandleFunc(endpoint(stackconfig.EndpointListProviders), func(w http.ResponseWriter, _ *http.Request) {
		reply(w, s.providers(), nil)
	})
	// The list endpoints of the routing tables a later line drops (the
	// line's resource_lists facts), answering what the registry holds of
	// the table's registry type.
	for _, rl := range s.line.Facts().ServerAPI.ResourceLists {
		mux.HandleFunc(endpoint(rl.Endpoint), func(w http.ResponseWriter, _ *http.Request) {
			items, err := list[map[string]any](s.state, "registry", s.state.registryKey(rl.RegistryType, ""))
			reply(w, map[string]any{rl.ListField: items}, err)
		})
	}
	// Not upstream's: a test registers a resource of such a table as a
	// client would through the server's API (kept in the registry).
	mux.HandleFunc("POST /standin/v1/registry/{type}", func(w http.ResponseWriter, r *http.Request) {
		typ := r.PathValue("type")
		i := slices.IndexFunc(s.line.Facts().ServerAPI.ResourceLists, func(rl stackconfig.ResourceListFact) bool { return rl.RegistryType == typ })
		if i < 0 {
			http.Error(w, fmt.Sprintf(`{"detail":"Llama Stack %s lists no %s"}`, s.line.Tag(), typ), http.StatusNotFound)
			return
		}
		var in map[string]any
		if !decode(w, r, &in) {
			return
		}
		idField := s.line.Facts().ServerAPI.ResourceLists[i].IdentifierField
		id, _ := in[idField].(string)
		if id == "" {
			http.Error(w, fmt.Sprintf(`{"detail":"%s: Field required"}`, idField), http.StatusBadRequest)
			return
		}
		in["type"] = typ
		reply(w, in, s.state.put("registry", s.state.registryKey(typ, id), in))
	})
	// Not upstream's: a test sets what a provider's health check says.
	mux.HandleFunc("PUT /standin/v1/health/{provider_id}", func(w http.ResponseWriter, r *http.Request) {
		var h stackconfig.HealthResponse
		if !decode(w, r, &h) {
			return
		}
		s.healthMu.Lock()
		s.health[r.PathValue("provider_id")] = h
		s.healthMu.Unlock()
		reply(w, h, nil)
	})
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, _ *http.Request) {
		models, err := s.state.models()
		reply(w, map[string]any{"data": models}, err)
	})
	mux.HandleFunc("POST /v1/models", func(w http.ResponseWriter, r *http.Request) {
		var in stackconfig.ModelInput
		if !decode(w, r, &in) {
			return
		}
		m, err := s.state.registerModel(s.res.Providers["inference"], in, "via_register_api")
		reply(w, m, err)
	})
	mux.HandleFunc("GET /v1/prompts", func(w http.ResponseWriter, _ *http.Request) {
		prompts, err := s.state.prompts()
		reply(w, map[string]any{"data": prompts}, err)
	})
	mux.HandleFunc("POST /v1/prompts", func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Prompt    string   `json:"prompt"`
			Variables []string `json:"variables"`
		}
		if !decode(w, r, &in) {
			return
		}
		p, err := s.state.createPrompt(in.Prompt, in.Variables)
		reply(w, p, err)
	})
	if slices.Contains(s.line.Facts().InternalAPIs, "conversations") { // the conversations API arrived in 0.3
		mux.HandleFunc("POST /v1/conversations", func(w http.ResponseWriter, r *http.Request) {
			var in struct {
				Metadata map[string]string `json:"metadata"`
			}
			if !decode(w, r, &in) {
				return
			}
			c, err := s.state.createConversation(in.Metadata)
			reply(w, c, err)
		})
		mux.HandleFunc("GET /v1/conversations/{id}", func(w http.ResponseWriter, r *http.Request) {
			c, ok, err := s.state.conversation(r.PathValue("id"))
			if err == nil && !ok {
				http.Error(w, `{"detail":"Conversation not found"}`, http.StatusNotFound)
				return
			}
			reply(w, c, err)
		})
	}
	if _, ok := s.res.Stores["inference"]; ok { // the chat completions history: the inference store (historyStore)
		mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
			var in struct {
				Model    string           `json:"model"`
				Messages []map[string]any `json:"messages"`
			}
			if !decode(w, r, &in) {
				return
			}
			c, err := s.state.storeChatCompletion(in.Model, in.Messages)
			reply(w, c, err)
		})
		mux.HandleFunc("GET /v1/chat/completions", func(w http.ResponseWriter, _ *http.Request) {
			all, err := s.state.chatCompletions()
			reply(w, map[string]any{"object": "list", "data": all}, err)
		})
		mux.HandleFunc("GET /v1/chat/completions/{id}", func(w http.ResponseWriter, r *http.Request) {
			all, err := s.state.chatCompletions()
			if err != nil {
				reply(w, nil, err)
				return
			}
			i := slices.IndexFunc(all, func(c chatCompletion) bool { return c.ID == r.PathValue("id") })
			if i < 0 {
				http.Error(w, `{"detail":"Chat completion not found"}`, http.StatusNotFound)
				return
			}
			reply(w, all[i], nil)
		})
	}
	// Not upstream's: where the stand-in keeps each store and what it read
	// back at start, for tests.
	mux.HandleFunc("GET /standin/v1/stores", func(w http.ResponseWriter, _ *http.Request) {
		reply(w, s.state.status(), nil)
	})
	mux.HandleFunc("GET /standin/v1/principals", func(w http.ResponseWriter, _ *http.Request) {
		who := []string{}
		if s.reviews != nil {
			who = s.reviews.principals()
		}
		reply(w, who, nil)
	})
	mux.HandleFunc("GET /standin/v1/process", func(w http.ResponseWriter, _ *http.Request) {
		form := "llama stack run"
		if s.cmd.Uvicorn {
			form = "uvicorn"
		}
		reply(w, map[string]any{"form": form, "workers": s.cmd.Workers, "port": s.cmd.Port, "hosts": s.cmd.Hosts, "config": s.cmd.Config}, nil)
	})
	mux.HandleFunc("GET /standin/v1/file", func(w http.ResponseWriter, r *http.Request) {
		data, err := os.ReadFile(r.URL.Query().Get("path"))
		if err != nil {
			http.Error(w, fmt.Sprintf(`{"detail":%q}`, err.Error()), http.StatusNotFound)
			return
		}
		_, _ = w.Write(data)
	})
	open := map[string]bool{}
	for _, e := range s.line.Facts().ServerAPI.Endpoints {
		if !e.RequiresAuthentication {
			open[e.Method+" "+e.Path] = true
		}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.config.Auth != nil && !open[r.Method+" "+r.URL.Path] && !strings.HasPrefix(r.URL.Path, "/standin/") {
			token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok {
				http.Error(w, `{"error":{"message":"Authentication required"}}`, http.StatusUnauthorized)
				return
			}
			if s.reviews != nil {
				if err := s.reviews.check(r.Context(), token); err != nil {
					http.Error(w, fmt.Sprintf(`{"error":{"message":%q}}`, err.Error()), http.StatusUnauthorized)
					return
				}
			}
		}
		mux.ServeHTTP(w, r)
	})
}

// providers is list_providers (core/providers.py): every enabled
// provider, with its health; a provider without a health check reports
// upstream's NOT_IMPLEMENTED and message. The stand-in keeps no provider
// config to show (upstream shows it after redact_sensitive_fields).
func (s *server) providers() stackconfig.ListProvidersResponse {
	h := s.line.Facts().ServerAPI.Health
	s.healthMu.Lock()
	defer s.healthMu.Unlock()
	out := stackconfig.ListProvidersResponse{Data: []stackconfig.ProviderInfo{}}
	for _, p := range s.res.Enabled {
		health, ok := s.health[p.ID]
		if !ok {
			health = stackconfig.HealthResponse{Status: h.NotImplemented, Message: h.NotImplementedMessage}
		}
		out.Data = append(out.Data, stackconfig.ProviderInfo{API: p.API, ProviderID: p.ID, ProviderType: p.Type,
			Config: map[string]any{}, Health: health})
	}
	return out
}

// decode reads a JSON request body into v, answering 400 when it is not.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := json.NewDecoder(r.Body).Decode(v); err != nil {
		http.Error(w, fmt.Sprintf(`{"detail":%q}`, err.Error()), http.StatusBadRequest)
		return false
	}
	return true
}

// reply answers v as JSON, or err as upstream's 400 {"detail": ...}.
func reply(w http.ResponseWriter, v any, err error) {
	w.Header().Set("Content-Type", "application/json")
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		v = map[string]string{"detail": err.Error()}
	}
	_ = json.NewEncoder(w).Encode(v)
}

// serve listens on the command's port and address, with TLS when the config (or uvicorn's options)
// names a certificate, and a client CA when it names one.
func (s *server) serve() error {
	port := s.cmd.Port
	host := "" // llama stack run's default: "::" and "0.0.0.0"
	if s.cmd.Hosts != nil {
		host = s.cmd.Hosts[0]
	} else if s.config.Host != nil {
		host = *s.config.Host
	}
	server := &http.Server{Addr: net.JoinHostPort(host, strconv.FormatInt(port, 10)), Handler: s.handler, ReadHeaderTimeout: 10 * time.Second}
	for _, st := range s.state.status() {
		fmt.Printf("llama (stand-in %s): %s store %s %s, %d entries read back\n", s.line, st.Store, st.Type, st.Path, st.LoadedAtStart)
	}
	fmt.Printf("llama (stand-in %s): config valid, serving on %s with %d worker(s)\n", s.line, server.Addr, s.cmd.Workers)
	if s.config.TLSCertFile == nil {
		return server.ListenAndServe()
	}
	server.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	if s.config.TLSCAFile != nil {
		pem, err := os.ReadFile(*s.config.TLSCAFile)
		if err != nil {
			return err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("server.tls_cafile %s holds no PEM certificate", *s.config.TLSCAFile)
		}
		server.TLSConfig.ClientCAs, server.TLSConfig.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return server.ListenAndServeTLS(*s.config.TLSCertFile, *s.config.TLSKeyFile)
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
