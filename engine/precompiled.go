package engine

import (
	"bufio"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/airlock-sandbox/airlock/internal/atomicfile"
)

// A precompiled pack moves wazero's compile-cache file for one module from
// the machine that compiled it to one that would otherwise spend seconds
// compiling it on first use: the edge binary carries one (scripts/embed.sh),
// so its first run on an empty cache does not compile. The pack is a gzip
// stream of one JSON line (precompiledHeader) and then the file's bytes.
//
// Machine code runs outside the sandbox, so a pack is only ever taken from
// the binary itself, never from a file a user hands over (bundles carry no
// compiled code). wazero names the file by a hash of the module and the
// CPU's features: on a CPU with other features, or another wazero, the
// file is simply not found and the module compiles as it would without it.

// ErrPrecompiled: a precompiled pack is damaged or not one.
var ErrPrecompiled = errors.New("engine: not a valid precompiled pack")

// ErrNotPrecompiled: the module was loaded without a compile cache, or by
// an engine other than wazero, so there is no compiled file to pack.
var ErrNotPrecompiled = errors.New("engine: the module has no compile-cache file")

type precompiledHeader struct {
	Record string `json:"record"` // the module's cache record (wazero_cache.go), relative to the cache dir
	File   string `json:"file"`   // wazero's cache file, relative to the cache dir
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// maxPrecompiled bounds a pack's file (the own build's is ~60 MB).
const maxPrecompiled = 1 << 30

var (
	recordName = regexp.MustCompile(`^[0-9a-f]{64}\.wazero-[A-Za-z0-9._-]+\.compiled$`)
	cacheName  = regexp.MustCompile(`^wazero-[A-Za-z0-9._-]+/[0-9a-f]{64}$`)
)

// WritePrecompiled writes m's compile-cache file and record, checked
// against each other, to w as a pack.
//
// # Errors
// ErrNotPrecompiled when m has none; ErrChecksum-like mismatch as
// ErrPrecompiled; w's error.
func (m *Compiled) WritePrecompiled(w io.Writer) error {
	c, ok := m.code.(*wzCode)
	if !ok || c.marker == "" {
		return ErrNotPrecompiled
	}
	record, err := os.ReadFile(c.marker)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNotPrecompiled, err)
	}
	name, sum, ok := strings.Cut(strings.TrimSpace(string(record)), " ")
	if !ok || !cacheName.MatchString(filepath.ToSlash(name)) {
		return fmt.Errorf("%w: its record %s names no cache file", ErrNotPrecompiled, c.marker)
	}
	code, err := os.ReadFile(filepath.Join(c.cacheDir, name))
	if err != nil {
		return fmt.Errorf("engine: precompiled: %w", err)
	}
	if got := sha256.Sum256(code); hex.EncodeToString(got[:]) != sum {
		return fmt.Errorf("%w: %s differs from its record", ErrPrecompiled, name)
	}
	head, _ := json.Marshal(precompiledHeader{Record: filepath.Base(c.marker), File: filepath.ToSlash(name), Size: int64(len(code)), SHA256: sum})
	zw, _ := gzip.NewWriterLevel(w, gzip.BestCompression)
	if _, err := zw.Write(append(head, '\n')); err != nil {
		return fmt.Errorf("engine: precompiled: %w", err)
	}
	if _, err := zw.Write(code); err != nil {
		return fmt.Errorf("engine: precompiled: %w", err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("engine: precompiled: %w", err)
	}
	return nil
}

// InstallPrecompiled puts a pack's file and record into cacheDir (an
// Options.CacheDir), where Load then finds them, and tells whether it
// wrote them. It writes nothing when the module's record is there already
// (Load checks that one) or the pack was made for another OS or
// architecture; the file is written aside and renamed, then the record.
//
// # Errors
// ErrPrecompiled for a damaged pack, which writes nothing; a file system
// error.
func InstallPrecompiled(pack io.Reader, cacheDir string) (bool, error) {
	zr, err := gzip.NewReader(pack)
	if err != nil {
		return false, fmt.Errorf("%w: %w", ErrPrecompiled, err)
	}
	br := bufio.NewReader(io.LimitReader(zr, 1<<16))
	line, err := br.ReadBytes('\n')
	if err != nil {
		return false, fmt.Errorf("%w: no header: %w", ErrPrecompiled, err)
	}
	var h precompiledHeader
	if err := json.Unmarshal(line, &h); err != nil {
		return false, fmt.Errorf("%w: header: %w", ErrPrecompiled, err)
	}
	if !recordName.MatchString(h.Record) || !cacheName.MatchString(h.File) || h.Size <= 0 || h.Size > maxPrecompiled || len(h.SHA256) != 64 {
		return false, fmt.Errorf("%w: header %q", ErrPrecompiled, line)
	}
	if dir, _, _ := strings.Cut(h.File, "/"); dir != wazeroDir() || !strings.HasSuffix(h.Record, "."+dir+".compiled") {
		return false, nil // compiled for another platform or wazero: useless here
	}
	record := filepath.Join(cacheDir, h.Record)
	if exists(record) {
		return false, nil
	}
	// The header was read through a small window; the code follows it.
	rest := io.MultiReader(br, zr)
	path := filepath.Join(cacheDir, filepath.FromSlash(h.File))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return false, fmt.Errorf("engine: precompiled: %w", err)
	}
	err = atomicfile.Write(path, 0o600, func(w io.Writer) error {
		hash := sha256.New()
		n, err := io.Copy(io.MultiWriter(w, hash), io.LimitReader(rest, h.Size+1))
		switch {
		case err != nil:
			return fmt.Errorf("%w: %w", ErrPrecompiled, err)
		case n != h.Size:
			return fmt.Errorf("%w: %d bytes of code, the header says %d", ErrPrecompiled, n, h.Size)
		case hex.EncodeToString(hash.Sum(nil)) != h.SHA256:
			return fmt.Errorf("%w: the code's sha256 differs from the header's", ErrPrecompiled)
		}
		return nil
	})
	if err != nil {
		return false, err
	}
	if err := atomicfile.WriteBytes(record, 0o600, []byte(h.File+" "+h.SHA256+"\n")); err != nil {
		os.Remove(path)
		return false, fmt.Errorf("engine: precompiled: %w", err)
	}
	return true, nil
}
