package pkglist

import (
	"flag"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite docs/packages.md's table from the list")

//go:generate go test -run TestDocTable -update .

const (
	docPath    = "../../docs/packages.md"
	tableStart = "<!-- packages table: generated from internal/pkglist/packages.txt by go generate ./internal/pkglist -->\n"
	tableEnd   = "<!-- end of packages table -->\n"
)

// docs/packages.md's table is the list's: go generate ./internal/pkglist
// rewrites it, and this fails while it is stale.
func TestDocTable(t *testing.T) {
	data, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	start := strings.Index(doc, tableStart)
	end := strings.Index(doc, tableEnd)
	if start < 0 || end < start {
		t.Fatalf("%s has no table between %q and %q", docPath, tableStart, tableEnd)
	}
	want := doc[:start+len(tableStart)] + Markdown() + doc[end:]
	if want == doc {
		return
	}
	if *update {
		if err := os.WriteFile(docPath, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("%s's package table is stale: run go generate ./internal/pkglist", docPath)
}
