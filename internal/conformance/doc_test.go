// Package airlock_test here is the conformance suite of package airlock:
// black-box tests that run real Python on every engine compiled in
// (engines_test.go). It lives apart from the root package, whose tests
// keep only the examples and the internal tests, because go mod tidy in a
// program that imports airlock looks at the root package's tests too: a
// suite that links the wasmtime engine would have every such program
// download wasmtime-go.
package airlock_test
