package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/components/config"
	"github.com/inferencestack/inferencestack/operator/components/server"
	"github.com/inferencestack/inferencestack/operator/internal/serverstatus"
	"github.com/inferencestack/inferencestack/operator/runconfig"
	"github.com/inferencestack/inferencestack/operator/runconfig/stackconfig"
)

// A stack moves between Llama Stack lines when it is relabelled from one
// operator major to another (StackSelector): the new major finds the old
// one's objects, its server Deployment still serving the old line. Before
// it changes anything, lineStep checks what the move would drop, and the
// stack records which line its state was written by (status.stateLine),
// so that the new line is configured to read it (Operand.StateLine).
// docs/moving-between-lines.md is the user's side of it.

// registeredKind is how a run config registers resources of one routing
// table (upstream's core/datatypes.py: RegisteredResources, and the
// top-level lists of 0.2's StackRunConfig; ResourceType names the
// registry's type, core/store/registry.py keys entries by it).
type registeredKind struct {
	// key is the list's key in the run config.
	keys []string
	// id is the identifier field of one entry.
	id string
	// registryType is the resource's type in the registry, which names it
	// in a refusal and in spec.lineMove.acceptLosses.
	registryType string
}

// registeredKinds are the routing tables (facts' routed_apis) whose
// resources a run config registers, by routing table.
var registeredKinds = map[string]registeredKind{
	"models":            {keys: []string{"models"}, id: "model_id", registryType: "model"},
	"shields":           {keys: []string{"shields"}, id: "shield_id", registryType: "shield"},
	"tool_groups":       {keys: []string{"tool_groups"}, id: "toolgroup_id", registryType: "tool_group"},
	"vector_dbs":        {keys: []string{"vector_dbs"}, id: "vector_db_id", registryType: "vector_db"},
	"vector_stores":     {keys: []string{"vector_stores"}, id: "vector_store_id", registryType: "vector_store"},
	"datasets":          {keys: []string{"datasets"}, id: "dataset_id", registryType: "dataset"},
	"scoring_functions": {keys: []string{"scoring_fns"}, id: "scoring_fn_id", registryType: "scoring_function"},
	"benchmarks":        {keys: []string{"benchmarks"}, id: "benchmark_id", registryType: "benchmark"},
}

// droppedTables are the routing tables line from has and line to has not
// (from their facts), sorted: their resources do not survive a move.
func droppedTables(from, to stackconfig.Line) []string {
	ff, tf := from.Facts(), to.Facts()
	if ff == nil || tf == nil {
		return nil
	}
	has := map[string]bool{}
	for _, r := range tf.RoutedAPIs {
		has[r.RoutingTable] = true
	}
	var out []string
	for _, r := range ff.RoutedAPIs {
		if r.RoutingTable != "" && !has[r.RoutingTable] && !slices.Contains(out, r.RoutingTable) {
			out = append(out, r.RoutingTable)
		}
	}
	slices.Sort(out)
	return out
}

// registeredLosses are the resources a run config (of any line's layout:
// under registered_resources, or top-level at 0.2) registers in the
// routing tables tables, as <registry type>/<identifier>, sorted. With
// routers (routing table -> its router API, from the old line's facts),
// served lists the tables whose router the config serves (listed in apis,
// or apis unset): what clients registered there through the server's API,
// kept in its registry, is lost too (apiLosses names it).
func registeredLosses(runConfig []byte, tables []string, routers map[string]string) (out, served []string, _ error) {
	if len(tables) == 0 {
		return nil, nil, nil
	}
	var doc map[string]any
	if err := yaml.Unmarshal(runConfig, &doc); err != nil {
		return nil, nil, err
	}
	lists := []map[string]any{doc}
	if rr, ok := doc["registered_resources"].(map[string]any); ok {
		lists = append(lists, rr)
	}
	for _, table := range tables {
		kind, ok := registeredKinds[table]
		if !ok {
			// A routing table whose resources this operator cannot
			// enumerate: named as a whole.
			out = append(out, table+"/*")
			continue
		}
		if router, ok := routers[table]; ok && servesAPI(doc, router) {
			served = append(served, table)
		}
		for _, l := range lists {
			for _, key := range kind.keys {
				entries, _ := l[key].([]any)
				for _, e := range entries {
					m, _ := e.(map[string]any)
					if id, _ := m[kind.id].(string); id != "" {
						out = append(out, kind.registryType+"/"+id)
					}
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out), served, nil
}

// serverLister reads what a server's registry holds (serverstatus.Prober).
type serverLister interface {
	Resources(ctx context.Context, t serverstatus.Target, tables []string) (map[string][]string, error)
}

// apiLosses names what clients registered through the old server's API in
// the routing tables served (line from's), which the move drops: each
// resource as <registry type>/<identifier>, listed on the server (its
// line's ResourceList facts) through the prober's client of the stack.
// A table whose <registry type>/* accepted covers is not asked for.
// When the server cannot be asked (no prober, no list in the facts, down,
// refusing, not answering in time, auth failing, a garbled answer), each
// table is named <registry type>/*, and unlisted says why (classified:
// the same while the cause is, so the condition does not change from one
// try to the next); retry: asking again may answer (a server was asked).
func apiLosses(ctx context.Context, s *state, from stackconfig.Line, served []string, accepted func(string) bool) (out []string, unlisted string, retry bool) {
	typeOf := func(table string) string {
		if lf, ok := from.ResourceList(table); ok {
			return lf.RegistryType
		}
		return registeredKinds[table].registryType
	}
	var ask []string
	for _, table := range served {
		switch _, listed := from.ResourceList(table); {
		case accepted(typeOf(table) + "/*"):
			out = append(out, typeOf(table)+"/*")
		case !listed:
			out = append(out, typeOf(table)+"/*")
			unlisted = fmt.Sprintf("the facts of Llama Stack %s name no list endpoint of %s", from, table)
		default:
			ask = append(ask, table)
		}
	}
	if len(ask) == 0 {
		return out, unlisted, false
	}
	if s.Servers == nil {
		for _, table := range ask {
			out = append(out, typeOf(table)+"/*")
		}
		return out, "this operator runs without the server status prober", false
	}
	listed, err := s.Servers.Resources(ctx, serverTarget(s.Stack, from), ask)
	if err != nil {
		le := &serverstatus.ListError{Cause: err.Error()}
		errors.As(err, &le)
		log.FromContext(ctx).Info("cannot list the old server's resources that a line move drops", "tables", ask, "cause", le.Cause, "detail", le.Detail)
		for _, table := range ask {
			out = append(out, typeOf(table)+"/*")
		}
		return out, le.Cause, true
	}
	for _, table := range ask {
		for _, id := range listed[table] {
			out = append(out, typeOf(table)+"/"+id)
		}
	}
	return out, unlisted, false
}

// servesAPI: the run config serves the router API (upstream serves every
// router when apis is unset).
func servesAPI(doc map[string]any, api string) bool {
	apis, _ := doc["apis"].([]any)
	return len(apis) == 0 || slices.Contains(apis, any(api))
}

// routersOf maps each routing table of the line to its router API.
func routersOf(l stackconfig.Line) map[string]string {
	out := map[string]string{}
	if f := l.Facts(); f != nil {
		for _, r := range f.RoutedAPIs {
			out[r.RoutingTable] = r.Router
		}
	}
	return out
}

// deployedLine is the line the stack's server Deployment serves, as the
// status last recorded it (resolvedDistribution.operandVersion, which the
// status keeps while the Deployment runs that image): "" when unknown (a
// custom image, no Deployment yet).
func deployedLine(stack *v1alpha2.InferenceStack) stackconfig.Line {
	rd := stack.Status.ResolvedDistribution
	if rd == nil {
		return ""
	}
	line, err := stackconfig.LineOf(rd.OperandVersion)
	if err != nil {
		return ""
	}
	return line
}

// stateLine is the line whose names the stack's state uses: the one
// status.stateLine records, else the line its server already runs (a
// stack deployed before the field existed), else target (a new stack).
func stateLine(stack *v1alpha2.InferenceStack, target stackconfig.Line) stackconfig.Line {
	if l := stackconfig.Line(stack.Status.StateLine); l != "" {
		return l
	}
	if l := deployedLine(stack); l != "" {
		return l
	}
	return target
}

// lineStep refuses, before anything is made or changed, a move of the
// stack onto this operator's line that would drop resources the deployed
// server registers (the run config the old line's operator wrote) and
// that spec.lineMove does not accept for this line: condition Degraded,
// reason LineMoveLosesResources, names each. The old server Deployment is
// left as it is, serving.
func lineStep(ctx context.Context, s *state) error {
	target, err := stackconfig.LineOf(s.Pin.LlamaStackVersion)
	if err != nil {
		return nil // the config step says so
	}
	from := deployedLine(s.Stack)
	if from == "" || from == target {
		return nil
	}
	// From the API server: the cache may not have seen the old major's
	// Deployment yet when the relabelled stack arrives (a move is rare).
	dep := &appsv1.Deployment{}
	if err := s.APIReader.Get(ctx, client.ObjectKey{Namespace: s.Stack.Namespace, Name: server.Name(s.Stack)}, dep); err != nil {
		return client.IgnoreNotFound(err) // nothing serves: nothing to keep
	}
	var losses []string
	if fk, tk := from.Facts().RegistryKey.Version, target.Facts().RegistryKey.Version; fk != tk {
		// The new line reads only its own registry keys (core/store/
		// registry.py KEY_VERSION, no migration): whatever was registered
		// through the API is not seen; the run config's resources are
		// registered again at start.
		losses = append(losses, "registry/"+fk)
	}
	tables := droppedTables(from, target)
	if len(tables) == 0 && len(losses) == 0 {
		return nil
	}
	cm := &corev1.ConfigMap{}
	key := client.ObjectKey{Namespace: s.Stack.Namespace, Name: config.ConfigMapName(s.Stack.Name)}
	if err := s.APIReader.Get(ctx, key, cm); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("reading the deployed run config %s: %w", key, err)
	}
	// What clients registered through the API is lost with its table;
	// where the registry itself is lost (registry/<version>) that says it.
	var routers map[string]string
	if len(losses) == 0 {
		routers = routersOf(from)
	}
	registered, served, err := registeredLosses([]byte(cm.Data[runconfig.ConfigKey]), tables, routers)
	if err != nil {
		return errorf(v1alpha2.TypeDegraded, v1alpha2.ReasonLineMoveLosesResources,
			"moving from Llama Stack %s to %s: the deployed run config (ConfigMap %s key %s) cannot be read (%v), so what the move drops is unknown; the old server keeps serving: move the stack back to its major, or repair the ConfigMap",
			from, target, key.Name, runconfig.ConfigKey, err)
	}
	var accept []string
	if lm := s.Stack.Spec.LineMove; lm != nil && lm.Line == string(target) {
		accept = lm.AcceptLosses
	}
	// <type>/* accepts every resource of that type.
	accepted := func(l string) bool {
		typ, _, _ := strings.Cut(l, "/")
		return slices.Contains(accept, l) || slices.Contains(accept, typ+"/*")
	}
	viaAPI, unlisted, retry := apiLosses(ctx, s, from, served, accepted)
	losses = append(losses, registered...)
	losses = append(losses, viaAPI...)
	slices.Sort(losses)
	losses = slices.Compact(losses)
	unaccepted := slices.DeleteFunc(slices.Clone(losses), accepted)
	if len(unaccepted) == 0 {
		return nil
	}
	var why []string
	if slices.ContainsFunc(losses, func(l string) bool { return strings.HasPrefix(l, "registry/") }) {
		why = append(why, fmt.Sprintf("Llama Stack %s does not read the registry keys %s wrote (%s, %s -> %s), so every resource registered through the API is lost (those of the run config are registered again)",
			target, from, from.Facts().RegistryKey.Source, from.Facts().RegistryKey.Version, target.Facts().RegistryKey.Version))
	}
	if slices.ContainsFunc(unaccepted, func(l string) bool { return !strings.HasPrefix(l, "registry/") }) {
		why = append(why, fmt.Sprintf("Llama Stack %s has no %s; the old server's run config and registry hold these", target, strings.Join(tables, ", ")))
	}
	if unlisted != "" && slices.ContainsFunc(unaccepted, func(l string) bool { return strings.HasSuffix(l, "/*") }) {
		again := ""
		if retry {
			again = ": it asks again, and names each once the server answers"
		}
		why = append(why, fmt.Sprintf("<type>/* is whatever clients registered through the server's API, which the operator could not list (%s)%s; accepting <type>/* accepts them all, whatever they are", unlisted, again))
	} else {
		retry = false
	}
	ce := errorf(v1alpha2.TypeDegraded, v1alpha2.ReasonLineMoveLosesResources,
		"moving from Llama Stack %s to %s loses %s (%s); nothing was changed, the old server keeps serving. To move anyway, set spec.lineMove: {line: %q, acceptLosses: [%s]}; to stay, set label %s back (docs/moving-between-lines.md)",
		from, target, strings.Join(unaccepted, ", "), strings.Join(why, "; "),
		string(target), strings.Join(quoted(unaccepted), ", "), v1alpha2.LabelOperatorMajor)
	ce.retry = retry
	return ce
}

func quoted(in []string) []string {
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}
