package engine

import (
	"context"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// wazero's compiled code stores a host call's i32 arguments, and the i32
// result of a call from the host, in the low 4 bytes of 8-byte slots
// whose upper halves keep what its stack held before; and it loads a host
// function's first integer result into the guest's register whole. An
// invoke_ returning its slot as it found it gave the guest an i32 with
// garbage upper bits, which compiled code used whole as a memory offset
// past its bounds check: pybind11's import (contourpy) killed the host
// process with a fault. invoke_ must return only the 32 bits.
func TestInvokeReturnsOnly32Bits(t *testing.T) {
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	defer r.Close(ctx)
	// A module whose table slot 0 holds first(a, b) = a, and exporting
	// __stack_pointer, all invoke_ needs to call it.
	guest := []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
		0x01, 0x07, 0x01, 0x60, 0x02, 0x7f, 0x7f, 0x01, 0x7f, // type (i32, i32) -> i32
		0x03, 0x02, 0x01, 0x00, // function 0 of that type
		0x04, 0x04, 0x01, 0x70, 0x00, 0x01, // table of 1 funcref
		0x06, 0x07, 0x01, 0x7f, 0x01, 0x41, 0x80, 0x20, 0x0b, // mutable global i32 = 4096
		0x07, 0x13, 0x01, 0x0f, '_', '_', 's', 't', 'a', 'c', 'k', '_', 'p', 'o', 'i', 'n', 't', 'e', 'r', 0x03, 0x00,
		0x09, 0x07, 0x01, 0x00, 0x41, 0x00, 0x0b, 0x01, 0x00, // slot 0 = function 0
		0x0a, 0x06, 0x01, 0x04, 0x00, 0x20, 0x00, 0x0b, // local.get 0
	}
	mod, err := r.Instantiate(ctx, guest)
	if err != nil {
		t.Fatal(err)
	}
	i32 := api.ValueTypeI32
	invoke := wzInvoke(&wzInvokeType{name: "invoke_iii", params: []api.ValueType{i32, i32}, results: []api.ValueType{i32}})
	ctx = context.WithValue(ctx, runKey{}, &runState{})
	const dirt = 0x0080_0000 << 32 // what the slots' upper halves held
	stack := []uint64{dirt | 0, dirt | 5, dirt | 7}
	invoke(ctx, mod, stack)
	if stack[0] != 5 {
		t.Fatalf("invoke_iii(0, 5, 7) of first(a, b) = a returned %#x; want 5, its upper 32 bits clear", stack[0])
	}
}
