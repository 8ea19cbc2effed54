package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/inferencestack/inferencestack/test/local"
	"github.com/inferencestack/inferencestack/test/testenv"
)

// benchAgent is the user agent of the bench's own requests, which the
// audit log tells apart from the operator's.
const benchAgent = "inferencestack-bench"

// auditPolicy records the metadata of every write in the bench's
// namespace, and nothing else: which object each write of the operator
// touched, and how (create, patch, update, their status subresource).
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
  namespaces: ["` + ns + `"]
- level: None
`

// startControlPlane is local.StartControlPlane with the API server's audit
// log on, which the bench reads to count the operator's writes per kind.
func startControlPlane(root string) (*testenv.Env, *auditLog, error) {
	dir, err := os.MkdirTemp("", "bench-audit-")
	if err != nil {
		return nil, nil, err
	}
	policy := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return nil, nil, err
	}
	log := filepath.Join(dir, "audit.log")
	env, err := testenv.Start(testenv.Options{
		CRDDirectoryPaths: []string{filepath.Join(root, "operator", "config", "crd", "bases")},
		Scheme:            local.Scheme(),
		APIServerArgs: map[string][]string{
			"service-cluster-ip-range": {"10.0.0.0/16"},
			"audit-policy-file":        {policy},
			"audit-log-path":           {log},
			"audit-log-format":         {"json"},
			// The limits of a production API server, raised so that
			// 10,000 stacks and 50,000 unrelated objects measure the
			// operator, not them: requests at once (the bench's and the
			// operator's workers, their watches' lists).
			"max-requests-inflight":          {"1600"},
			"max-mutating-requests-inflight": {"800"},
		},
		// etcd's default quota (2 GiB) must hold every revision until
		// the API server compacts them (every 5 minutes), and the file
		// never shrinks: a run of 10,000 stacks, rounds of patches of
		// each and the unrelated objects must not end on it.
		EtcdArgs: map[string][]string{"quota-backend-bytes": {strconv.Itoa(8 << 30)}},
	})
	if err != nil {
		return nil, nil, err
	}
	return env, &auditLog{path: log}, nil
}

// auditLog reads the API server's audit log from where it stopped.
type auditLog struct {
	path   string
	offset int64
}

// write is one write the audit log recorded.
type write struct {
	Verb      string `json:"verb"`
	UserAgent string `json:"userAgent"`
	ObjectRef struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Name        string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
}

// operators are the writes recorded since the last call that are not the
// bench's own.
func (a *auditLog) operators() ([]write, error) {
	f, err := os.Open(a.path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(a.offset, io.SeekStart); err != nil {
		return nil, err
	}
	var out []write
	r := bufio.NewReaderSize(f, 1<<20)
	for {
		line, err := r.ReadBytes('\n')
		if err == io.EOF {
			// A line being written: the next call reads it whole.
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		a.offset += int64(len(line))
		var w write
		if err := json.Unmarshal(bytes.TrimSpace(line), &w); err != nil {
			return nil, fmt.Errorf("%s: %w", a.path, err)
		}
		if !strings.HasPrefix(w.UserAgent, benchAgent) {
			out = append(out, w)
		}
	}
}

// kindWrites counts the writes to the objects of one resource.
type kindWrites struct {
	objects                                map[string]bool
	create, apply, update, status, deletes int
}

func (k *kindWrites) total() int { return k.create + k.apply + k.update + k.status + k.deletes }

// perKind sorts writes by the resource they touched.
func perKind(ws []write) map[string]*kindWrites {
	out := map[string]*kindWrites{}
	for _, w := range ws {
		k := out[w.ObjectRef.Resource]
		if k == nil {
			k = &kindWrites{objects: map[string]bool{}}
			out[w.ObjectRef.Resource] = k
		}
		if w.ObjectRef.Name != "" {
			k.objects[w.ObjectRef.Name] = true
		}
		switch {
		case w.ObjectRef.Subresource == "status":
			k.status++
		case w.Verb == "create":
			k.create++
		case w.Verb == "patch":
			k.apply++
		case w.Verb == "update":
			k.update++
		default:
			k.deletes++
		}
	}
	return out
}

// statusWrites counts the writes of InferenceStacks' status, and the
// Events created or patched, among ws.
func statusWrites(ws []write) (status, events int) {
	for _, w := range ws {
		switch {
		case w.ObjectRef.Resource == "inferencestacks" && w.ObjectRef.Subresource == "status":
			status++
		case w.ObjectRef.Resource == "events":
			events++
		}
	}
	return status, events
}

// printPerKind prints one line per resource: its objects and the writes of
// each kind; with floor, also the floor of writes at creation (one write
// per object, one status write per stack).
func printPerKind(title string, stacks int, kinds map[string]*kindWrites, floor bool) {
	fmt.Printf("%s:\n", title)
	fmt.Printf("  %-24s %8s %8s %8s %8s %8s %8s %10s\n", "resource", "objects", "create", "patch", "update", "status", "delete", "per object")
	names := slices.Sorted(maps.Keys(kinds))
	all, least := 0, 0
	for _, name := range names {
		k := kinds[name]
		per := 0.0
		if len(k.objects) > 0 {
			per = float64(k.total()) / float64(len(k.objects))
		}
		fmt.Printf("  %-24s %8d %8d %8d %8d %8d %8d %10.2f\n", name, len(k.objects), k.create, k.apply, k.update, k.status, k.deletes, per)
		all += k.total()
		switch name {
		case "inferencestacks":
			least += stacks // their status, once
		case "events":
		default:
			least += len(k.objects)
		}
	}
	fmt.Printf("  all: %d writes (%.2f per stack)", all, float64(all)/float64(stacks))
	if floor {
		fmt.Printf("; floor %d (one write per object made, one status write per stack)", least)
	}
	fmt.Println()
}

// stackWrites lists, for the stack named name, the writes of ws to it, to
// its objects (named name or name-...) and to Events about it (name.<id>), as "verb resource[/subresource]
// object", sorted, with the floor of its creation: one write per object,
// one status write.
func stackWrites(ws []write, name string) (list []string, floor int) {
	objects := map[string]bool{}
	for _, w := range ws {
		n := w.ObjectRef.Name
		event := w.ObjectRef.Resource == "events" && strings.HasPrefix(n, name+".")
		if n != name && !strings.HasPrefix(n, name+"-") && !event {
			continue
		}
		res := w.ObjectRef.Resource
		if w.ObjectRef.Subresource != "" {
			res += "/" + w.ObjectRef.Subresource
		}
		list = append(list, w.Verb+" "+res+" "+n)
		switch {
		case w.ObjectRef.Resource == "inferencestacks" && w.ObjectRef.Subresource == "status":
			objects["status"] = true
		case event:
		default:
			objects[w.ObjectRef.Resource+" "+n] = true
		}
	}
	slices.Sort(list)
	return list, len(objects)
}

// printStackWrites prints the writes of the first stack of each kind (the
// stacks are made kind by kind in turn, stackName(i) of kind i).
func printStackWrites(ws []write, kinds int) {
	fmt.Println("the writes of the first stack of each kind until every stack was applied:")
	for i := range kinds {
		list, floor := stackWrites(ws, stackName(i))
		fmt.Printf("  kind %d (%s): %d writes, floor %d\n", i, stackName(i), len(list), floor)
		for _, w := range list {
			fmt.Printf("    %s\n", w)
		}
	}
}
