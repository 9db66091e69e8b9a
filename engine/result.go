package engine

import "time"

// Limits bound one module run. Zero fields take the defaults
// ([ModuleOptions.Limits], over [DefaultLimits]).
type Limits struct {
	// Timeout is the wall-clock budget of the run.
	Timeout time.Duration
	// Memory caps the guest's linear memory, in bytes.
	Memory int64
	// Output caps stdout and stderr, each, in bytes.
	Output int64
	// FSBytes caps the total size of files in the guest's filesystem.
	FSBytes int64
	// FSFiles caps the number of files and directories in it.
	FSFiles int
	// Fuel caps the WebAssembly instructions the run may execute (about
	// one unit each): a CPU budget that gives the same verdict on any
	// machine. Running out ends the run with KindFuelExhausted. Only the
	// wasmtime engine meters fuel; 0 is no cap.
	Fuel int64
}

// DefaultLimits are used where neither the request nor the module's
// options say otherwise. It is a function so that no caller can change
// them for the whole process.
func DefaultLimits() Limits {
	return Limits{
		Timeout: 10 * time.Second,
		Memory:  256 << 20,
		Output:  1 << 20,
		FSBytes: 64 << 20,
		FSFiles: 10000,
	}
}

func (l Limits) withDefaults(d Limits) Limits {
	if l.Timeout == 0 {
		l.Timeout = d.Timeout
	}
	if l.Memory == 0 {
		l.Memory = d.Memory
	}
	if l.Output == 0 {
		l.Output = d.Output
	}
	if l.FSBytes == 0 {
		l.FSBytes = d.FSBytes
	}
	if l.FSFiles == 0 {
		l.FSFiles = d.FSFiles
	}
	if l.Fuel == 0 {
		l.Fuel = d.Fuel
	}
	return l
}

// negative tells whether a limit is below zero, which no run accepts.
func (l Limits) negative() bool {
	return l.Timeout < 0 || l.Memory < 0 || l.Output < 0 || l.FSBytes < 0 || l.FSFiles < 0 || l.Fuel < 0
}

// Result is what a module run produced. A Result is returned for every
// run, also when err is non-nil, so partial output is never lost.
type Result struct {
	Stdout, Stderr []byte
	// StdoutTruncated and StderrTruncated tell that the output cap cut a stream.
	StdoutTruncated, StderrTruncated bool
	// ExitCode is the guest's exit status (0 also when Error is set and the
	// guest did not get to exit).
	ExitCode int
	// Error is non-nil when the sandbox ended or refused the run; it is the
	// error Run returns.
	Error *Error
	// Duration is the run's wall-clock time, instance creation included.
	Duration time.Duration
	// Files are those the run created or changed, sorted by path.
	Files []File
	// FilesOmitted counts the files Files leaves out: those under a path
	// longer than 4096 bytes, which only nesting directories through
	// handles or renames can make. Zero unless a run made such a tree.
	FilesOmitted int
	// PeakMemory is the largest linear memory the guest reached, in bytes.
	PeakMemory int64
	// Fuel is the fuel the run consumed on the wasmtime engine, which
	// meters every run; always 0 on wazero, which does not meter.
	Fuel int64
}

// File is a file a run left in its filesystem.
type File struct {
	Path string // absolute guest path
	Size int64
	Data []byte
}
