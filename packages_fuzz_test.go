package airlock

import (
	"archive/zip"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// A wheel or zip given as a package (WithPackages, a request's packages)
// is whatever its file holds: loadPackage answers with a layer holding the
// file as it is, or an error wrapping ErrInvalidPackage or
// ErrCompiledExtension.
func FuzzPackageZip(f *testing.F) {
	for _, entries := range [][]string{{"m/__init__.py", "X = 1\n"}, {"m/_speedups.so", "\x7fELF"}, {}} {
		var buf bytes.Buffer
		zw := zip.NewWriter(&buf)
		for i := 0; i+1 < len(entries); i += 2 {
			w, _ := zw.Create(entries[i])
			w.Write([]byte(entries[i+1]))
		}
		zw.Close()
		f.Add(buf.Bytes())
	}
	f.Add([]byte("PK\x05\x06" + string(make([]byte, 18))))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "p-1.0-py3-none-any.whl")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		p, err := loadPackage(path)
		if err != nil {
			if !errors.Is(err, ErrInvalidPackage) && !errors.Is(err, ErrCompiledExtension) {
				t.Fatalf("loadPackage: %v, want ErrInvalidPackage or ErrCompiledExtension", err)
			}
			return
		}
		if p.sysPath != PackagesDir+"/p-1.0-py3-none-any.whl" {
			t.Fatalf("accepted as %q", p.sysPath)
		}
	})
}
