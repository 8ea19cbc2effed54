// Package testenv forwards to github.com/inferencestack/inferencestack/internal/testenv,
// where the control plane starter moved so that tests outside operator/ (the OLM
// end-to-end tests under tools/) can use it too. New code imports that package;
// this one goes once nothing imports it.
package testenv

import (
	"testing"

	"github.com/inferencestack/inferencestack/internal/testenv"
)

// Options says what to start (see internal/testenv.Options).
type Options = testenv.Options

// Env is a running control plane (see internal/testenv.Env).
type Env = testenv.Env

// AssetsDir is the folder holding the control plane binaries (see internal/testenv.AssetsDir).
func AssetsDir() (string, error) { return testenv.AssetsDir() }

// Start starts the control plane (see internal/testenv.Start).
func Start(opts Options) (*Env, error) { return testenv.Start(opts) }

// RunMain is the body of a TestMain (see internal/testenv.RunMain).
func RunMain(m *testing.M, opts Options, env **Env) { testenv.RunMain(m, opts, env) }
