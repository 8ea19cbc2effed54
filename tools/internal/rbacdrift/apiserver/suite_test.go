package apiserver

import (
	"testing"

	"github.com/inferencestack/inferencestack/operator/controlplane"
)

var env *controlplane.Env

func TestMain(m *testing.M) {
	controlplane.RunMain(m, controlplane.Options{}, &env)
}
