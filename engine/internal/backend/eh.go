package backend

import (
	"fmt"
	"strings"

	"github.com/airlock-sandbox/airlock/wasi"
)

// The names the exception lowering and the guest runtime use (package
// engine's cxxeh.go tells the protocol).
const (
	invokeModule = "env"
	invokePrefix = "invoke_"
	unwindModule = "airlock_eh"
	unwindName   = "unwind"
	// The exports invoke_ needs: the stack pointer to restore, the
	// guest's setThrew, and (wasmtime, which reaches a table only through
	// an export) the function table.
	StackPointerExport = "__stack_pointer"
	SetThrewExport     = "setThrew"
	TableExport        = "__indirect_function_table"
)

// EHImport tells whether module.name is one of the exception runtime's
// imports that the host serves.
func EHImport(module, name string) bool {
	return module == invokeModule && strings.HasPrefix(name, invokePrefix) && len(name) > len(invokePrefix) ||
		module == unwindModule && name == unwindName
}

// EHFunc is one exception import to serve, with its type.
type EHFunc struct {
	Module, Name    string
	Params, Results []wasi.ValueType
	// Unwind is airlock_eh.unwind; otherwise it is an invoke_, which calls
	// a function of type Params[1:] -> Results.
	Unwind bool
}

// EHFuncs picks the exception imports out of a module's function imports
// and checks their types: an invoke_ takes an i32 slot first and has at
// most one result; unwind takes nothing and returns an i32.
func EHFuncs(imports []EHFunc) ([]EHFunc, error) {
	var out []EHFunc
	for _, f := range imports {
		if !EHImport(f.Module, f.Name) {
			continue
		}
		if f.Module == unwindModule {
			if len(f.Params) != 0 || len(f.Results) != 1 || f.Results[0] != wasi.I32 {
				return nil, fmt.Errorf("engine: %s.%s must be () -> i32", f.Module, f.Name)
			}
			f.Unwind = true
		} else if len(f.Params) == 0 || f.Params[0] != wasi.I32 || len(f.Results) > 1 {
			return nil, fmt.Errorf("engine: %s.%s must take an i32 table slot first and return at most one value", f.Module, f.Name)
		}
		out = append(out, f)
	}
	return out, nil
}
