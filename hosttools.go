package airlock

import (
	"errors"

	"github.com/airlock-sandbox/airlock/hostfuncs"
	"github.com/airlock-sandbox/airlock/wasi"
)

// WithHostFuncs registers host functions: Go functions sandboxed Python
// may call (import airlock; airlock.tools.NAME(...): the guest calls them
// tools). New reports a bad or duplicate name. Each run sees the functions
// its Request.HostFuncs allows, through its own device at /dev/airlock;
// see package [hostfuncs].
func WithHostFuncs(fns ...hostfuncs.Function) Option {
	return func(c *config) { c.hostFuncs = append(c.hostFuncs, fns...) }
}

// WithTools is WithHostFuncs' old name.
//
// Deprecated: use WithHostFuncs.
func WithTools(tools ...hostfuncs.Function) Option { return WithHostFuncs(tools...) }

// HostFuncs lists the registered host functions, sorted by name.
func (sb *Sandbox) HostFuncs() []string { return sb.cfg.registry.Names() }

// Tools is HostFuncs' old name.
//
// Deprecated: use HostFuncs.
func (sb *Sandbox) Tools() []string { return sb.HostFuncs() }

// orOld is a list given under its new name, else under its deprecated
// one (Request.Tools, ...).
func orOld(list, old []string) []string {
	if list != nil {
		return list
	}
	return old
}

// hostDevices sets up the run's host tool device, or none when no tool is
// registered (a call then fails in the guest with UnknownToolError).
func (sb *Sandbox) hostDevices(req *Request, l Limits, onCall func(hostfuncs.CallRecord)) (map[string]wasi.Device, *Error) {
	reg := sb.cfg.registry
	if reg.Len() == 0 {
		if allow := orOld(req.HostFuncs, req.Tools); len(allow) > 0 {
			return nil, newError(KindInvalidRequest, hostfuncs.ErrUnknownFunc, "unknown host function %q: none is registered", allow[0])
		}
		return nil, nil
	}
	if l.HostPayload > hostfuncs.MaxPayloadLimit {
		return nil, newError(KindInvalidRequest, nil, "the host payload limit is at most %d bytes", hostfuncs.MaxPayloadLimit)
	}
	dev, err := reg.NewDevice(hostfuncs.RunConfig{
		Allow: orOld(req.HostFuncs, req.Tools), Values: req.Values, MaxCalls: l.HostCalls, MaxPayload: int(l.HostPayload), OnCall: onCall,
	})
	if err != nil {
		if errors.Is(err, hostfuncs.ErrUnknownFunc) {
			return nil, newError(KindInvalidRequest, err, "%v", err)
		}
		return nil, newError(KindInvalidRequest, err, "host functions: %v", err)
	}
	return map[string]wasi.Device{hostfuncs.DevicePath: dev}, nil
}
