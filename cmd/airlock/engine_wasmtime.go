//go:build airlock_wasmtime

package main

import _ "github.com/airlock-sandbox/airlock/engine/wasmtime" // the wasmtime engine, with -tags airlock_wasmtime
