// Command sqltool shows a host tool in use: sandboxed Python queries a real
// SQLite database through database/sql, read-only, and never sees the file.
//
//	cd examples/sqltool && go run .
//
// The database is created in a temporary directory on the host; the guest
// only reaches it through the two tools registered below.
package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	_ "github.com/ncruces/go-sqlite3/driver"

	"github.com/airlock-sandbox/airlock"
	"github.com/airlock-sandbox/airlock/hostfuncs"
)

// program is the untrusted code: it only knows the tools' names.
const program = `
import airlock
from collections import defaultdict

print(airlock.tools.query.__doc__.splitlines()[0])
for t in airlock.tools.tables():
    print("table", t["name"], t["columns"])

res = airlock.tools.query(
    "SELECT c.region, o.amount FROM orders o JOIN customers c ON c.id = o.customer_id WHERE o.amount >= ?",
    [20])
by_region = defaultdict(float)
for region, amount in res["rows"]:
    by_region[region] += amount
for region, total in sorted(by_region.items(), key=lambda kv: -kv[1]):
    print(f"{region:6} {total:8.2f}")

try:
    airlock.tools.query("DELETE FROM orders")
except airlock.HostError as e:
    print("refused:", e)
`

type queryArgs struct {
	SQL    string `json:"sql"`
	Params []any  `json:"params,omitempty"`
}

type queryResult struct {
	Columns []string `json:"columns"`
	Rows    [][]any  `json:"rows"`
}

type table struct {
	Name    string   `json:"name"`
	Columns []string `json:"columns"`
}

const maxRows = 1000

// tools exposes db (opened read-only) to the guest.
func sqlTools(db *sql.DB) []hostfuncs.Function {
	query := func(ctx context.Context, in queryArgs) (queryResult, error) {
		rows, err := db.QueryContext(ctx, in.SQL, in.Params...)
		if err != nil {
			return queryResult{}, err
		}
		defer rows.Close()
		cols, err := rows.Columns()
		if err != nil {
			return queryResult{}, err
		}
		res := queryResult{Columns: cols, Rows: [][]any{}}
		for rows.Next() {
			if len(res.Rows) == maxRows {
				return queryResult{}, fmt.Errorf("more than %d rows: add a LIMIT", maxRows)
			}
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				return queryResult{}, err
			}
			for i, v := range vals {
				if b, ok := v.([]byte); ok {
					vals[i] = string(b)
				}
			}
			res.Rows = append(res.Rows, vals)
		}
		return res, rows.Err()
	}
	tables := func(ctx context.Context, _ struct{}) ([]table, error) {
		res, err := query(ctx, queryArgs{SQL: "SELECT m.name, p.name FROM sqlite_schema m JOIN pragma_table_info(m.name) p WHERE m.type = 'table' ORDER BY m.name, p.cid"})
		if err != nil {
			return nil, err
		}
		var out []table
		for _, r := range res.Rows {
			name, col := r[0].(string), r[1].(string)
			if len(out) == 0 || out[len(out)-1].Name != name {
				out = append(out, table{Name: name})
			}
			out[len(out)-1].Columns = append(out[len(out)-1].Columns, col)
		}
		return out, nil
	}
	return []hostfuncs.Function{
		hostfuncs.Func("query", "Run one read-only SQL query with ? parameters; return columns and rows.", query),
		hostfuncs.Func("tables", "List the database's tables and their columns.", tables),
	}
}

// createDB writes a small shop database at path.
func createDB(ctx context.Context, path string) error {
	db, err := sql.Open("sqlite3", "file:"+path)
	if err != nil {
		return err
	}
	defer db.Close()
	stmts := []string{
		`CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, region TEXT NOT NULL)`,
		`CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL REFERENCES customers(id), amount REAL NOT NULL)`,
		`INSERT INTO customers VALUES (1, 'Ann', 'north'), (2, 'Bob', 'south'), (3, 'Chloé', 'north'), (4, 'Dmitri', 'east')`,
		`INSERT INTO orders (customer_id, amount) VALUES (1, 25.5), (1, 10), (2, 99.9), (3, 40), (4, 20), (4, 5.25), (2, 30)`,
	}
	for _, s := range stmts {
		if _, err := db.ExecContext(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

func run(ctx context.Context, stdout io.Writer) error {
	dir, err := os.MkdirTemp("", "airlock-sqltool-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "shop.db")
	if err := createDB(ctx, path); err != nil {
		return fmt.Errorf("create database: %w", err)
	}
	db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
	if err != nil {
		return err
	}
	defer db.Close()

	sb, err := airlock.New(ctx, airlock.WithHostFuncs(sqlTools(db)...), airlock.WithNotice(os.Stderr))
	if err != nil {
		return err
	}
	defer sb.Close(ctx)
	res, err := sb.Run(ctx, airlock.Request{Code: program, Limits: airlock.Limits{Timeout: time.Minute}})
	stdout.Write(res.Stdout)
	os.Stderr.Write(res.Stderr)
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return errors.New("the program failed")
	}
	return nil
}

func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "sqltool:", err)
		os.Exit(1)
	}
}
