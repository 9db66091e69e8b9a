package engine

// LoopChecked tells tests whether m's loops check the interrupt global
// (rather than relying on wazero closing the instance).
func LoopChecked(m *Compiled) bool { c, ok := m.code.(*wzCode); return ok && c.interrupt }

// KeptRewrite is one rewrite Load or LoadResumable keeps, applied now.
type KeptRewrite struct{ Name, Input, Output string }

// RewriteCheck applies, in memory, the rewrites LoadResumable (with entry
// as Options.Entry) and then Load on wazero keep for wasm, and returns
// each one's file name part, input sha256 and output sha256.
func RewriteCheck(wasm []byte, entry []string) ([]KeptRewrite, error) {
	in := sourceOf(wasm)
	resumable := resumableRewrite(entry)
	prepared, _, err := resumable.applyTo(in)
	if err != nil {
		return nil, err
	}
	budgeted, _, err := budgetRewrite.applyTo(prepared)
	if err != nil {
		return nil, err
	}
	return []KeptRewrite{
		{resumable.name, in.digest, prepared.digest},
		{budgetRewrite.name, prepared.digest, budgeted.digest},
	}, nil
}

// SetTrimAbove sets how many private pages a pooled region may hold
// before its reset trims it, until the returned function puts it back.
func SetTrimAbove(pages int) func() {
	old := trimAbove
	trimAbove = pages
	return func() { trimAbove = old }
}

// BackgroundCloses is how many resumed instances are closing in the
// background now, process wide.
func BackgroundCloses() int32 { return backgroundCloses.Load() }

// RewriteRefusals says why wazero's budget rewrite left out the loop
// check or the lazy table for m ("" when it took both).
func RewriteRefusals(m *Compiled) string {
	if c, ok := m.code.(*wzCode); ok {
		return c.refused
	}
	return ""
}

// TableLazy tells tests whether m's function table fills on first use
// (wazero's budget rewrite took it).
func TableLazy(m *Compiled) bool {
	c, ok := m.code.(*wzCode)
	if !ok {
		return false
	}
	_, fill := c.compiled.ExportedFunctions()[tableFillExport]
	return fill
}

// NewSnapshot makes a snapshot from its parts, for tests that forge one.
func NewSnapshot(memory []byte, globals []uint64, unwindBuffer uint32) *Snapshot {
	return newSnapshot(memory, globals, unwindBuffer)
}

// SnapshotRegisters returns a snapshot's globals and unwind buffer address.
func SnapshotRegisters(img *Snapshot) (globals []uint64, unwindBuffer uint32) {
	return img.globals, img.unwindBuffer
}

// IdleRegions returns the regions m keeps idle for runs from img.
func IdleRegions(m *Compiled, img *Snapshot) [][]byte { return m.idleRegions(img) }

// PrivateBytes is privateBytes, for the idle memory tests.
func PrivateBytes(regions [][]byte) ([]int64, bool) { return privateBytes(regions) }

// ReadyInstances is how many instances m has made ahead from img (wazero).
func ReadyInstances(m *Compiled, img *Snapshot) int {
	c, ok := m.code.(*wzCode)
	if !ok {
		return 0
	}
	return len(c.readyMemories(img))
}
