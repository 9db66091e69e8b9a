package engine

import (
	"errors"
	"fmt"
)

// Kind names why a run did not complete normally. The strings are part of
// the CLI and JSON contract; package airlock's runs report the same kinds.
type Kind string

const (
	KindTimeout        Kind = "timeout"
	KindMemoryLimit    Kind = "memory_limit"
	KindOutputLimit    Kind = "output_limit"
	KindFSQuota        Kind = "fs_quota"
	KindFuelExhausted  Kind = "fuel_exhausted"
	KindCrash          Kind = "crash"
	KindInvalidRequest Kind = "invalid_request"
	// KindDeadlock: every thread of the program waited with nothing left
	// that could wake one (engine/threads.go).
	KindDeadlock Kind = "deadlock"
)

// Sentinels, one per Kind, for errors.Is (ErrFuelExhausted, the one for
// KindFuelExhausted, is declared with the engine's other run errors).
var (
	ErrTimeout        = errors.New("airlock: timeout")
	ErrMemoryLimit    = errors.New("airlock: memory limit")
	ErrOutputLimit    = errors.New("airlock: output limit")
	ErrFSQuota        = errors.New("airlock: filesystem quota")
	ErrCrash          = errors.New("airlock: guest crashed")
	ErrInvalidRequest = errors.New("airlock: invalid request")
)

var sentinels = map[Kind]error{
	KindTimeout:        ErrTimeout,
	KindMemoryLimit:    ErrMemoryLimit,
	KindOutputLimit:    ErrOutputLimit,
	KindFSQuota:        ErrFSQuota,
	KindFuelExhausted:  ErrFuelExhausted,
	KindCrash:          ErrCrash,
	KindInvalidRequest: ErrInvalidRequest,
	KindDeadlock:       ErrDeadlock,
}

// Error is how a run that the sandbox ended, or refused, reports why. A
// guest that exits with a non-zero status is not an Error: see
// [Result.ExitCode].
//
// errors.Is matches the Kind's sentinel ([ErrTimeout], ...) and the cause;
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
