// Package snaphook gives package engine/wasmtime what it needs of a
// snapshot's insides (its pooled memory regions) without package engine
// exporting them to every user: engine fills the hooks in at init, and
// only packages under engine/ can import this one.
package snaphook

var (
	// Region takes a memory region for a run resumed from snapshot (an
	// *engine.Snapshot), pooled and reset per snapshot; free gives it back.
	Region func(snapshot any, size uint64, guarded bool) (buf []byte, free func([]byte))
	// New makes a snapshot (an *engine.Snapshot) of memory alone, for tests.
	New func(memory []byte) any
)
