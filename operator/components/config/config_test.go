package config_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/inferencestack/inferencestack/operator/components/config"
	"github.com/inferencestack/inferencestack/test/testutil"
)

// TestSQLSecretIsData: the API server folds stringData into data and never
// returns it, so a Secret applied with stringData never reads back equal and
// would be written on every reconcile.
func TestSQLSecretIsData(t *testing.T) {
	s := config.SQLSecret(testutil.Hub(testutil.Stack("s")), map[string]string{"host": "pg", "port": "5432"})
	if len(s.StringData) != 0 {
		t.Errorf("stringData %v: apply data", s.StringData)
	}
	if diff := cmp.Diff(map[string][]byte{"host": []byte("pg"), "port": []byte("5432")}, s.Data); diff != "" {
		t.Errorf("data (-want +got):\n%s", diff)
	}
}
