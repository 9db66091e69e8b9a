package airlock_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestLayoutArrows keeps the packages' imports pointing one way:
// cmd → server → airlock → python, hostfuncs → engine → wasi → memfs, with
// the client and the wire types free of the rest (docs/layout.md). A
// package may import one of ours only of a lower rank; internal packages
// are free to serve any of them. Package engine exports no snapshot
// internals: its callers hold an opaque engine.Snapshot, and the image
// type, its regions and pools stay inside; nor what only an engine
// implements or calls (engine/wasmtime reaches them through
// engine/internal/backend).
func TestLayoutArrows(t *testing.T) {
	const mod = "github.com/airlock-sandbox/airlock"
	rank := map[string]int{
		"cmd/airlock": 9, "bench/charts": 9,
		"server": 8, "bench": 8,
		"":       7,
		"python": 6, "hostfuncs": 6,
		"engine/wasmtime": 5,
		"engine":          4,
		"wasi":            3, "wasi/memfs": 2, "wasi/errno": 1,
		"server/client": 1, "server/wire": 0,
	}
	engineExportsNoImage(t)
	out, err := exec.Command("go", "list", "-tags", "airlock_wasmtime", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "./...").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		from := strings.TrimPrefix(strings.TrimPrefix(fields[0], mod), "/")
		r, ranked := rank[from]
		if !ranked {
			continue // internal packages and tools
		}
		for _, imp := range fields[1:] {
			if !strings.HasPrefix(imp, mod) {
				continue
			}
			to := strings.TrimPrefix(strings.TrimPrefix(imp, mod), "/")
			if rt, ok := rank[to]; ok && rt >= r {
				t.Errorf("%s imports %s: the arrows point the other way", fields[0], imp)
			}
			if from == "server/client" || from == "server/wire" {
				if to != "server/wire" {
					t.Errorf("%s imports %s: a client must compile nothing of the server or the sandbox", fields[0], imp)
				}
			}
		}
	}
}

// engineExportsNoImage fails for an exported name of package engine that
// hands out a snapshot's insides (an image type, its memory regions or
// their pools) or that only an engine's implementation needs (its
// interfaces, the run's state, the exception imports' plumbing).
func engineExportsNoImage(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("engine", "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("engine sources: %v (%d files)", err, len(files))
	}
	backendOnly := map[string]bool{
		"Code": true, "Instance": true, "RunState": true, "SetWasmtime": true, "Fill": true,
		"EHFunc": true, "EHFuncs": true, "EHImport": true,
		"StackPointerExport": true, "SetThrewExport": true, "TableExport": true,
	}
	forbidden := func(name string) bool {
		return name == "Image" || name == "NewImage" || name == "ImageRegion" || name == "ReadDeltaRecord" ||
			name == "PrivateBytes" || strings.Contains(name, "Pool") || strings.Contains(name, "Region") ||
			backendOnly[name]
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				// Of methods, the ones only an engine calls (the run's
				// state's are on an unexported type, so never public).
				if d.Name.IsExported() && (d.Recv == nil && forbidden(d.Name.Name) || d.Recv != nil && backendOnly[d.Name.Name]) {
					t.Errorf("%s: engine exports %s: it stays in the package or engine/internal/backend", fset.Position(d.Pos()), d.Name.Name)
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch sp := spec.(type) {
					case *ast.TypeSpec:
						if sp.Name.IsExported() && forbidden(sp.Name.Name) {
							t.Errorf("%s: engine exports type %s: it stays in the package or engine/internal/backend", fset.Position(sp.Pos()), sp.Name.Name)
						}
					case *ast.ValueSpec:
						for _, n := range sp.Names {
							if n.IsExported() && forbidden(n.Name) {
								t.Errorf("%s: engine exports %s: it stays in the package or engine/internal/backend", fset.Position(n.Pos()), n.Name)
							}
						}
					}
				}
			}
		}
	}
}
