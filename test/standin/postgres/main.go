// Command postgres is a test-only stand-in for the PostgreSQL image the
// cache runs (docker.io/library/postgres:16), used where that image cannot
// be pulled. It is not PostgreSQL: it does what the official image's
// entrypoint (docker-entrypoint.sh) and server do to the pod's folders at
// start, fails where they would, and answers the cache's probes; nothing
// more. One executable, two names:
//
// As the image's entrypoint (any name but pg_isready), like
// docker-entrypoint.sh and postgres, it:
//   - creates PGDATA (default /var/lib/postgresql/data) and sets its mode
//     to 0700, creates /var/run/postgresql and sets its mode to 3775 (a
//     chmod that fails is ignored, as the entrypoint's `|| :` does);
//   - when PGDATA holds no PG_VERSION, initialises it: it refuses without
//     POSTGRES_PASSWORD ("Database is uninitialized and superuser password
//     is not specified"), and, as initdb, when PGDATA is not empty; it
//     writes PG_VERSION and logs "initialized"; otherwise it logs, as the
//     entrypoint does, "Skipping initialization";
//   - checks PGDATA as the server does at start: owned by the user it runs
//     as ("data directory has wrong ownership") and neither group-writable
//     nor open to others ("data directory has invalid permissions");
//   - writes postmaster.pid into PGDATA and listens on the socket
//     /var/run/postgresql/.s.PGSQL.<port> and on TCP port PGPORT (5432) of
//     every address, closing each connection at once.
//
// As pg_isready (the probes' command) it connects to that socket and exits
// 0, or 2 when nothing answers (pg_isready's "no response").
package main

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// socketDir is where the official image's server puts its socket (a
// variable for the tests).
var socketDir = "/var/run/postgresql"

func main() {
	if filepath.Base(os.Args[0]) == "pg_isready" {
		if err := ready(); err != nil {
			fmt.Fprintln(os.Stderr, "pg_isready (stand-in):", err)
			fmt.Printf("%s:%s - no response\n", socketDir, port())
			os.Exit(2)
		}
		fmt.Printf("%s:%s - accepting connections\n", socketDir, port())
		return
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "postgres (stand-in):", err)
		os.Exit(1)
	}
}

func port() string {
	if p := os.Getenv("PGPORT"); p != "" {
		return p
	}
	return "5432"
}

func socket() string { return filepath.Join(socketDir, ".s.PGSQL."+port()) }

func ready() error {
	conn, err := net.DialTimeout("unix", socket(), 3*time.Second)
	if err != nil {
		return err
	}
	return conn.Close()
}

func run() error {
	data := os.Getenv("PGDATA")
	if data == "" {
		data = "/var/lib/postgresql/data"
	}
	if err := prepare(data); err != nil {
		return err
	}
	if err := checkDataDir(data); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(data, "postmaster.pid"), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600); err != nil {
		return fmt.Errorf("FATAL: could not create lock file: %w", err)
	}
	_ = os.Remove(socket())
	unix, err := net.Listen("unix", socket())
	if err != nil {
		return fmt.Errorf("FATAL: could not create Unix socket: %w", err)
	}
	tcp, err := net.Listen("tcp", ":"+port())
	if err != nil {
		return fmt.Errorf("FATAL: could not create listen socket: %w", err)
	}
	fmt.Println("LOG:  database system is ready to accept connections (stand-in)")
	errs := make(chan error, 2)
	for _, l := range []net.Listener{unix, tcp} {
		go func() {
			for {
				conn, err := l.Accept()
				if err != nil {
					errs <- err
					return
				}
				_ = conn.Close()
			}
		}()
	}
	return <-errs
}

// prepare is docker-entrypoint.sh's docker_create_db_directories and,
// for a data folder without PG_VERSION, its initialisation.
func prepare(data string) error {
	if err := os.MkdirAll(data, 0o700); err != nil {
		return fmt.Errorf("mkdir: cannot create directory %s: %w", data, err)
	}
	_ = os.Chmod(data, 0o700)
	if err := os.MkdirAll(socketDir, 0o755); err != nil {
		return fmt.Errorf("mkdir: cannot create directory %s: %w", socketDir, err)
	}
	_ = os.Chmod(socketDir, 0o3775)
	if _, err := os.Stat(filepath.Join(data, "PG_VERSION")); err == nil {
		fmt.Println("PostgreSQL Database directory appears to contain a database; Skipping initialization")
		return nil
	}
	if os.Getenv("POSTGRES_PASSWORD") == "" {
		return errors.New("database is uninitialized and superuser password is not specified (the official image says so and exits): " +
			"You must specify POSTGRES_PASSWORD to a non-empty value for the superuser")
	}
	entries, err := os.ReadDir(data)
	if err != nil {
		return err
	}
	if len(entries) > 0 {
		return fmt.Errorf("initdb: error: directory %q exists but is not empty", data)
	}
	if err := os.WriteFile(filepath.Join(data, "PG_VERSION"), []byte("16\n"), 0o600); err != nil {
		return fmt.Errorf("initdb: error: could not write to %s: %w", data, err)
	}
	fmt.Printf("PostgreSQL init process complete (stand-in): database %q, user %q initialized in %s\n",
		orDefault("POSTGRES_DB", orDefault("POSTGRES_USER", "postgres")), orDefault("POSTGRES_USER", "postgres"), data)
	return nil
}

// checkDataDir is the server's checkDataDir: the folder belongs to the
// user the server runs as, and gives no write access to its group and
// none to others.
func checkDataDir(data string) error {
	info, err := os.Stat(data)
	if err != nil {
		return fmt.Errorf("FATAL: data directory %q does not exist: %w", data, err)
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("FATAL: could not read the owner of %q", data)
	}
	if int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("FATAL: data directory %q has wrong ownership (owner %d, server user %d)", data, st.Uid, os.Geteuid())
	}
	if info.Mode().Perm()&0o027 != 0 {
		return fmt.Errorf("FATAL: data directory %q has invalid permissions %v: should be u=rwx (0700) or u=rwx,g=rx (0750)",
			data, info.Mode().Perm()&fs.ModePerm)
	}
	return nil
}

func orDefault(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
