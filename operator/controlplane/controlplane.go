// Package controlplane lets tests outside operator/ (the release tools'
// RBAC proof in tools/internal/rbacdrift) start the real control plane of
// operator/internal/testenv, which Go's internal rule hides from them. It
// only forwards; see testenv for what it does.
package controlplane

import (
	"testing"

	"github.com/inferencestack/inferencestack/operator/internal/testenv"
)

// Env is a running control plane (testenv.Env).
type Env = testenv.Env

// Options says what to start (testenv.Options).
type Options = testenv.Options

// Start starts the control plane (testenv.Start).
func Start(opts Options) (*Env, error) { return testenv.Start(opts) }

// RunMain is the body of a TestMain (testenv.RunMain).
func RunMain(m *testing.M, opts Options, env **Env) { testenv.RunMain(m, opts, env) }
