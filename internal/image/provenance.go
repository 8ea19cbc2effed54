package image

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	slsa "github.com/in-toto/attestation/go/predicates/provenance/v1"
	ita1 "github.com/in-toto/attestation/go/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
)

const (
	// PredicateSLSAProvenance is the predicate type of SLSA provenance v1.
	PredicateSLSAProvenance = "https://slsa.dev/provenance/v1"
	// BuilderID names bundlegen as the builder in provenance statements.
	BuilderID = "https://github.com/inferencestack/inferencestack/tree/main/tools/bundlegen"
	// BuildType says how to read the build definition of bundlegen's
	// provenance: docs/release.md describes its parameters.
	BuildType = "https://github.com/inferencestack/inferencestack/blob/main/docs/release.md#signed-images-sbom-and-provenance"
)

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
			var cs []component
			if cs, err = fileComponents(filepath.Join(input, sub), sub); err != nil {
				break
			}
			files = append(files, cs...)
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
	deps := []*ita1.ResourceDescriptor{{
		Uri:    "git+" + src.Repository + "@" + src.Commit,
		Digest: map[string]string{"gitCommit": src.Commit},
	}}
	for _, f := range files {
		deps = append(deps, &ita1.ResourceDescriptor{Name: f.name, Digest: map[string]string{"sha256": f.sha256}})
	}
	cmd := make([]any, len(command))
	for i, c := range command {
		cmd[i] = c
	}
	external, err := structpb.NewStruct(map[string]any{
		"kind":    string(kind),
		"source":  map[string]any{"repository": src.Repository, "commit": src.Commit},
		"command": cmd,
	})
	if err != nil {
		return nil, err
	}
	pred := &slsa.Provenance{
		BuildDefinition: &slsa.BuildDefinition{
			BuildType:            BuildType,
			ExternalParameters:   external,
			ResolvedDependencies: deps,
		},
		RunDetails: &slsa.RunDetails{Builder: &slsa.Builder{Id: BuilderID}},
	}
	if err := pred.Validate(); err != nil {
		return nil, fmt.Errorf("provenance of %s: %w", subject.Name, err)
	}
	predJSON, err := protojson.Marshal(pred)
	if err != nil {
		return nil, err
	}
	predStruct := &structpb.Struct{}
	if err := protojson.Unmarshal(predJSON, predStruct); err != nil {
		return nil, err
	}
	st := &ita1.Statement{
		Type:          ita1.StatementTypeUri,
		Subject:       []*ita1.ResourceDescriptor{{Name: subject.Name, Digest: map[string]string{subject.Digest.Algorithm: subject.Digest.Hex}}},
		PredicateType: PredicateSLSAProvenance,
		Predicate:     predStruct,
	}
	if err := st.Validate(); err != nil {
		return nil, fmt.Errorf("provenance of %s: %w", subject.Name, err)
	}
	b, err := protojson.Marshal(st)
	if err != nil {
		return nil, err
	}
	return canonicalJSON(b)
}

// canonicalJSON re-encodes JSON with sorted keys, two-space indentation and
// a final newline: protojson's output is deliberately unstable (its spacing
// varies between builds), the statement's bytes must not be.
func canonicalJSON(b []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
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

// ProvenanceCommit reads an in-toto statement written by Provenance,
// validates it, and returns the commit it names and the digest of its
// subject.
func ProvenanceCommit(b []byte) (commit, subjectDigest string, err error) {
	var st ita1.Statement
	if err := protojson.Unmarshal(b, &st); err != nil {
		return "", "", fmt.Errorf("not an in-toto statement: %w", err)
	}
	if err := st.Validate(); err != nil {
		return "", "", fmt.Errorf("not a valid in-toto statement: %w", err)
	}
	if st.GetType() != ita1.StatementTypeUri || st.GetPredicateType() != PredicateSLSAProvenance {
		return "", "", fmt.Errorf("statement type %q with predicate %q, want %q with %q", st.GetType(), st.GetPredicateType(), ita1.StatementTypeUri, PredicateSLSAProvenance)
	}
	if len(st.GetSubject()) != 1 || st.GetSubject()[0].GetDigest()["sha256"] == "" {
		return "", "", fmt.Errorf("the statement has %d subjects, want one with a sha256 digest", len(st.GetSubject()))
	}
	predJSON, err := protojson.Marshal(st.GetPredicate())
	if err != nil {
		return "", "", err
	}
	var pred slsa.Provenance
	if err := protojson.Unmarshal(predJSON, &pred); err != nil {
		return "", "", fmt.Errorf("not an SLSA provenance v1 predicate: %w", err)
	}
	if err := pred.Validate(); err != nil {
		return "", "", fmt.Errorf("not a valid SLSA provenance v1 predicate: %w", err)
	}
	def := pred.GetBuildDefinition()
	if source := def.GetExternalParameters().GetFields()["source"].GetStructValue(); source != nil {
		commit = source.GetFields()["commit"].GetStringValue()
	}
	for _, d := range def.GetResolvedDependencies() {
		if c := d.GetDigest()["gitCommit"]; c != "" && c != commit {
			return "", "", fmt.Errorf("the statement names two commits: %q (external parameters) and %s (resolved dependencies)", commit, c)
		}
	}
	if commit == "" {
		return "", "", fmt.Errorf("the statement names no source commit")
	}
	return commit, "sha256:" + st.GetSubject()[0].GetDigest()["sha256"], nil
}
