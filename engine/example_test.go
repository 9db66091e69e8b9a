package engine_test

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"time"

	"github.com/airlock-sandbox/airlock/engine"
	"github.com/airlock-sandbox/airlock/wasi"
)

// Any WASI module runs with the sandbox's isolation: compiled once, a
// fresh instance per run, a memory-only filesystem and the run's limits.
func Example() {
	ctx := context.Background()
	mod, err := engine.LoadModule(ctx, "hello.wasm", helloModule("hello from a fresh instance\n"), engine.ModuleOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer mod.Close(ctx)

	res, err := mod.Run(ctx, engine.ModuleRequest{Limits: engine.Limits{Timeout: time.Second, Memory: 1 << 20}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s", res.Stdout)
	fmt.Println("exit", res.ExitCode)
	// Output:
	// hello from a fresh instance
	// exit 0
}

// Below LoadModule, a compiled module runs with the WASI world of package
// wasi and nothing else of the host.
func ExampleLoad() {
	ctx := context.Background()
	mod, err := engine.Load(ctx, helloModule("hello from a fresh instance\n"), engine.Options{Engine: engine.EngineWazero})
	if err != nil {
		log.Fatal(err)
	}
	defer mod.Close(ctx)

	for range 2 {
		var stdout bytes.Buffer
		state := wasi.NewState(wasi.Config{Stdout: &stdout})
		out, err := mod.Run(ctx, engine.RunSpec{WASI: state, MemoryLimit: 1 << 20})
		state.Close()
		fmt.Print(stdout.String())
		fmt.Println(out.ExitCode, err)
	}
	// Output:
	// hello from a fresh instance
	// 0 <nil>
	// hello from a fresh instance
	// 0 <nil>
}

// helloModule is a WebAssembly module whose _start writes msg to fd 1
// with fd_write: an iovec at 0 points at msg at 16.
func helloModule(msg string) []byte {
	section := func(id byte, content ...byte) []byte { return append([]byte{id, byte(len(content))}, content...) }
	name := func(s string) []byte { return append([]byte{byte(len(s))}, s...) }
	var imp []byte
	imp = append(imp, 1)
	imp = append(imp, name(wasi.ModuleName)...)
	imp = append(imp, name("fd_write")...)
	imp = append(imp, 0x00, 0) // a function of type 0
	var exp []byte
	exp = append(exp, 2)
	exp = append(append(exp, name("memory")...), 0x02, 0)
	exp = append(append(exp, name("_start")...), 0x00, 1)
	data := append([]byte{16, 0, 0, 0, byte(len(msg)), 0, 0, 0}, make([]byte, 8)...) // iovec, then nwritten
	data = append(data, msg...)
	seg := append([]byte{1, 0, 0x41, 0, 0x0b, byte(len(data))}, data...)       // one active segment at 0
	body := []byte{0, 0x41, 1, 0x41, 0, 0x41, 1, 0x41, 8, 0x10, 0, 0x1a, 0x0b} // fd_write(1, 0, 1, 8); drop
	var m []byte
	m = append(m, 0x00, 'a', 's', 'm', 1, 0, 0, 0)
	m = append(m, section(1, 2, 0x60, 4, 0x7f, 0x7f, 0x7f, 0x7f, 1, 0x7f, 0x60, 0, 0)...)
	m = append(m, section(2, imp...)...)
	m = append(m, section(3, 1, 1)...)
	m = append(m, section(5, 1, 0, 1)...)
	m = append(m, section(7, exp...)...)
	m = append(m, section(10, append([]byte{1, byte(len(body))}, body...)...)...)
	m = append(m, section(11, seg...)...)
	return m
}
