package stackconfig

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Launch is how upstream starts the server at a line's tag
// (Facts.Launch): `llama stack run <config>` runs one process and has no
// option for more, so worker processes need a command line that calls
// uvicorn itself with the app factory, and repeats what `llama stack run`
// hands uvicorn from the config.
type Launch struct {
	// Run is `llama stack run`.
	Run struct {
		// Options are the options it takes besides the config.
		Options []string `json:"options"`
		// Workers reports whether it has a workers option (no line has).
		Workers bool   `json:"workers"`
		Source  string `json:"source"`
	} `json:"run"`
	// App is the ASGI app factory a uvicorn command line names, and the
	// environment variable it reads the run config's path from.
	App struct {
		Factory   string `json:"factory"`
		ConfigEnv string `json:"config_env"`
		Source    string `json:"source"`
	} `json:"app"`
	// Uvicorn is what `llama stack run` passes uvicorn.
	Uvicorn struct {
		// PortEnv and DefaultPort give the --port option's default;
		// ReadsServerPort is false: the option always has a value, so
		// server.port of the config never reaches uvicorn.
		PortEnv         string `json:"port_env"`
		DefaultPort     int64  `json:"default_port"`
		ReadsServerPort bool   `json:"reads_server_port"`
		// DefaultHosts are the listen addresses when server.host is unset
		// (0.2, 0.3: "::" and "0.0.0.0"; from 0.7 "", every address, or
		// "::" with server.workers above 1).
		DefaultHosts []string `json:"default_hosts"`
		// Lifespan is uvicorn's lifespan mode ("on": a failing start-up
		// stops the server).
		Lifespan string `json:"lifespan"`
		// TLSClientCert is the ssl_cert_reqs with server.tls_cafile.
		TLSClientCert string `json:"tls_client_cert"`
		Source        string `json:"source"`
	} `json:"uvicorn"`
}

// UvicornCertRequired is uvicorn's --ssl-cert-reqs value of Python's
// ssl.CERT_REQUIRED.
const UvicornCertRequired = "2"

// Command is a server command line as the image runs it.
type Command struct {
	// Uvicorn is true for `uvicorn <factory> --factory ...`, false for
	// `llama stack run <config> ...`.
	Uvicorn bool
	// Config is the run config's path: the argument of `llama stack run`,
	// or the app's config variable (from env) for uvicorn.
	Config string
	// Port is where the server listens.
	Port int64
	// Hosts are the listen addresses (nil: the config's server.host or the
	// line's defaults, for `llama stack run`).
	Hosts []string
	// Workers is the number of processes (1 for `llama stack run`).
	Workers int
	// TLS files given on a uvicorn command line.
	CertFile, KeyFile, CAFile string
	// CertReqs is --ssl-cert-reqs.
	CertReqs string
	// Lifespan is --lifespan ("auto" when not given, uvicorn's default).
	Lifespan string
}

// uvicornValueOptions are the uvicorn options a server command may carry
// that take a value; uvicornFlags those that take none. Uvicorn has more;
// these are the ones this line's launch needs plus the common tuning ones.
var (
	uvicornValueOptions = []string{"--host", "--port", "--workers", "--ssl-keyfile", "--ssl-certfile", "--ssl-ca-certs",
		"--ssl-cert-reqs", "--lifespan", "--log-level", "--timeout-keep-alive", "--timeout-graceful-shutdown",
		"--limit-concurrency", "--backlog", "--root-path"}
	uvicornFlags = []string{"--factory", "--proxy-headers", "--no-proxy-headers", "--no-access-log", "--access-log"}
)

// ParseCommand reads a server command line (argv, the image's working
// directory resolving nothing) the way the line's image would: `llama
// stack run <config> [options]` with the options run.py takes, or
// `uvicorn <Launch.App.Factory> --factory [options]` with the config path
// in the app's config variable (env reads the container's environment).
// Any other form is refused, as the image's entrypoint would fail it.
func (l Line) ParseCommand(argv []string, env func(string) (string, bool)) (Command, error) {
	f := l.Facts().Launch
	portDefault := f.Uvicorn.DefaultPort
	if v, ok := env(f.Uvicorn.PortEnv); ok {
		p, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			return Command{}, fmt.Errorf("%s=%q is not a port (%s)", f.Uvicorn.PortEnv, v, f.Run.Source)
		}
		portDefault = p
	}
	run := l.Command() // llama stack run; ogx stack run from 0.8.0
	runName := strings.Join(run, " ")
	switch {
	case len(run) > 0 && len(argv) >= len(run) && slices.Equal(argv[:len(run)], run):
		c := Command{Port: portDefault, Workers: 1, Lifespan: f.Uvicorn.Lifespan}
		rest := argv[len(run):]
		for i := 0; i < len(rest); i++ {
			a := rest[i]
			name, value, inline := strings.Cut(a, "=")
			switch {
			case !strings.HasPrefix(a, "-"):
				if c.Config != "" {
					return Command{}, fmt.Errorf("%s takes one config, got %q and %q", runName, c.Config, a)
				}
				c.Config = a
			case !slices.Contains(f.Run.Options, name):
				return Command{}, fmt.Errorf("%s at %s has no option %s (it takes %s; %s)", runName, l.Tag(), name, strings.Join(f.Run.Options, ", "), f.Run.Source)
			case name == "--enable-ui":
				if inline {
					return Command{}, fmt.Errorf("%s: --enable-ui takes no value", runName)
				}
			default:
				if !inline {
					if i+1 >= len(rest) {
						return Command{}, fmt.Errorf("%s: %s needs a value", runName, name)
					}
					i++
					value = rest[i]
				}
				if name == "--image-name" || name == "--image-type" {
					return Command{}, fmt.Errorf("%s: %s runs the server in another environment, not in this image", runName, name)
				}
				if name == "--port" {
					p, err := strconv.ParseInt(value, 10, 32)
					if err != nil {
						return Command{}, fmt.Errorf("%s: --port %q is not a port", runName, value)
					}
					c.Port = p
				}
			}
		}
		if c.Config == "" {
			return Command{}, fmt.Errorf("%s needs a config file (the image runs no default one here)", runName)
		}
		return c, nil
	case len(argv) >= 2 && argv[0] == "uvicorn":
		c := Command{Uvicorn: true, Port: 8000, Workers: 1, Lifespan: "auto"}
		if argv[1] != f.App.Factory {
			return Command{}, fmt.Errorf("uvicorn must run %s (%s), got %q", f.App.Factory, f.App.Source, argv[1])
		}
		factory := false
		rest := argv[2:]
		for i := 0; i < len(rest); i++ {
			name, value, inline := strings.Cut(rest[i], "=")
			switch {
			case slices.Contains(uvicornFlags, name) && !inline:
				factory = factory || name == "--factory"
				continue
			case !slices.Contains(uvicornValueOptions, name):
				return Command{}, fmt.Errorf("uvicorn: unsupported argument %q", rest[i])
			}
			if !inline {
				if i+1 >= len(rest) {
					return Command{}, fmt.Errorf("uvicorn: %s needs a value", name)
				}
				i++
				value = rest[i]
			}
			var err error
			switch name {
			case "--host":
				c.Hosts = []string{value}
			case "--port":
				c.Port, err = strconv.ParseInt(value, 10, 32)
			case "--workers":
				c.Workers, err = strconv.Atoi(value)
				if err == nil && c.Workers < 1 {
					err = errors.New("must be at least 1")
				}
			case "--ssl-keyfile":
				c.KeyFile = value
			case "--ssl-certfile":
				c.CertFile = value
			case "--ssl-ca-certs":
				c.CAFile = value
			case "--ssl-cert-reqs":
				c.CertReqs = value
			case "--lifespan":
				c.Lifespan = value
			}
			if err != nil {
				return Command{}, fmt.Errorf("uvicorn: %s %q: %w", name, value, err)
			}
		}
		if !factory {
			return Command{}, fmt.Errorf("uvicorn: %s is an app factory: pass --factory", f.App.Factory)
		}
		if c.Hosts == nil {
			c.Hosts = []string{"127.0.0.1"} // uvicorn's default: not reachable from outside the pod
		}
		if (c.CertFile == "") != (c.KeyFile == "") {
			return Command{}, fmt.Errorf("uvicorn: --ssl-certfile and --ssl-keyfile go together")
		}
		path, ok := env(f.App.ConfigEnv)
		if !ok {
			return Command{}, fmt.Errorf("%s needs %s, the run config's path (%s)", f.App.Factory, f.App.ConfigEnv, f.App.Source)
		}
		c.Config = path
		return c, nil
	}
	return Command{}, fmt.Errorf("the server image runs `%s <config>` or `uvicorn %s --factory`, got %q", runName, f.App.Factory, argv)
}

// UvicornArgs is the uvicorn command line that runs the server as
// workers processes the way `llama stack run` runs one, for a config
// whose expanded server section is server (nil: none) and a server
// listening on port: the app factory (which reads the config's path from
// Launch.App.ConfigEnv, to be set by the caller), the port, the
// listen address, the TLS files, lifespan on.
//
// One address: uvicorn's --host takes one, where `llama stack run` binds
// the line's defaults (both "::" and "0.0.0.0") when server.host is unset;
// "0.0.0.0" is what the upstream operator's workers command binds (IPv4;
// set server.host for an IPv6 pod network).
func (l Line) UvicornArgs(server *ServerConfig, port int64, workers int) []string {
	f := l.Facts().Launch
	host := "0.0.0.0"
	if server != nil && server.Host != nil && *server.Host != "" {
		host = *server.Host
	}
	args := []string{"uvicorn", f.App.Factory, "--factory",
		"--host", host, "--port", strconv.FormatInt(port, 10), "--workers", strconv.Itoa(workers),
		"--lifespan", f.Uvicorn.Lifespan}
	if server != nil && server.TLSCertFile != nil && server.TLSKeyFile != nil {
		args = append(args, "--ssl-certfile", *server.TLSCertFile, "--ssl-keyfile", *server.TLSKeyFile)
		if server.TLSCAFile != nil {
			args = append(args, "--ssl-ca-certs", *server.TLSCAFile, "--ssl-cert-reqs", UvicornCertRequired)
		}
	}
	return args
}
