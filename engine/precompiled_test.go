package engine_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-sandbox/airlock/internal/filehash"

	"github.com/airlock-sandbox/airlock/engine"
)

// writtenPack compiles wasm into a cache of its own and returns its pack.
func writtenPack(t *testing.T, wasm []byte) []byte {
	t.Helper()
	ctx := context.Background()
	m, err := engine.Load(ctx, wasm, engine.Options{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(ctx)
	var pack bytes.Buffer
	if err := m.WritePrecompiled(&pack); err != nil {
		t.Fatal(err)
	}
	return pack.Bytes()
}

// regularFiles lists the regular files under dir.
func regularFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// A pack installed into an empty cache is what Load then uses: no compile
// notice, and wazero reads the installed file instead of writing its own.
func TestPrecompiledPackSkipsTheCompile(t *testing.T) {
	wasm := exitModule(7)
	pack := writtenPack(t, wasm)
	dir := t.TempDir()
	if ok, err := engine.InstallPrecompiled(bytes.NewReader(pack), dir); err != nil || !ok {
		t.Fatalf("install: %v, %v", ok, err)
	}
	code, _ := filepath.Glob(filepath.Join(dir, "wazero-*", "*"))
	if len(code) != 1 {
		t.Fatalf("installed %v", regularFiles(t, dir))
	}
	before, err := os.Stat(code[0])
	if err != nil {
		t.Fatal(err)
	}
	var notice bytes.Buffer
	if got := runExit(t, wasm, engine.Options{CacheDir: dir, Notice: &notice}); got != 7 {
		t.Fatalf("exit %d, want 7", got)
	}
	if notice.Len() != 0 {
		t.Errorf("Load announced a compile: %q", notice.String())
	}
	after, err := os.Stat(code[0])
	if err != nil || !os.SameFile(before, after) || !after.ModTime().Equal(before.ModTime()) {
		t.Errorf("wazero wrote its own code over the installed file (%v)", err)
	}
	// Besides the code and its record, the module rewritten for the loop
	// budget is kept (prepared.go), module and record.
	var compiled, prepared []string
	for _, f := range regularFiles(t, dir) {
		if strings.HasSuffix(f, filehash.StampSuffix) {
			continue // a remembered sha256, not the cache's content
		}
		if rel, _ := filepath.Rel(dir, f); filepath.Dir(rel) == "prepared" {
			prepared = append(prepared, f)
		} else {
			compiled = append(compiled, f)
		}
	}
	if len(compiled) != 2 || len(prepared) != 2 {
		t.Errorf("cache after the run: %v and %v, want the code and its record, and the prepared module and its record", compiled, prepared)
	}
	// Installed once: a second install leaves the cache as it is.
	if ok, err := engine.InstallPrecompiled(bytes.NewReader(pack), dir); err != nil || ok {
		t.Errorf("second install: %v, %v; want false, nil", ok, err)
	}
}

func TestPrecompiledPackRefusals(t *testing.T) {
	pack := writtenPack(t, exitModule(3))
	zr, err := gzip.NewReader(bytes.NewReader(pack))
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(zr)
	line, err := br.ReadBytes('\n')
	if err != nil {
		t.Fatal(err)
	}
	code, err := io.ReadAll(br)
	if err != nil {
		t.Fatal(err)
	}
	var head map[string]any
	if err := json.Unmarshal(line, &head); err != nil {
		t.Fatal(err)
	}
	// repack writes a pack whose header is head with changes, then body.
	repack := func(change map[string]any, body []byte) []byte {
		h := map[string]any{}
		for k, v := range head {
			h[k] = v
		}
		for k, v := range change {
			h[k] = v
		}
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		hj, _ := json.Marshal(h)
		zw.Write(append(hj, '\n'))
		zw.Write(body)
		zw.Close()
		return buf.Bytes()
	}
	flipped := bytes.Clone(code)
	flipped[len(flipped)/2] ^= 1
	damaged := map[string][]byte{
		"not gzip": []byte("WAZEVO and then some"),
		"no header": func() []byte {
			var b bytes.Buffer
			zw := gzip.NewWriter(&b)
			zw.Write(code[:100])
			zw.Close()
			return b.Bytes()
		}(),
		"header not json": func() []byte {
			var b bytes.Buffer
			zw := gzip.NewWriter(&b)
			zw.Write([]byte("WAZEVO\n"))
			zw.Write(code)
			zw.Close()
			return b.Bytes()
		}(),
		"record outside":    repack(map[string]any{"record": "../" + head["record"].(string)}, code),
		"file outside":      repack(map[string]any{"file": "wazero-x/../../../etc/passwd"}, code),
		"code short":        repack(nil, code[:len(code)-1]),
		"code long":         repack(nil, append(bytes.Clone(code), 0)),
		"code changed":      repack(nil, flipped),
		"size beyond a cap": repack(map[string]any{"size": 1 << 40}, code),
		"truncated":         pack[:len(pack)/2],
	}
	for name, p := range damaged {
		dir := t.TempDir()
		ok, err := engine.InstallPrecompiled(bytes.NewReader(p), dir)
		if !errors.Is(err, engine.ErrPrecompiled) || ok {
			t.Errorf("%s: %v, %v; want ErrPrecompiled", name, ok, err)
		}
		if files := regularFiles(t, dir); len(files) != 0 {
			t.Errorf("%s: wrote %v", name, files)
		}
	}
	// Code for another platform or wazero is no use here, and no error.
	for _, file := range []string{"wazero-v0.0.1-riscv64-plan9/" + filepath.Base(head["file"].(string)), "wazero-other" + head["file"].(string)[len("wazero"):]} {
		dir := t.TempDir()
		if ok, err := engine.InstallPrecompiled(bytes.NewReader(repack(map[string]any{"file": file}, code)), dir); ok || err != nil {
			t.Errorf("pack for %s: %v, %v; want false, nil", file, ok, err)
		}
		if files := regularFiles(t, dir); len(files) != 0 {
			t.Errorf("pack for %s: wrote %v", file, files)
		}
	}
}

func TestWritePrecompiledNeedsACache(t *testing.T) {
	ctx := context.Background()
	m, err := engine.Load(ctx, exitModule(5), engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(ctx)
	if err := m.WritePrecompiled(io.Discard); !errors.Is(err, engine.ErrNotPrecompiled) {
		t.Errorf("no cache: %v, want ErrNotPrecompiled", err)
	}
}
