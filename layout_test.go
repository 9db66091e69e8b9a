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
// type, its regions and pools stay inside (engine/wasmtime reaches the
// regions through engine/internal/snaphook).
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
// hands out a snapshot's insides: an image type, its memory regions or
// their pools.
func engineExportsNoImage(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("engine", "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("engine sources: %v (%d files)", err, len(files))
	}
	forbidden := func(name string) bool {
		return name == "Image" || name == "NewImage" || name == "ImageRegion" || name == "ReadDeltaRecord" ||
			name == "PrivateBytes" || strings.Contains(name, "Pool") || strings.Contains(name, "Region")
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
				if d.Recv == nil && d.Name.IsExported() && forbidden(d.Name.Name) {
					t.Errorf("%s: engine exports %s: snapshot internals stay in the package", fset.Position(d.Pos()), d.Name.Name)
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					if ts, ok := spec.(*ast.TypeSpec); ok && ts.Name.IsExported() && forbidden(ts.Name.Name) {
						t.Errorf("%s: engine exports type %s: snapshot internals stay in the package", fset.Position(ts.Pos()), ts.Name.Name)
					}
				}
			}
		}
	}
}
