package image_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	"github.com/stretchr/testify/require"

	"github.com/inferencestack/inferencestack/internal/image"
)

// hostileSize is what the hostile registry sends: more than any limit of
// bundlegen and of go-containerregistry (100 MiB for a manifest).
const hostileSize = 256 << 20

// hostile is a real in-process registry that, once armed, answers the
// requests its rule matches with hostileSize bytes, and records the most it
// managed to send in one answer: a client that reads only what it bounds
// makes it stop far earlier.
type hostile struct {
	host  string
	armed atomic.Bool
	mu    sync.Mutex
	// most is the most bytes one hostile answer managed to send.
	most int64
}

func newHostile(t *testing.T, match func(*http.Request) bool, contentLength bool, status int) *hostile {
	t.Helper()
	h := &hostile{}
	reg := ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0)), ggcrregistry.WithReferrersSupport(true))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !h.armed.Load() || !match(r) {
			reg.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/vnd.oci.image.index.v1+json")
		if contentLength {
			w.Header().Set("Content-Length", fmt.Sprint(hostileSize))
		}
		w.WriteHeader(status)
		if r.Method == http.MethodHead {
			return // net/http discards a body written to HEAD
		}
		chunk := bytes.Repeat([]byte(" "), 64<<10)
		copy(chunk, `{"schemaVersion":2,"manifests":[`)
		var sent int64
		defer func() {
			h.mu.Lock()
			h.most = max(h.most, sent)
			h.mu.Unlock()
		}()
		for sent < hostileSize {
			n, err := w.Write(chunk)
			sent += int64(n)
			if err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	h.host = strings.TrimPrefix(srv.URL, "http://")
	return h
}

// TestHostileRegistry: a registry answering a huge manifest, referrers
// list, blob or API check is not read whole: the verb fails (but for the API
// check, whose body go-containerregistry discards), naming the address, what
// was asked, the limit, and what to check, after reading at
// most its limit (the server manages to send that plus what the sockets
// buffer, a few MiB; go-containerregistry alone reads 100 MiB of a manifest
// or a referrers list, and all of an answer to its API check).
func TestHostileRegistry(t *testing.T) {
	ctx := context.Background()
	priv, pub := keyPair(t)
	path := func(re string) func(*http.Request) bool {
		return func(r *http.Request) bool { return regexp.MustCompile(re).MatchString(r.URL.Path) }
	}
	tests := []struct {
		name          string
		match         func(*http.Request) bool
		contentLength bool
		status        int
		run           func(t *testing.T, ref string) error
		want          string
	}{{
		name: "pin --resolve: a manifest without end", match: path(`/manifests/v1\.0\.0$`), status: http.StatusOK,
		run: func(_ *testing.T, ref string) error {
			_, err := image.Resolve(ctx, ref, image.ResolveOptions{})
			return err
		},
		want: "with more, more than the 4194304 bytes bundlegen reads of a manifest",
	}, {
		name: "verify: a referrers list without end", match: path(`/referrers/`), status: http.StatusOK,
		run: func(t *testing.T, ref string) error {
			_, err := verify(t, ref, pub, testSource.Commit)
			return err
		},
		want: "with more, more than the 4194304 bytes bundlegen reads of a referrers list",
	}, {
		name: "verify: blobs that say they are huge", match: path(`/blobs/sha256:`), contentLength: true, status: http.StatusOK,
		run: func(t *testing.T, ref string) error {
			_, err := verify(t, ref, pub, testSource.Commit)
			return err
		},
		want: fmt.Sprintf("with %d bytes (Content-Length), more than the 67108864 bytes bundlegen reads of a blob", hostileSize),
	}, {
		name: "sign: an API check without end", match: path(`^/v2/$`), status: http.StatusUnauthorized,
		run: func(t *testing.T, ref string) error {
			s, err := image.LoadKeySigner(priv, "key.pem")
			require.NoError(t, err)
			_, err = image.Sign{Kind: image.KindBundle, Input: bundleDir(t), Image: ref, Source: testSource,
				Command: []string{"bundlegen", "image", "bundle", "DIR"}, Signer: s}.Run(ctx)
			return err
		},
		// go-containerregistry's API check discards the answer's body and
		// ignores the error: the verb goes on, having read 1 MiB of it.
		want: "",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHostile(t, tc.match, tc.contentLength, tc.status)
			_, ref := signed(t, h.host, bundleDir(t), priv)
			h.armed.Store(true)
			err := tc.run(t, ref)
			if tc.want == "" {
				require.NoError(t, err)
			} else {
				require.ErrorContains(t, err, h.host+" answered GET ")
				require.ErrorContains(t, err, tc.want)
				require.ErrorContains(t, err, "check the address")
			}
			h.mu.Lock()
			defer h.mu.Unlock()
			require.Less(t, h.most, int64(32<<20), "the client read %d bytes of one hostile answer", h.most)
		})
	}
}
