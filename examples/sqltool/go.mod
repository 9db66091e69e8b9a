module github.com/airlock-sandbox/airlock/examples/sqltool

go 1.26.0

require (
	github.com/airlock-sandbox/airlock v0.0.0
	github.com/ncruces/go-sqlite3 v0.37.0
)

require (
	github.com/ncruces/go-sqlite3-wasm/v6 v6.5.35401 // indirect
	github.com/ncruces/julianday v1.0.0 // indirect
	github.com/tetratelabs/wazero v1.12.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
)

replace github.com/airlock-sandbox/airlock => ../..
