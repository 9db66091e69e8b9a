package python

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/airlock-sandbox/airlock/internal/atomicfile"
)

// InstallOwn installs an own build into cacheDir from its three files
// (OwnWasm, OwnStdlib, OwnRecord, keyed by name), checked against the
// record first. The files go into a directory of their own beside OwnDir,
// and OwnDir, a symbolic link, is then renamed to point at it: a process
// loading the build meanwhile (LoadOwn) reads the old build or the new
// one, never half of each. Builds no link points to are removed, except
// the one just replaced (a process may still be reading it).
// scripts/build-python.sh installs the same way.
//
// # Errors
// A *ChecksumError when a file differs from the record; a malformed record;
// a file system error. On any error the build in use is left as it was.
func InstallOwn(cacheDir string, files map[string][]byte) (string, error) {
	var rec BuildRecord
	if err := json.Unmarshal(files[OwnRecord], &rec); err != nil {
		return "", fmt.Errorf("python: install own build: %s: %w", OwnRecord, err)
	}
	if !validKey(rec.Key) {
		return "", fmt.Errorf("python: install own build: %s has no valid key (%q)", OwnRecord, rec.Key)
	}
	for name, want := range map[string]string{OwnWasm: rec.PythonWasmSHA256, OwnStdlib: rec.StdlibZipSHA256} {
		if got := sha256Hex(files[name]); got != want {
			return "", &ChecksumError{Path: name, Got: got, Want: want}
		}
	}
	link := OwnDir(cacheDir)
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", fmt.Errorf("python: install own build: %w", err)
	}
	target := ownDirName + "-" + rec.Key[:16]
	dir := filepath.Join(cacheDir, target)
	if _, err := LoadOwn(dir); err != nil {
		part, err := os.MkdirTemp(cacheDir, target+".part-")
		if err != nil {
			return "", fmt.Errorf("python: install own build: %w", err)
		}
		defer os.RemoveAll(part)
		// MkdirTemp makes it 0700: a build installed by root (an image's
		// set-up) must be readable by the user who runs it.
		if err := os.Chmod(part, 0o755); err != nil {
			return "", fmt.Errorf("python: install own build: %w", err)
		}
		for _, name := range []string{OwnWasm, OwnStdlib, OwnRecord} {
			if err := atomicfile.WriteBytes(filepath.Join(part, name), 0o644, files[name]); err != nil {
				return "", fmt.Errorf("python: install own build: %w", err)
			}
		}
		sums := fmt.Sprintf("%s  %s\n%s  %s\n", rec.PythonWasmSHA256, OwnWasm, rec.StdlibZipSHA256, OwnStdlib)
		if err := atomicfile.WriteBytes(filepath.Join(part, "SHA256SUMS"), 0o644, []byte(sums)); err != nil {
			return "", fmt.Errorf("python: install own build: %w", err)
		}
		os.RemoveAll(dir) // a damaged copy of this build
		if err := os.Rename(part, dir); err != nil {
			return "", fmt.Errorf("python: install own build: %w", err)
		}
	}
	previous, _ := os.Readlink(link)
	if err := pointOwnLink(link, target); err != nil {
		return "", err
	}
	pruneOwnBuilds(cacheDir, target, previous)
	return dir, nil
}

// pointOwnLink makes link a symbolic link to target, by renaming a new
// link over it. A directory left there by an older layout is moved
// aside first (rename cannot replace a directory with a link).
func pointOwnLink(link, target string) error {
	if fi, err := os.Lstat(link); err == nil && fi.IsDir() {
		old := link + ".old"
		os.RemoveAll(old)
		if err := os.Rename(link, old); err != nil {
			return fmt.Errorf("python: install own build: %w", err)
		}
		defer os.RemoveAll(old)
	}
	tmp := fmt.Sprintf("%s.link-%d", link, os.Getpid())
	os.Remove(tmp)
	if err := os.Symlink(target, tmp); err != nil {
		return fmt.Errorf("python: install own build: %w", err)
	}
	if err := os.Rename(tmp, link); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("python: install own build: %w", err)
	}
	return nil
}

// pruneOwnBuilds removes installed builds other than keep and previous.
func pruneOwnBuilds(cacheDir, keep, previous string) {
	matches, _ := filepath.Glob(filepath.Join(cacheDir, ownDirName+"-*"))
	for _, m := range matches {
		base := filepath.Base(m)
		if base == keep || base == filepath.Base(previous) || strings.Contains(base, ".part-") {
			continue
		}
		if fi, err := os.Lstat(m); err == nil && fi.IsDir() {
			os.RemoveAll(m)
		}
	}
}

func validKey(k string) bool {
	if len(k) < 16 {
		return false
	}
	for _, c := range k {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
