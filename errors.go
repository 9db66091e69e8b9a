package airlock

import (
	"errors"
	"fmt"

	"github.com/airlock-sandbox/airlock/python"
)

// Kind names why a run did not complete normally. The strings are part of
// the CLI and JSON contract.
type Kind string

const (
	KindTimeout        Kind = "timeout"
	KindMemoryLimit    Kind = "memory_limit"
	KindOutputLimit    Kind = "output_limit"
	KindFSQuota        Kind = "fs_quota"
	KindFuelExhausted  Kind = "fuel_exhausted"
	KindCrash          Kind = "crash"
	KindInvalidRequest Kind = "invalid_request"
)

// Sentinels, one per Kind, for errors.Is.
var (
	ErrTimeout        = errors.New("airlock: timeout")
	ErrMemoryLimit    = errors.New("airlock: memory limit")
	ErrOutputLimit    = errors.New("airlock: output limit")
	ErrFSQuota        = errors.New("airlock: filesystem quota")
	ErrFuelExhausted  = errors.New("airlock: fuel exhausted")
	ErrCrash          = errors.New("airlock: guest crashed")
	ErrInvalidRequest = errors.New("airlock: invalid request")
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

var sentinels = map[Kind]error{
	KindTimeout:        ErrTimeout,
	KindMemoryLimit:    ErrMemoryLimit,
	KindOutputLimit:    ErrOutputLimit,
	KindFSQuota:        ErrFSQuota,
	KindFuelExhausted:  ErrFuelExhausted,
	KindCrash:          ErrCrash,
	KindInvalidRequest: ErrInvalidRequest,
}

// Error is how a run that the sandbox ended, or refused, reports why. A
// guest that exits with a non-zero status is not an Error: see
// Result.ExitCode.
//
// errors.Is matches the Kind's sentinel (ErrTimeout, ...) and the cause;
// errors.As finds *Error.
type Error struct {
	Kind    Kind
	Message string
	// Err is the underlying cause, if any (a context error, a trap).
	Err error
}

func (e *Error) Error() string {
	if e.Message == "" {
		return string(e.Kind)
	}
	return fmt.Sprintf("%s: %s", e.Kind, e.Message)
}

func (e *Error) Unwrap() []error {
	errs := []error{sentinels[e.Kind]}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	return errs
}

func newError(kind Kind, cause error, format string, args ...any) *Error {
	return &Error{Kind: kind, Message: fmt.Sprintf(format, args...), Err: cause}
}
