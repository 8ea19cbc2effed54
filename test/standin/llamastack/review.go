package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// tokenReviewer checks a bearer token as upstream's kubernetes auth
// provider does (core/server/auth_providers.py KubernetesAuthProvider at
// v0.2.23 and v0.3.0): a SelfSubjectReview POSTed to api_server_url with
// the token; 201 with a username admits the caller, 401 is "Invalid token".
type tokenReviewer struct {
	url    string
	client *http.Client
	// admitted lists the usernames it admitted, in order, once each (the
	// stand-in's GET /standin/v1/principals: who called the server).
	mu       sync.Mutex
	admitted []string
}

// principals is the usernames admitted so far.
func (r *tokenReviewer) principals() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.admitted)
}

func newTokenReviewer(cfg map[string]any) (*tokenReviewer, error) {
	if cfg["type"] != "kubernetes" {
		return nil, fmt.Errorf("the stand-in checks only kubernetes tokens, not %v", cfg["type"])
	}
	url, _ := cfg["api_server_url"].(string)
	if url == "" {
		url = "https://kubernetes.default.svc"
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if v, ok := cfg["verify_tls"].(bool); ok && !v {
		tc.InsecureSkipVerify = true //nolint:gosec // the config's verify_tls: false, as upstream honours it
	}
	if f, ok := cfg["tls_cafile"].(string); ok && f != "" {
		pem, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("server.auth.provider_config.tls_cafile: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("server.auth.provider_config.tls_cafile %s holds no PEM certificate", f)
		}
	}
	return &tokenReviewer{url: strings.TrimSuffix(url, "/") + "/apis/authentication.k8s.io/v1/selfsubjectreviews",
		client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}}, nil
}

func (r *tokenReviewer) check(ctx context.Context, token string) error {
	body := []byte(`{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.client.Do(req)
	if err != nil {
		return fmt.Errorf("Token validation error: %w", err) //nolint:staticcheck // upstream's message
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusUnauthorized:
		return errors.New("Invalid token") //nolint:staticcheck // upstream's message
	case http.StatusCreated:
	default:
		return fmt.Errorf("Token validation failed: %d", resp.StatusCode) //nolint:staticcheck // upstream's message
	}
	var review struct {
		Status struct {
			UserInfo struct {
				Username string `json:"username"`
			} `json:"userInfo"`
		} `json:"status"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&review); err != nil || review.Status.UserInfo.Username == "" {
		return errors.New("No username found in SelfSubjectReview response") //nolint:staticcheck // upstream's message
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !slices.Contains(r.admitted, review.Status.UserInfo.Username) {
		r.admitted = append(r.admitted, review.Status.UserInfo.Username)
	}
	return nil
}
