package controller

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/runconfig"
	"github.com/inferencestack/inferencestack/operator/runconfig/stackconfig"
)

// configMemo remembers, per stack, the run config the config step made and
// the digest of the ConfigMap it applied for it, under the inputs that
// determine both: the stack's generation (its spec; its name, namespace
// and UID do not change), the pinned Llama Stack version, the line whose
// names the state uses (status.stateLine) and the text of the override. A reconcile with the same inputs whose ConfigMap still
// holds that digest skips the pipeline (parsing the base, editing it,
// writing it as YAML and checking it with the conformance model: most of
// what a reconcile allocates) and the ConfigMap's apply configuration.
// Entries keep no run config text, only what the later steps read (hash,
// environment, line).
type configMemo struct {
	mu      sync.Mutex
	entries map[types.UID]memoEntry
}

type memoEntry struct {
	inputs string
	result runconfig.Result
	digest string
	// made counts the run configs made for the stack.
	made int
}

// configInputs identifies what a stack's run config is made from; override
// is the override's text, or nil without one.
func configInputs(stack *v1alpha2.InferenceStack, llamaStackVersion string, stateLine stackconfig.Line, override *string) string {
	key := strconv.FormatInt(stack.Generation, 10) + "\x00" + llamaStackVersion + "\x00" + string(stateLine)
	if override != nil {
		sum := sha256.Sum256([]byte(*override))
		key += "\x00" + hex.EncodeToString(sum[:])
	}
	return key
}

// get returns what was made for the stack from inputs, if that is what it
// remembers.
func (m *configMemo) get(uid types.UID, inputs string) (memoEntry, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entries[uid]
	return e, ok && e.inputs == inputs
}

// put remembers the result made from inputs (without its text) and the
// digest of the ConfigMap applied for it.
func (m *configMemo) put(uid types.UID, inputs string, result runconfig.Result, digest string) {
	result.YAML = nil
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.entries == nil {
		m.entries = map[types.UID]memoEntry{}
	}
	m.entries[uid] = memoEntry{inputs: inputs, result: result, digest: digest, made: m.entries[uid].made + 1}
}

// made is how many run configs were made for the stack since the operator
// started (or the stack was last forgotten).
func (m *configMemo) made(uid types.UID) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.entries[uid].made
}

// forget drops a deleted stack's entry.
func (m *configMemo) forget(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.entries, uid)
}
