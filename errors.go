package airlock

import (
	"errors"
	"fmt"

	"github.com/airlock-sandbox/airlock/engine"
	"github.com/airlock-sandbox/airlock/python"
)

// Kind names why a run did not complete normally. The strings are part of
// the CLI and JSON contract. It is package engine's, whose module runs
// report the same kinds.
type Kind = engine.Kind

const (
	KindTimeout        = engine.KindTimeout
	KindMemoryLimit    = engine.KindMemoryLimit
	KindOutputLimit    = engine.KindOutputLimit
	KindFSQuota        = engine.KindFSQuota
	KindFuelExhausted  = engine.KindFuelExhausted
	KindCrash          = engine.KindCrash
	KindInvalidRequest = engine.KindInvalidRequest
	KindDeadlock       = engine.KindDeadlock
)

// Sentinels, one per Kind, for errors.Is: package engine's values, so a
// module run's errors match them too.
var (
	ErrTimeout        = engine.ErrTimeout
	ErrMemoryLimit    = engine.ErrMemoryLimit
	ErrOutputLimit    = engine.ErrOutputLimit
	ErrFSQuota        = engine.ErrFSQuota
	ErrFuelExhausted  = engine.ErrFuelExhausted
	ErrCrash          = engine.ErrCrash
	ErrInvalidRequest = engine.ErrInvalidRequest
	ErrDeadlock       = engine.ErrDeadlock
)

// ErrEngineUnavailable is New's error for an engine this binary lacks.
var ErrEngineUnavailable = errors.New("airlock: engine not available")

// ErrInvalidOption is New's error for an option no Sandbox can have (a
// negative limit, a session key too short, ...); the message names the
// option. Options are checked once, there, not on every run.
var ErrInvalidOption = errors.New("airlock: invalid option")

// New's errors about the Python build. They are the internal package's own
// values, so errors.Is matches whichever layer wrapped them.
var (
	// ErrNoOwnBuild: the own CPython build is not in the cache directory.
	ErrNoOwnBuild = python.ErrNoOwnBuild
	// ErrNotFetched: the npm build was asked for and is not fetched.
	ErrNotFetched = python.ErrNotFetched
	// ErrChecksum: a build's files are not the ones recorded for it.
	ErrChecksum = python.ErrChecksum
	// ErrNotAsyncified: snapshots were asked for and the build has no
	// asyncified module (`airlock setup` makes it).
	ErrNotAsyncified = python.ErrNotAsyncified
	// ErrNoWasmOpt: making the asyncified module needs Binaryen's wasm-opt.
	ErrNoWasmOpt = python.ErrNoWasmOpt
)

// Error is how a run that the sandbox ended, or refused, reports why (see
// [engine.Error]). A guest that exits with a non-zero status is not an
// Error: see Result.ExitCode.
type Error = engine.Error

func newError(kind Kind, cause error, format string, args ...any) *Error {
	return &Error{Kind: kind, Message: fmt.Sprintf(format, args...), Err: cause}
}
