//go:build !linux

package main

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/airlock-sandbox/airlock"
	"github.com/airlock-sandbox/airlock/server/wire"
)

// Warm servers need Linux: their socket's peer check is SO_PEERCRED.

var warmByDefault bool

var errNotWarm = errors.New("not a warm run")

const envWarm = "AIRLOCK_WARM"

type warmTarget struct{}

func newWarmTarget(*commonFlags, []string, []string) (*warmTarget, error) { return nil, errNotWarm }

func warmTargetFor(*commonFlags, time.Duration, []string, []string) (*warmTarget, error) {
	return nil, errNotWarm
}

const defaultWarmIdle = 5 * time.Minute

type warmRunner struct{ t *warmTarget }

func (warmRunner) run(context.Context, airlock.Request, func(string, []byte)) (*wire.Result, error) {
	return nil, errNotServed
}

func (*warmTarget) start() {}

func (*warmTarget) present() bool { return false }

func (*warmTarget) stop() {}

func (*warmTarget) sock() string { return "" }

func (*warmTarget) runsServed(context.Context) (int, error) { return 0, errNotWarm }

func cmdWarm(context.Context, []string, io.Writer, io.Writer) (int, error) {
	return exitUsage, usageError{"warm servers need Linux"}
}
