// Package manifests reads Kubernetes manifest files as the release tools
// need them: every YAML document of a folder or file with its kind
// (Document), decoded strictly, and the RBAC objects of a folder (LoadRBAC),
// checked as the API server checks their rules. It also writes objects back
// as YAML with sorted keys (Marshal). ClusterServiceVersion specifics live in
// package csv.
package manifests

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/inferencestack/inferencestack/internal/atomicfs"
)

// Document is one YAML document of a manifest file.
type Document struct {
	// File is the file it came from.
	File string
	// Kind is its kind.
	Kind string
	// Data is its JSON encoding.
	Data []byte
}

// ReadDocuments reads every YAML document of the *.yaml and *.yml files of
// dir (not kustomization.yaml), in file name order. A missing dir is an error.
func ReadDocuments(dir string) ([]Document, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var docs []Document
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || n == "kustomization.yaml" || (!strings.HasSuffix(n, ".yaml") && !strings.HasSuffix(n, ".yml")) {
			continue
		}
		d, err := ReadFileDocuments(filepath.Join(dir, n))
		if err != nil {
			return nil, err
		}
		docs = append(docs, d...)
	}
	return docs, nil
}

// ReadFileDocuments reads every YAML document of one file.
func ReadFileDocuments(path string) ([]Document, error) {
	data, err := atomicfs.ReadFile(path)
	if err != nil {
		return nil, err
	}
	reader := utilyaml.NewYAMLReader(bufioReader(data))
	var docs []Document
	for {
		raw, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(bytes.TrimSpace(stripComments(raw))) == 0 {
			continue
		}
		js, err := yaml.YAMLToJSON(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		var meta struct {
			Kind string `json:"kind"`
		}
		if err := yaml.Unmarshal(js, &meta); err != nil || meta.Kind == "" {
			return nil, fmt.Errorf("%s: a document has no kind", path)
		}
		docs = append(docs, Document{File: path, Kind: meta.Kind, Data: js})
	}
	return docs, nil
}

func stripComments(b []byte) []byte {
	var out [][]byte
	for _, l := range bytes.Split(b, []byte("\n")) {
		if t := bytes.TrimSpace(l); len(t) > 0 && t[0] != '#' && !bytes.Equal(t, []byte("---")) {
			out = append(out, l)
		}
	}
	return bytes.Join(out, []byte("\n"))
}

// Decode decodes the document into obj, refusing unknown fields.
func (d Document) Decode(obj any) error {
	if err := yaml.UnmarshalStrict(d.Data, obj); err != nil {
		return fmt.Errorf("%s: %s: %w", d.File, d.Kind, err)
	}
	return nil
}

func bufioReader(data []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(data)) }
