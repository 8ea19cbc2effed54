package componentrbac

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestObjects: no component creates RBAC, even with every feature on: the
// server's kubernetes auth needs no permission of its own.
func TestObjects(t *testing.T) {
	objs, err := Objects(Fixture())
	require.NoError(t, err)
	require.Empty(t, objs)
}
