package airlock

import (
	"errors"

	"github.com/airlock-sandbox/airlock/hostfuncs"
	"github.com/airlock-sandbox/airlock/wasi"
)

// WithTools registers host tools: Go functions sandboxed Python may call
// (import airlock; airlock.tools.NAME(...)). New reports a bad or duplicate
// name. Each run sees the tools its Request.Tools allows, through its own
// device at /dev/airlock; see package tools.
func WithTools(tools ...hostfuncs.Tool) Option {
	return func(c *config) { c.tools = append(c.tools, tools...) }
}

// Tools lists the registered host tools, sorted by name.
func (sb *Sandbox) Tools() []string { return sb.cfg.registry.Names() }

// hostDevices sets up the run's host tool device, or none when no tool is
// registered (a call then fails in the guest with UnknownToolError).
func (sb *Sandbox) hostDevices(req *Request, l Limits, onCall func(hostfuncs.CallRecord)) (map[string]wasi.Device, *Error) {
	reg := sb.cfg.registry
	if reg.Len() == 0 {
		if len(req.Tools) > 0 {
			return nil, newError(KindInvalidRequest, hostfuncs.ErrUnknownTool, "unknown host tool %q: none is registered", req.Tools[0])
		}
		return nil, nil
	}
	if l.HostPayload > hostfuncs.MaxPayloadLimit {
		return nil, newError(KindInvalidRequest, nil, "the host payload limit is at most %d bytes", hostfuncs.MaxPayloadLimit)
	}
	dev, err := reg.NewDevice(hostfuncs.RunConfig{
		Allow: req.Tools, Values: req.Values, MaxCalls: l.HostCalls, MaxPayload: int(l.HostPayload), OnCall: onCall,
	})
	if err != nil {
		if errors.Is(err, hostfuncs.ErrUnknownTool) {
			return nil, newError(KindInvalidRequest, err, "%v", err)
		}
		return nil, newError(KindInvalidRequest, err, "host tools: %v", err)
	}
	return map[string]wasi.Device{hostfuncs.DevicePath: dev}, nil
}
