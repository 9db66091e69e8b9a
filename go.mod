module github.com/airlock-sandbox/airlock

go 1.26.0

require (
	github.com/tetratelabs/wazero v1.12.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
)
