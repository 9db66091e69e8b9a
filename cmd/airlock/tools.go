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

// toolSets are the host tool sets `airlock run --tools NAME` can expose.
var toolSets = map[string]func() []hostfuncs.Tool{"demo": demoTools}

func toolsOption(name string) (airlock.Option, error) {
	set, ok := toolSets[name]
	if !ok {
		return nil, usageError{fmt.Sprintf("--tools %q: the only tool set is \"demo\"", name)}
	}
	return airlock.WithTools(set()...), nil
}

type kvArgs struct {
	Key   string          `json:"key"`
	Value json.RawMessage `json:"value"`
}

type addArgs struct {
	A float64 `json:"a"`
	B float64 `json:"b"`
}

// demoTools are small tools to try host calls from the command line; the
// key-value store lives as long as this process.
func demoTools() []hostfuncs.Tool {
	var mu sync.Mutex
	kv := map[string]json.RawMessage{}
	return []hostfuncs.Tool{
		hostfuncs.Func("echo", "Return the value unchanged.", func(_ context.Context, v json.RawMessage) (json.RawMessage, error) {
			return v, nil
		}),
		hostfuncs.Func("add", "Return a + b.", func(_ context.Context, in addArgs) (float64, error) {
			return in.A + in.B, nil
		}),
		hostfuncs.Func("now", "Return the host's time, RFC 3339 in UTC.", func(context.Context, struct{}) (string, error) {
			return time.Now().UTC().Format(time.RFC3339Nano), nil
		}),
		hostfuncs.Func("kv_set", "Store value under key (in memory, for this process).", func(_ context.Context, in kvArgs) (bool, error) {
			mu.Lock()
			defer mu.Unlock()
			kv[in.Key] = in.Value
			return true, nil
		}),
		hostfuncs.Func("kv_get", "Return the value stored under key; an error if there is none.", func(_ context.Context, key string) (json.RawMessage, error) {
			mu.Lock()
			defer mu.Unlock()
			v, ok := kv[key]
			if !ok {
				return nil, fmt.Errorf("kv_get: no key %q", key)
			}
			return v, nil
		}),
		hostfuncs.Func("kv_keys", "Return the stored keys, sorted.", func(context.Context, struct{}) ([]string, error) {
			mu.Lock()
			defer mu.Unlock()
			keys := make([]string, 0, len(kv))
			for k := range kv {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			return keys, nil
		}),
	}
}
