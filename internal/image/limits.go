package image

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// What bundlegen reads of a registry's answers, at most. A registry (or
// anything answering at its address) that sends more is refused as soon as
// it says so (Content-Length) or as soon as the limit is passed, never read
// whole: go-containerregistry alone would read a manifest or a referrers
// list of up to 100 MiB into memory, and a config blob or an error body of
// any size.
const (
	// maxManifest bounds a manifest, an index and a referrers list: 4 MiB,
	// the largest manifest the CNCF distribution registry accepts (and the
	// size the OCI distribution spec asks registries to accept at least).
	maxManifest = 4 << 20
	// maxDocument bounds a blob: a signature payload, an SBOM, a provenance
	// statement, an attestation envelope, the config of a signature image.
	maxDocument = 64 << 20
	// maxOtherAnswer bounds every other answer: an error, a token, the API
	// check, the answers to uploads.
	maxOtherAnswer = 1 << 20
	// maxReferrers bounds the referrers Verify reads of one image, and
	// maxCosignLayers the layers of a signature or attestation image
	// (sha256-<hex>.sig, .att): each is one more read of up to maxManifest
	// or maxDocument.
	maxReferrers    = 256
	maxCosignLayers = 256
)

// errTooLarge is the error of an answer larger than bundlegen reads.
var errTooLarge = errors.New("answer too large")

// limitTransport bounds the body of every answer by what was asked
// (answerLimit), following redirects to where they started.
type limitTransport struct {
	base http.RoundTripper
}

func (t limitTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil || req.Method == http.MethodHead {
		return resp, err
	}
	what, limit := answerLimit(req, resp.StatusCode)
	tooLarge := func(size string) error {
		return fmt.Errorf("%w: %s answered GET %s with %s, more than the %d bytes bundlegen reads of a %s: "+
			"it is not a registry bundlegen can read (check the address), or the image or its signatures were not made by bundlegen or cosign",
			errTooLarge, req.URL.Host, req.URL.Path, size, limit, what)
	}
	if resp.ContentLength > limit {
		_ = resp.Body.Close()
		return nil, tooLarge(fmt.Sprintf("%d bytes (Content-Length)", resp.ContentLength))
	}
	resp.Body = &limitedBody{rc: resp.Body, left: limit, err: tooLarge("more")}
	return resp, nil
}

// answerLimit says what the request asks for and how much of the answer is
// read. A redirected request (a blob served from storage elsewhere) is
// judged by the request that started it.
func answerLimit(req *http.Request, status int) (string, int64) {
	first := req
	for first.Response != nil && first.Response.Request != nil {
		first = first.Response.Request
	}
	p := first.URL.Path
	switch {
	case status < 200 || status > 299:
		return "registry's error", maxOtherAnswer
	case strings.Contains(p, "/manifests/"):
		return "manifest", maxManifest
	case strings.Contains(p, "/referrers/"):
		return "referrers list", maxManifest
	case strings.Contains(p, "/blobs/") && !strings.Contains(p, "/blobs/uploads/") && first.Method == http.MethodGet:
		return "blob (a signature, an SBOM, a provenance statement)", maxDocument
	default:
		return "registry's answer", maxOtherAnswer
	}
}

// limitedBody fails with err once more than left bytes are read.
type limitedBody struct {
	rc   io.ReadCloser
	left int64
	err  error
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, b.err
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return 0, b.err
	}
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }
