package engine

// LoopChecked tells tests whether m's loops check the interrupt global
// (rather than relying on wazero closing the instance).
func LoopChecked(m *Module) bool { c, ok := m.code.(*wzCode); return ok && c.interrupt }
