package main

import (
	"bytes"
	"context"
	"testing"
)

func TestExample(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	want := `Run one read-only SQL query with ? parameters; return columns and rows.
table customers ['id', 'name', 'region']
table orders ['id', 'customer_id', 'amount']
south    129.90
north     65.50
east      20.00
refused: sqlite3: attempt to write a readonly database
`
	if out.String() != want {
		t.Fatalf("output:\n%s\nwant:\n%s", out.String(), want)
	}
}
