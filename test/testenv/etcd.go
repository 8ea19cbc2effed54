package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
)

// EtcdKV is one key of etcd and the revision of its last write, as etcd
// stores it: what the API server wrote, in the encoding and the version it
// stored the object in.
type EtcdKV struct {
	Key, Value  []byte
	ModRevision int64
}

// EtcdEvent is one change of a watched key: Deleted, or a write of KV.
type EtcdEvent struct {
	KV      EtcdKV
	Deleted bool
}

// The API server stores every object under this prefix (its --etcd-prefix
// default), as /registry/<group>/<resource>/[<namespace>/]<name>.
const EtcdPrefix = "/registry/"

// EtcdRange reads the keys starting with prefix from the control plane's
// etcd (through etcd's v3 JSON gateway on its client URL), as they were at
// revision rev (0: now), and the revision it read at.
func (e *Env) EtcdRange(ctx context.Context, prefix string, rev int64) ([]EtcdKV, int64, error) {
	req := map[string]any{"key": []byte(prefix), "range_end": prefixEnd(prefix)}
	if rev > 0 {
		req["revision"] = strconv.FormatInt(rev, 10)
	}
	resp, err := e.etcdPost(ctx, "/v3/kv/range", req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	var out struct {
		Header etcdHeader `json:"header"`
		KVs    []etcdKV   `json:"kvs"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, 0, fmt.Errorf("testenv: etcd's answer to a range of %s: %w", prefix, err)
	}
	kvs := make([]EtcdKV, 0, len(out.KVs))
	for _, kv := range out.KVs {
		kvs = append(kvs, kv.kv())
	}
	return kvs, int64(out.Header.Revision), nil
}

// EtcdWatch streams every change from revision rev on of the keys from
// key on up to the last one starting with lastPrefix (key itself: the keys
// starting with it), in etcd's order of writes, until ctx ends or the
// stream breaks (then both channels are closed; the error, if any, is sent
// on errs first). One watch over several keys orders their writes.
func (e *Env) EtcdWatch(ctx context.Context, key, lastPrefix string, rev int64) (<-chan EtcdEvent, <-chan error, error) {
	prefix := key + " .. " + lastPrefix
	resp, err := e.etcdPost(ctx, "/v3/watch", map[string]any{"create_request": map[string]any{
		"key": []byte(key), "range_end": prefixEnd(lastPrefix), "start_revision": strconv.FormatInt(rev, 10)}})
	if err != nil {
		return nil, nil, err
	}
	events, errs := make(chan EtcdEvent, 64), make(chan error, 1)
	go func() {
		defer close(errs)
		defer close(events)
		defer resp.Body.Close()
		dec := json.NewDecoder(resp.Body)
		for {
			var msg struct {
				Result struct {
					Canceled     bool   `json:"canceled"`
					CancelReason string `json:"cancel_reason"`
					Events       []struct {
						Type string `json:"type"`
						KV   etcdKV `json:"kv"`
					} `json:"events"`
				} `json:"result"`
				Error json.RawMessage `json:"error"`
			}
			if err := dec.Decode(&msg); err != nil {
				if ctx.Err() == nil && !errors.Is(err, io.EOF) {
					errs <- fmt.Errorf("testenv: etcd watch of %s: %w", prefix, err)
				}
				return
			}
			if len(msg.Error) > 0 || msg.Result.Canceled {
				errs <- fmt.Errorf("testenv: etcd watch of %s ended: %s %s", prefix, msg.Error, msg.Result.CancelReason)
				return
			}
			for _, ev := range msg.Result.Events {
				select {
				case events <- EtcdEvent{KV: ev.KV.kv(), Deleted: ev.Type == "DELETE"}:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return events, errs, nil
}

func (e *Env) etcdPost(ctx context.Context, path string, body any) (*http.Response, error) {
	if e.env == nil || e.env.ControlPlane.Etcd == nil || e.env.ControlPlane.Etcd.URL == nil {
		return nil, errors.New("testenv: etcd is not running")
	}
	data, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.env.ControlPlane.Etcd.URL.String()+path, bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("testenv: etcd's JSON gateway %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		return nil, fmt.Errorf("testenv: etcd's JSON gateway %s answered %s: %s", path, resp.Status, msg)
	}
	return resp, nil
}

// prefixEnd is the end of the key range of prefix (etcd's clientv3.GetPrefixRangeEnd).
func prefixEnd(prefix string) []byte {
	end := []byte(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return []byte{0}
}

// The gateway's JSON: bytes in base64, 64-bit integers as strings.
type etcdHeader struct {
	Revision jsonInt `json:"revision"`
}

type etcdKV struct {
	Key         []byte  `json:"key"`
	Value       []byte  `json:"value"`
	ModRevision jsonInt `json:"mod_revision"`
}

func (kv etcdKV) kv() EtcdKV {
	return EtcdKV{Key: kv.Key, Value: kv.Value, ModRevision: int64(kv.ModRevision)}
}

type jsonInt int64

func (i *jsonInt) UnmarshalJSON(b []byte) error {
	n, err := strconv.ParseInt(string(bytes.Trim(b, `"`)), 10, 64)
	*i = jsonInt(n)
	return err
}
