package validate_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/operator-framework/operator-registry/pkg/lib/config"
	"github.com/stretchr/testify/require"

	"github.com/inferencestack/inferencestack/internal/validate"
)

// TestOPMRenderedCatalogs validates real catalogs of public operators, as
// opm rendered them (testdata/opm-rendered, provenance in testdata/README.md):
// `validate catalog` gives exactly the findings of opm's own validation
// (operator-registry pkg/lib/config.Validate, what `opm validate` runs; each
// of its errors becomes one model finding) plus bundlegen's, each named. A
// catalog whose bundles carry no objects (olm.csv.metadata) is valid, and the
// CRD upgrade-safety check says once that it was skipped.
func TestOPMRenderedCatalogs(t *testing.T) {
	type finding struct {
		rule, channel, bundle, from, crd, field, message string
	}
	const odf = "odf-node-recovery-operator"
	odfBreak := func(field, message string) finding {
		return finding{rule: validate.RuleCRDUpgradeSafety, channel: "alpha", bundle: odf + ".v1.1.0", from: odf + ".v1.0.0",
			crd: "noderecoveries.odf.openshift.io", field: field,
			message: "upgrade " + odf + ".v1.0.0 -> " + odf + ".v1.1.0 (replaces in alpha) breaks CRD noderecoveries.odf.openshift.io: " + message}
	}
	tests := []struct {
		name, dir string
		sha256    string
		// edit changes the catalog before it is validated (nil: as published).
		edit func(t *testing.T, data []byte) []byte
		// wantOPM are fragments of opm's error, none when opm accepts it.
		wantOPM []string
		want    []finding
		// skipped is how many bundles carry no objects (the note counts them).
		skipped int
	}{
		{name: "aws-neuron-operator, 12 bundles as olm.csv.metadata, two channels", dir: "aws-neuron-operator",
			sha256: "c079b5121951486e6cc3bf947c3fc3066310ebb76b1329a609ad266f0cf37be2", skipped: 12},
		{name: "ecr-secret-operator, 4 bundles as olm.csv.metadata", dir: "ecr-secret-operator",
			sha256: "7829a27e82187f2617fae2deca8ef94008928e3668a4bfc250f262583a37f5c9", skipped: 4},
		{name: "kubevirt-wol, one bundle in three channels", dir: "kubevirt-wol",
			sha256: "ccaae1dd36becd3b5c51009048148067c60f476f3039e0a948bd49025d915f9a", skipped: 1},
		{name: "kubevirt-wol with a default channel it lacks: opm's finding and ours", dir: "kubevirt-wol",
			sha256: "ccaae1dd36becd3b5c51009048148067c60f476f3039e0a948bd49025d915f9a", skipped: 1,
			edit: func(t *testing.T, data []byte) []byte {
				require.Contains(t, string(data), "defaultChannel: stable-v0\n")
				return bytes.Replace(data, []byte("defaultChannel: stable-v0\n"), []byte("defaultChannel: stable-v9\n"), 1)
			},
			wantOPM: []string{`invalid package "kubevirt-wol"`, `invalid channel "stable-v9"`, "channel must contain at least one bundle"},
			want: []finding{
				{rule: validate.RuleDefaultChannelMissing, channel: "stable-v9", message: `default channel "stable-v9" does not exist`},
				{rule: validate.RuleModel, channel: "stable-v9", message: "channel must contain at least one bundle"},
			}},
		{name: "odf-node-recovery-operator, objects and CRDs carried: crdify on its real edge", dir: odf,
			sha256: "46ab72ba9981e6377d6e20be77971babdd3e3842a6d185093c95fdfdf783345c",
			want: []finding{
				odfBreak("", "existingFieldRemoval: removed field : v1alpha1.^.status.osdIDs.items;"),
				odfBreak("", "existingFieldRemoval: removed field : v1alpha1.^.status.osdIDs;"),
				odfBreak("^.status.nodeDevice.items", "v1alpha1: ^.status.nodeDevice.items: required: new required fields: [failingOSDID]"),
				odfBreak("^.status.osdIDs", `v1alpha1: ^.status.osdIDs: type: type changed : "array" -> ""`),
				odfBreak("^.status.osdIDs.items", `v1alpha1: ^.status.osdIDs.items: type: type changed : "string" -> ""`),
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", "opm-rendered", tc.dir, "catalog.yaml"))
			require.NoError(t, err)
			sum := sha256.Sum256(data)
			require.Equal(t, tc.sha256, hex.EncodeToString(sum[:]), "the test data is the published catalog, byte for byte (testdata/README.md)")
			if tc.edit != nil {
				data = tc.edit(t, data)
			}
			dir := filepath.Join(t.TempDir(), tc.dir)
			require.NoError(t, os.MkdirAll(dir, 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "catalog.yaml"), data, 0o644))

			opmErr := config.Validate(context.Background(), os.DirFS(dir))
			if len(tc.wantOPM) == 0 {
				require.NoError(t, opmErr, "opm validate accepts it")
			} else {
				require.Error(t, opmErr, "opm validate refuses it")
				for _, w := range tc.wantOPM {
					require.ErrorContains(t, opmErr, w)
				}
			}

			var notes bytes.Buffer
			got, err := validate.Catalog{Dir: dir, Warnings: &notes}.Run(context.Background())
			require.NoError(t, err)
			require.Len(t, got, len(tc.want), "findings: %v", got)
			for i, w := range tc.want {
				g := got[i]
				require.Equal(t, w.rule, g.Rule, "%s", g)
				require.Equal(t, w.channel, g.Channel, "%s", g)
				require.Equal(t, w.bundle, g.Bundle, "%s", g)
				require.Equal(t, w.from, g.From, "%s", g)
				require.Equal(t, w.crd, g.CRD, "%s", g)
				require.Equal(t, w.field, g.Field, "%s", g)
				require.Contains(t, g.Message, w.message, "%s", g)
				if g.Rule == validate.RuleModel {
					require.ErrorContains(t, opmErr, g.Message, "a model finding is one of opm's own errors")
				}
			}
			if tc.skipped == 0 {
				require.NotContains(t, notes.String(), "note:")
				return
			}
			require.Equal(t, 1, strings.Count(notes.String(), "note:"), "the skipped check is said once:\n%s", notes.String())
			require.Contains(t, notes.String(), "the CRD upgrade-safety check (crdify) was skipped")
			require.Contains(t, notes.String(), ": "+strconv.Itoa(tc.skipped)+" bundle(s) carry no objects")
		})
	}
}
