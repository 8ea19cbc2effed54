// Command httpserver is a small HTTP server for the node tests, run as a pod
// by the kubelet: it answers /healthz (for probes) and / with its host name.
// With -get URL it is a client instead: it fetches URL and exits 0 on a 200
// answer, so a pod can prove it reaches a Service.
package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

func main() {
	listen := flag.String("listen", ":8080", "address to serve on")
	get := flag.String("get", "", "fetch this URL and exit (0 on 200 OK) instead of serving")
	flag.Parse()
	if *get != "" {
		os.Exit(fetch(*get))
	}
	host, _ := os.Hostname()
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, host) })
	srv := &http.Server{Addr: *listen, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintln(os.Stderr, "httpserver: serving on", *listen)
	if err := srv.ListenAndServe(); err != nil {
		fmt.Fprintln(os.Stderr, "httpserver:", err)
		os.Exit(1)
	}
}

func fetch(url string) int {
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		fmt.Fprintln(os.Stderr, "httpserver:", err)
		return 1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Printf("%s: %s %s", url, resp.Status, body)
	if resp.StatusCode != http.StatusOK {
		return 1
	}
	return 0
}
