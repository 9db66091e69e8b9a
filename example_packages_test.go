package airlock_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/airlock-sandbox/airlock"
)

func ExampleWithPackages() {
	ctx := context.Background()
	// A directory holding __init__.py imports by its name; a wheel or a
	// zip would do as well.
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	pkg := filepath.Join(dir, "shapes")
	os.Mkdir(pkg, 0o755)
	os.WriteFile(filepath.Join(pkg, "__init__.py"), []byte("def area(w, h):\n    return w * h\n"), 0o644)

	sb, err := airlock.New(ctx, airlock.WithPackages(pkg), airlock.WithPreimport("shapes"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sb.Close(ctx)
	res, err := sb.Run(ctx, airlock.Request{Code: "import sys, shapes\nprint('shapes' in sys.modules, shapes.area(3, 4))"})
	if err != nil {
		fmt.Println("sandbox error:", err)
		return
	}
	fmt.Print(string(res.Stdout))
	// Output:
	// True 12
}
