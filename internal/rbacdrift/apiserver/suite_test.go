package apiserver

import (
	"testing"

	"github.com/inferencestack/inferencestack/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.RunMain(m, testenv.Options{}, &env)
}
