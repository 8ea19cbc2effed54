package image

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/in-toto/in-toto-golang/in_toto/slsa_provenance/common"
	slsa "github.com/in-toto/in-toto-golang/in_toto/slsa_provenance/v1"
)

const (
	// StatementType is the in-toto Statement v1 type.
	StatementType = "https://in-toto.io/Statement/v1"
	// BuilderID names bundlegen as the builder in provenance statements.
	BuilderID = "https://github.com/inferencestack/inferencestack/tree/main/tools/bundlegen"
	// BuildType says how to read the build definition of bundlegen's
	// provenance: docs/release.md describes its parameters.
	BuildType = "https://github.com/inferencestack/inferencestack/blob/main/docs/release.md#signed-images-sbom-and-provenance"
)

// Statement is an in-toto Statement v1 with an SLSA provenance v1
// predicate. (in-toto-golang's own Statement type is deprecated in favour of
// the protobuf one of in-toto/attestation, whose JSON encoding is not stable;
// this plain struct keeps the bytes canonical and the build light.)
type Statement struct {
	Type          string                   `json:"_type"`
	Subject       []StatementSubject       `json:"subject"`
	PredicateType string                   `json:"predicateType"`
	Predicate     slsa.ProvenancePredicate `json:"predicate"`
}

// StatementSubject is an artifact a statement is about.
type StatementSubject struct {
	Name   string           `json:"name"`
	Digest common.DigestSet `json:"digest"`
}

// ExternalParameters are the build's inputs a user controls: what was built
// from which source, by which command.
type ExternalParameters struct {
	// Kind is the image's kind: operator, bundle or catalog.
	Kind Kind `json:"kind"`
	// Source is the repository and commit the input comes from.
	Source SourceParameter `json:"source"`
	// Command is the bundlegen command that builds the image from the input.
	Command []string `json:"command"`
}

// SourceParameter names the commit of a repository.
type SourceParameter struct {
	Repository string `json:"repository"`
	Commit     string `json:"commit"`
}

// Provenance returns the in-toto statement (SLSA provenance v1) of the image
// subject, built by kind from input with command: the source repository and
// commit, the command, and every input file by digest (named as in the
// image, so the statement does not depend on where the input lies). Like
// SBOM, the same input gives the same bytes; the statement holds no time
// (optional in SLSA v1): a build of the same commit is the same build.
func Provenance(kind Kind, input string, subject Subject, src Source, command []string) ([]byte, error) {
	if err := src.Check(); err != nil {
		return nil, err
	}
	var (
		files []component
		err   error
	)
	switch kind {
	case KindOperator:
		var sum string
		sum, err = fileSHA256(input)
		files = []component{{name: strings.TrimPrefix(OperatorPath, "/"), sha256: sum}}
		if err == nil {
			var base component
			base, err = baseComponent()
			files = append(files, base)
		}
	case KindBundle:
		for _, sub := range []string{"manifests", "metadata"} {
			cs, e := fileComponents(filepath.Join(input, sub), sub)
			files, err = append(files, cs...), e
			if err != nil {
				break
			}
		}
	case KindCatalog:
		files, err = fileComponents(input, strings.TrimPrefix(ConfigsDir, "/"))
	default:
		return nil, fmt.Errorf("unknown image kind %q: use %q, %q or %q", kind, KindBundle, KindCatalog, KindOperator)
	}
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", kind, input, err)
	}
	slices.SortFunc(files, func(a, b component) int { return strings.Compare(a.name, b.name) })
	deps := []slsa.ResourceDescriptor{{
		URI:    "git+" + src.Repository + "@" + src.Commit,
		Digest: common.DigestSet{"gitCommit": src.Commit},
	}}
	for _, f := range files {
		deps = append(deps, slsa.ResourceDescriptor{Name: f.name, Digest: common.DigestSet{"sha256": f.sha256}})
	}
	st := Statement{
		Type:          StatementType,
		Subject:       []StatementSubject{{Name: subject.Name, Digest: common.DigestSet{subject.Digest.Algorithm: subject.Digest.Hex}}},
		PredicateType: slsa.PredicateSLSAProvenance,
		Predicate: slsa.ProvenancePredicate{
			BuildDefinition: slsa.ProvenanceBuildDefinition{
				BuildType: BuildType,
				ExternalParameters: ExternalParameters{
					Kind:    kind,
					Source:  SourceParameter{Repository: src.Repository, Commit: src.Commit},
					Command: command,
				},
				ResolvedDependencies: deps,
			},
			RunDetails: slsa.ProvenanceRunDetails{Builder: slsa.Builder{ID: BuilderID}},
		},
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(st); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// baseComponent is the base layer of binary images, an input of the operator
// image.
func baseComponent() (component, error) {
	d, err := baseLayerDigest()
	if err != nil {
		return component{}, err
	}
	return component{name: "base layer (assembled by bundlegen)", sha256: d.Hex}, nil
}

// ProvenanceCommit reads an in-toto statement written by Provenance and
// returns the commit it names and the digest of its subject.
func ProvenanceCommit(b []byte) (commit, subjectDigest string, err error) {
	var st struct {
		Type          string             `json:"_type"`
		Subject       []StatementSubject `json:"subject"`
		PredicateType string             `json:"predicateType"`
		Predicate     struct {
			BuildDefinition struct {
				ExternalParameters   ExternalParameters        `json:"externalParameters"`
				ResolvedDependencies []slsa.ResourceDescriptor `json:"resolvedDependencies"`
			} `json:"buildDefinition"`
		} `json:"predicate"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return "", "", fmt.Errorf("not an in-toto statement: %w", err)
	}
	if st.Type != StatementType || st.PredicateType != slsa.PredicateSLSAProvenance {
		return "", "", fmt.Errorf("statement type %q with predicate %q, want %q with %q", st.Type, st.PredicateType, StatementType, slsa.PredicateSLSAProvenance)
	}
	if len(st.Subject) != 1 || st.Subject[0].Digest["sha256"] == "" {
		return "", "", fmt.Errorf("the statement has %d subjects, want one with a sha256 digest", len(st.Subject))
	}
	commit = st.Predicate.BuildDefinition.ExternalParameters.Source.Commit
	for _, d := range st.Predicate.BuildDefinition.ResolvedDependencies {
		if c := d.Digest["gitCommit"]; c != "" && c != commit {
			return "", "", fmt.Errorf("the statement names two commits: %s (external parameters) and %s (resolved dependencies)", commit, c)
		}
	}
	if commit == "" {
		return "", "", fmt.Errorf("the statement names no source commit")
	}
	return commit, "sha256:" + st.Subject[0].Digest["sha256"], nil
}
