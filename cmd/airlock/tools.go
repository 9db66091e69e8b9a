package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/airlock-sandbox/airlock"
	"github.com/airlock-sandbox/airlock/hostfuncs"
)

// toolSets are the host function sets `airlock run --host-funcs NAME` can
// expose.
var toolSets = map[string]func() []hostfuncs.Function{"demo": demoTools}

func toolsOption(name string) (airlock.Option, error) {
	set, ok := toolSets[name]
	if !ok {
		return nil, usageError{fmt.Sprintf("--host-funcs %q: the only set is \"demo\"", name)}
	}
	return airlock.WithHostFuncs(set()...), nil
}

type kvSetArgs struct {
	Key   string          `json:"key"`
	Value json.RawMessage `json:"value"`
}

type kvKeyArgs struct {
	Key string `json:"key"`
}

type addArgs struct {
	A float64 `json:"a"`
	B float64 `json:"b"`
}

// The demo store's bounds: the guest decides what it stores, so the host
// must decide how much.
const (
	kvMaxKeys  = 256
	kvMaxBytes = 1 << 20 // keys and values together
)

// kvValuesKey is the Request.Values key under which a host hands the demo
// tools a store of its own (airlock repl: one per session).
const kvValuesKey = "airlock.demo.kv"

// kvStore is one bounded key-value map.
type kvStore struct {
	mu    sync.Mutex
	m     map[string]json.RawMessage
	bytes int
}

func newKVStore() *kvStore { return &kvStore{m: map[string]json.RawMessage{}} }

func (s *kvStore) set(key string, v json.RawMessage) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, had := s.m[key]
	size := s.bytes + len(key) + len(v)
	if had {
		size -= len(key) + len(old)
	}
	switch {
	case !had && len(s.m) >= kvMaxKeys:
		return fmt.Errorf("kv_set: the store holds its maximum of %d keys", kvMaxKeys)
	case size > kvMaxBytes:
		return fmt.Errorf("kv_set: the store would hold %d bytes, over its maximum of %d", size, kvMaxBytes)
	}
	s.m[key] = append(json.RawMessage(nil), v...)
	s.bytes = size
	return nil
}

func (s *kvStore) get(key string) (json.RawMessage, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[key]
	return v, ok
}

func (s *kvStore) keys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]string, 0, len(s.m))
	for k := range s.m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// kvStores hands each run its own store: tools are the host's code, run
// for every client of a server, so a store shared by all runs would let
// one client's program read another's data. A run's store is dropped
// when the run ends (its context is done), so they are as many as the
// runs going.
type kvStores struct {
	mu    sync.Mutex
	byRun map[string]*kvStore
}

func (k *kvStores) forCall(ctx context.Context) (*kvStore, error) {
	info, ok := hostfuncs.CallInfo(ctx)
	if !ok {
		return nil, fmt.Errorf("kv: not called from a run")
	}
	if s, ok := info.Values[kvValuesKey].(*kvStore); ok {
		return s, nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if s, ok := k.byRun[info.RunID]; ok {
		return s, nil
	}
	if ctx.Err() != nil {
		// An ended run's AfterFunc has run already; a store made now
		// would never be dropped.
		return nil, fmt.Errorf("kv: the run has ended: %w", context.Cause(ctx))
	}
	s := newKVStore()
	if k.byRun == nil {
		k.byRun = map[string]*kvStore{}
	}
	k.byRun[info.RunID] = s
	context.AfterFunc(ctx, func() {
		k.mu.Lock()
		delete(k.byRun, info.RunID)
		k.mu.Unlock()
	})
	return s, nil
}

// live is the number of stores held (tests).
func (k *kvStores) live() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.byRun)
}

// demoTools are small tools to try host calls from the command line. The
// key-value store lasts one run (in `airlock repl`, the session) and holds
// at most kvMaxKeys keys and kvMaxBytes bytes.
func demoTools() []hostfuncs.Function { tools, _ := demoToolsWithStores(); return tools }

func demoToolsWithStores() ([]hostfuncs.Function, *kvStores) {
	stores := &kvStores{}
	return []hostfuncs.Function{
		hostfuncs.Func("echo", "Return the value unchanged.", func(_ context.Context, v json.RawMessage) (json.RawMessage, error) {
			return v, nil
		}),
		hostfuncs.Func("add", "Return a + b.", func(_ context.Context, in addArgs) (float64, error) {
			return in.A + in.B, nil
		}),
		hostfuncs.Func("now", "Return the host's time, RFC 3339 in UTC.", func(context.Context, struct{}) (string, error) {
			return time.Now().UTC().Format(time.RFC3339Nano), nil
		}),
		hostfuncs.Func("kv_set", fmt.Sprintf("Store value under key, for this run (in airlock repl, the session); at most %d keys and %d KiB.", kvMaxKeys, kvMaxBytes>>10),
			func(ctx context.Context, in kvSetArgs) (bool, error) {
				s, err := stores.forCall(ctx)
				if err != nil {
					return false, err
				}
				if err := s.set(in.Key, in.Value); err != nil {
					return false, err
				}
				return true, nil
			}),
		hostfuncs.Func("kv_get", "Return the value stored under key in this run; an error if there is none.", func(ctx context.Context, in kvKeyArgs) (json.RawMessage, error) {
			s, err := stores.forCall(ctx)
			if err != nil {
				return nil, err
			}
			v, ok := s.get(in.Key)
			if !ok {
				return nil, fmt.Errorf("kv_get: no key %q", in.Key)
			}
			return v, nil
		}),
		hostfuncs.Func("kv_keys", "Return this run's stored keys, sorted.", func(ctx context.Context, _ struct{}) ([]string, error) {
			s, err := stores.forCall(ctx)
			if err != nil {
				return nil, err
			}
			return s.keys(), nil
		}),
	}, stores
}
