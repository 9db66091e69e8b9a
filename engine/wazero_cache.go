package engine

import (
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"

	"github.com/airlock-sandbox/airlock/internal/atomicfile"
	"github.com/airlock-sandbox/airlock/internal/filehash"
)

// wazero checks a compile-cache file's machine code with a CRC, but not
// the table of function offsets before it: a damaged offset runs another
// function's code, with no error. Its file names hash internal CPU
// feature bits, so Load cannot compute which file is a module's; instead
// the module's marker records the file that appeared when it was compiled,
// with its sha256, and a file that no longer matches is removed before
// wazero reads it, so it compiles again.

// wazeroDir is the directory, under a cache dir, where this binary's
// wazero keeps compiled code: named, as wazero names it, by wazero's
// version as the build information tells it ("dev" in test binaries,
// which carry none), the architecture and the OS. Binaries with another
// wazero share the cache dir but not this directory, nor its records.
var wazeroDir = sync.OnceValue(func() string {
	version := ""
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == "github.com/tetratelabs/wazero" {
				version = dep.Version
			}
		}
	}
	if version == "" || version == "(devel)" {
		version = "dev"
	}
	return "wazero-" + version + "-" + runtime.GOARCH + "-" + runtime.GOOS
})

// recordPath is where the record of the module whose (prepared) bytes
// hash to digest lives (see checkCacheRecord).
func recordPath(cacheDir, digest string) string {
	return filepath.Join(cacheDir, digest+"."+wazeroDir()+".compiled")
}

// cacheFiles lists the files in cacheDir's wazeroDir, by path relative to
// cacheDir: wazero's, not the stamps filehash keeps beside them.
func cacheFiles(cacheDir string) map[string]bool {
	out := map[string]bool{}
	entries, _ := os.ReadDir(filepath.Join(cacheDir, wazeroDir()))
	for _, e := range entries {
		if e.Type().IsRegular() && !strings.HasSuffix(e.Name(), filehash.StampSuffix) {
			out[filepath.Join(wazeroDir(), e.Name())] = true
		}
	}
	return out
}

// checkCacheRecord removes the file marker records, and the marker, when
// the file's sha256 differs from the recorded one. An empty marker (from
// an older version, or a compile that could not tell its file) checks
// nothing.
func checkCacheRecord(cacheDir, marker string) {
	data, err := os.ReadFile(marker)
	if err != nil {
		return
	}
	name, sum, ok := strings.Cut(strings.TrimSpace(string(data)), " ")
	if !ok || !filepath.IsLocal(name) {
		return
	}
	path := filepath.Join(cacheDir, name)
	if got, err := filehash.Sum(path); err != nil || got != sum {
		os.Remove(path)
		filehash.Forget(path)
		os.Remove(marker)
	}
}

// writeCacheRecord writes marker, naming the one file that appeared in
// the cache since before and its sha256, or nothing when that is unclear
// (another process compiled meanwhile). When no file appeared the code
// came from the cache, and a marker already there (checked just before
// compiling) stays as it is: a load writes nothing.
func writeCacheRecord(cacheDir, marker string, before map[string]bool) {
	var added []string
	for name := range cacheFiles(cacheDir) {
		if !before[name] {
			added = append(added, name)
		}
	}
	record := ""
	switch {
	case len(added) == 1:
		if sum, err := filehash.Sum(filepath.Join(cacheDir, added[0])); err == nil {
			record = added[0] + " " + sum + "\n"
		}
	case len(added) == 0 && exists(marker):
		return
	}
	_ = atomicfile.WriteBytes(marker, 0o600, []byte(record)) // failing costs a check, not a run
}
