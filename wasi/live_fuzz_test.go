package wasi_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental/table"

	"github.com/airlock-sandbox/airlock/python"
	"github.com/airlock-sandbox/airlock/wasi"
	"github.com/airlock-sandbox/airlock/wasi/memfs"
)

// live is one real python.wasm instance per process, started and paused
// inside its first fd_read of stdin: while paused, that host call serves
// fuzz inputs, each run against the instance's own linear memory (its
// real size, the interpreter's heap as the bytes around every pointer),
// then puts the memory back as it was.
var live struct {
	once  sync.Once
	err   error
	size  int
	reqs  chan liveReq
	ready chan error
}

type liveReq struct {
	data  []byte
	reply chan error
}

// liveEdges are what the extra 01xxxxxx selectors pick in live memory:
// the edges of the real instance's memory.
func liveEdges(size uint64) []uint64 {
	return []uint64{size - 1, size - 4, size - 8, size - 24, size - 48, size - 64, size - 4096, size, size + 1, size / 2}
}

func startLive() error {
	art, err := python.Load("", "")
	if err != nil {
		return err
	}
	cache, err := python.CacheDir()
	if err != nil {
		return err
	}
	ctx := context.Background()
	cc, err := wazero.NewCompilationCacheWithDir(filepath.Join(cache, "compiled"))
	if err != nil {
		return err
	}
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCloseOnContextDone(true).
		WithDebugInfoEnabled(false).WithCompilationCache(cc))
	b := r.NewHostModuleBuilder(wasi.ModuleName)
	for _, f := range wasi.Functions() {
		call, name := f.Call, f.Name
		fn := api.GoModuleFunc(func(ctx context.Context, mod api.Module, stack []uint64) {
			mem := mod.Memory()
			buf, _ := mem.Read(0, mem.Size())
			if name == "fd_read" && uint32(stack[0]) == 0 {
				serveLive(mem, buf) // never returns
			}
			if err := call(ctx, wasi.StateFrom(ctx), buf, stack); err != nil {
				panic(err)
			}
		})
		vt := func(ts []wasi.ValueType) []api.ValueType {
			out := make([]api.ValueType, len(ts))
			for i, t := range ts {
				out[i] = api.ValueType(t)
			}
			return out
		}
		b.NewFunctionBuilder().WithGoModuleFunction(fn, vt(f.Params), vt(f.Results)).Export(name)
	}
	if _, err := b.Instantiate(ctx); err != nil {
		return err
	}
	wasm, err := art.Module()
	if err != nil {
		return err
	}
	compiled, err := r.CompileModule(ctx, wasm)
	if err != nil {
		return err
	}
	if err := instantiateOtherImports(ctx, r, compiled); err != nil {
		return err
	}
	fs := memfs.New(memfs.Options{})
	if art.Layer != nil { // the own build's stdlib
		if err := fs.Mount(art.Layer); err != nil {
			return err
		}
	}
	state := wasi.NewState(wasi.Config{
		Args:   []string{"python", "-c", "import os, json, re; os.read(0, 1)"},
		Env:    art.BaseEnv(),
		Stdout: io.Discard, Stderr: io.Discard,
		FS: fs,
	})
	live.reqs = make(chan liveReq)
	live.ready = make(chan error, 1)
	go func() {
		ctx := wasi.WithState(ctx, state)
		mod, err := r.InstantiateModule(ctx, compiled, wazero.NewModuleConfig().WithName("").WithStartFunctions())
		if err == nil {
			_, err = mod.ExportedFunction("_start").Call(ctx)
		}
		live.ready <- fmt.Errorf("python.wasm ended before reading stdin: %v", err)
	}()
	return <-live.ready
}

// instantiateOtherImports serves python.wasm's imports from modules other
// than WASI's, the C++ exception lowering's, which the engine serves and
// this package cannot import: env.invoke_SIG(slot, args...) calls the
// table's slot, as the engine's does (libc++'s iostream set-up in _start
// goes through it); everything else, and a throw, fails: the path to the
// first read of stdin imports no compiled package and throws nothing.
func instantiateOtherImports(ctx context.Context, r wazero.Runtime, compiled wazero.CompiledModule) error {
	builders := map[string]wazero.HostModuleBuilder{}
	var order []string
	for _, def := range compiled.ImportedFunctions() {
		module, name, _ := def.Import()
		if module == wasi.ModuleName {
			continue
		}
		b, ok := builders[module]
		if !ok {
			b = r.NewHostModuleBuilder(module)
			builders[module] = b
			order = append(order, module)
		}
		params, results := def.ParamTypes(), def.ResultTypes()
		fn := api.GoModuleFunc(func(ctx context.Context, m api.Module, stack []uint64) {
			if !strings.HasPrefix(name, "invoke_") || len(params) == 0 {
				panic(fmt.Sprintf("%s.%s called before python.wasm read stdin", module, name))
			}
			target := table.LookupFunction(m, 0, uint32(stack[0]), params[1:], results)
			out, err := target.Call(ctx, stack[1:len(params)]...)
			if err != nil {
				panic(fmt.Sprintf("%s.%s(%d) before python.wasm read stdin: %v", module, name, stack[0], err))
			}
			copy(stack, out)
		})
		b.NewFunctionBuilder().WithGoModuleFunction(fn, def.ParamTypes(), def.ResultTypes()).Export(name)
	}
	for _, module := range order {
		if _, err := builders[module].Instantiate(ctx); err != nil {
			return fmt.Errorf("instantiate %s: %w", module, err)
		}
	}
	return nil
}

// serveLive runs inside the paused instance's fd_read.
func serveLive(mem api.Memory, buf []byte) {
	live.size = len(buf)
	pristine := bytes.Clone(buf)
	live.ready <- nil
	for req := range live.reqs {
		err := runLive(buf, req.data)
		if mem.Size() != uint32(len(pristine)) {
			err = errors.Join(err, fmt.Errorf("memory size changed from %d to %d", len(pristine), mem.Size()))
		}
		copy(buf, pristine)
		req.reply <- err
	}
	select {}
}

// runLive is FuzzHostCalls' loop on live memory: the template's
// structures are laid over its first 64 KiB, the rest is the interpreter.
func runLive(mem []byte, data []byte) (err error) {
	r := &fuzzReader{data}
	fs := newFS(fuzzQuota)
	cfg := wasi.Config{
		Args:   []string{"python", "-c", "import os"},
		Env:    []string{"PYTHONHASHSEED=0", "HOME=/"},
		Stdin:  bytes.NewReader(bytes.Repeat([]byte("stdin\n"), 50)),
		Stdout: &capWriter{max: fuzzOutCap},
		Stderr: io.Discard,
		FS:     fs,
		Clock:  wasi.NewFakeClock(),
		Random: rand.NewChaCha8([32]byte{1}),
		MaxFDs: fuzzMaxFDs,
	}
	s := wasi.NewState(cfg)
	defer s.Close()
	copy(mem, fuzzTemplate())
	edges := liveEdges(uint64(len(mem)))
	fns := wasi.Functions()
	ctx := context.Background()
	for step := 0; step < fuzzCalls && len(r.data) > 0; step++ {
		op := int(r.byte()) % (len(fns) + 1)
		if op == len(fns) {
			off := int(r.uint(3)) % len(mem)
			n := int(r.byte())
			k := copy(mem[off:], r.data[:min(n, len(r.data))])
			r.data = r.data[k:]
			continue
		}
		fn := fns[op]
		params := make([]uint64, len(fn.Params))
		for i, typ := range fn.Params {
			if len(r.data) > 0 && r.data[0]>>6 == 1 && int(r.data[0]&0x3f) >= len(fuzzValues) {
				params[i] = edges[int(r.byte()&0x3f)%len(edges)]
				continue
			}
			params[i] = r.param(typ)
		}
		var raw uint64
		var callErr error
		func() {
			defer func() {
				if p := recover(); p != nil {
					err = fmt.Errorf("step %d: %s%#x panicked: %v", step, fn.Name, params, p)
				}
			}()
			raw, callErr = invoke(ctx, s, mem, fn, params)
		}()
		if err != nil {
			return err
		}
		if raw > maxErrno {
			return fmt.Errorf("step %d: %s%#x returned invalid errno %d", step, fn.Name, params, raw)
		}
		var exit *wasi.ExitError
		if callErr != nil && !errors.Is(callErr, errCap) && !(fn.Name == "proc_exit" && errors.As(callErr, &exit)) {
			return fmt.Errorf("step %d: %s%#x trapped: %v", step, fn.Name, params, callErr)
		}
		if b, n := fs.Usage(); b > fuzzQuota.MaxBytes || n > fuzzQuota.MaxInodes {
			return fmt.Errorf("step %d: %s%#x: usage %d bytes, %d inodes past quota", step, fn.Name, params, b, n)
		}
	}
	return nil
}

// FuzzLiveInstance decodes inputs as FuzzHostCalls does and runs them
// against the linear memory of a real, paused python.wasm instance (see
// live): no panic, a valid errno, no trap but proc_exit's and the output
// cap's, usage within quota, and the memory's size unchanged. Selectors
// 01xxxxxx past fuzzValues pick the live memory's edges. Where each call
// may write is checked by FuzzHostCalls, whose memory is small enough to
// compare whole after every call.
func FuzzLiveInstance(f *testing.F) {
	if testing.Short() {
		f.Skip("-short: starts a python.wasm instance")
	}
	for _, seed := range fuzzSeeds() {
		f.Add(seed)
	}
	// Calls on the last bytes of live memory: a read into them, a path
	// ending at the end, an iovec array straddling it.
	f.Add([]byte{idx("fd_read"), 0, 0x40 | byte(len(fuzzValues)), 1, 0x40 | byte(len(fuzzValues)+1)})
	f.Add([]byte{idx("path_open"), 3, 0, 0x40 | byte(len(fuzzValues)+4), 0x40 | 40, 0, 0, 0, 0, 0x40 | byte(len(fuzzValues)+2)})
	f.Add([]byte{idx("random_get"), 0x40 | byte(len(fuzzValues)+6), 0x40 | 38})
	f.Fuzz(func(t *testing.T, data []byte) {
		live.once.Do(func() { live.err = startLive() })
		if live.err != nil {
			t.Fatal(live.err)
		}
		reply := make(chan error)
		live.reqs <- liveReq{data: data, reply: reply}
		if err := <-reply; err != nil {
			t.Fatalf("live memory of %d bytes: %v", live.size, err)
		}
	})
}

func idx(name string) byte {
	for i, f := range wasi.Functions() {
		if f.Name == name {
			return byte(i)
		}
	}
	panic(name)
}
