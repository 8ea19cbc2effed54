package olm

import (
	"os"
	"path/filepath"

	"github.com/inferencestack/inferencestack/test/testenv"
)

// servingCert writes, into dir, a fresh CA (ca.crt) and a certificate for
// 127.0.0.1 and localhost signed by it (tls.crt, tls.key).
func servingCert(dir string) error {
	c, err := testenv.NewServingCert("test/olm CA", []string{"localhost", "127.0.0.1"})
	if err != nil {
		return err
	}
	for name, data := range map[string][]byte{"ca.crt": c.CA, "tls.crt": c.Cert, "tls.key": c.Key} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return err
		}
	}
	return nil
}
