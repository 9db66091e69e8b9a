package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/airlock-sandbox/airlock/internal/atomicfile"
	"github.com/airlock-sandbox/airlock/internal/filehash"
)

// Before compiling, a module is rewritten: prepared for snapshots
// (snapshot.go) and, on wazero, given its loop budget (interrupt.go). On
// the own build the two cost ~250 ms of CPU, and hashing their inputs
// and outputs ~100 ms more, in every process that loads it: most of an
// `airlock run` once the compiled code comes from the cache. Their
// outputs are kept in the cache directory, named by the input's sha256 and
// the rewrite's version, with a record of the output's sha256, so a later
// process reads the rewritten module instead of making it, and learns its
// sha256 (the key of the compiled code) without hashing it.

// source is a module's bytes, read only when needed, and their sha256.
type source struct {
	digest string
	bytes  func() ([]byte, error)
}

func sourceOf(wasm []byte) source {
	sum := sha256.Sum256(wasm)
	return source{digest: hex.EncodeToString(sum[:]), bytes: func() ([]byte, error) { return wasm, nil }}
}

// A rewrite is a deterministic function of a module's bytes: the output
// module and M, a record of what the caller needs to know about it.
type rewrite[M any] struct {
	// name, with the version, names the kept files: a change to what the
	// rewrite produces must change the version, or processes would load
	// the old output (TestKeptRewritesMatchTheRewrites fails until it
	// does, against the suite's cache).
	name  string
	apply func(wasm []byte) (out []byte, meta M, err error)
}

// preparedRecord is the JSON kept beside a rewritten module.
type preparedRecord struct {
	Rewrite      string          `json:"rewrite"`
	InputSHA256  string          `json:"input_sha256"`
	OutputSHA256 string          `json:"output_sha256"`
	Meta         json.RawMessage `json:"meta"`
}

// preparedDir is where, under a cache directory, rewritten modules are kept.
const preparedDir = "prepared"

// run applies rw to in, or takes its output kept in cacheDir by an earlier
// process ("": no cache). The meta is what apply returned, or the kept
// record's.
func (rw rewrite[M]) run(cacheDir string, in source) (source, M, error) {
	if cacheDir == "" {
		return rw.applyTo(in)
	}
	base := filepath.Join(cacheDir, preparedDir, in.digest+"."+rw.name)
	if out, meta, ok := rw.kept(base, in); ok {
		return out, meta, nil
	}
	out, meta, err := rw.applyTo(in)
	if err != nil {
		return source{}, meta, err
	}
	// A cache that cannot be written costs the next process the rewrite.
	_ = rw.keep(base, in, out, meta)
	return out, meta, nil
}

func (rw rewrite[M]) applyTo(in source) (source, M, error) {
	var none M
	wasm, err := in.bytes()
	if err != nil {
		return source{}, none, err
	}
	out, meta, err := rw.apply(wasm)
	if err != nil {
		return source{}, none, err
	}
	return sourceOf(out), meta, nil
}

// kept returns the output an earlier process kept at base, its bytes read
// when first asked for. A kept module that then fails its sha256 is
// removed and made again from in.
func (rw rewrite[M]) kept(base string, in source) (source, M, bool) {
	var meta M
	data, err := os.ReadFile(base + ".json")
	if err != nil {
		return source{}, meta, false
	}
	var rec preparedRecord
	if json.Unmarshal(data, &rec) != nil || rec.Rewrite != rw.name || rec.InputSHA256 != in.digest || len(rec.OutputSHA256) != 2*sha256.Size {
		return source{}, meta, false
	}
	if json.Unmarshal(rec.Meta, &meta) != nil {
		return source{}, meta, false
	}
	read := sync.OnceValues(func() ([]byte, error) {
		wasm, sum, err := filehash.Read(base + ".wasm")
		if err == nil && sum == rec.OutputSHA256 {
			return wasm, nil
		}
		rw.forget(base)
		again, _, err := rw.applyTo(in)
		if err != nil {
			return nil, err
		}
		wasm, err = again.bytes()
		if err == nil && again.digest != rec.OutputSHA256 {
			err = fmt.Errorf("engine: %s of %.12s made %.12s, its record says %.12s", rw.name, in.digest, again.digest, rec.OutputSHA256)
		}
		return wasm, err
	})
	return source{digest: rec.OutputSHA256, bytes: read}, meta, true
}

func (rw rewrite[M]) keep(base string, in, out source, meta M) error {
	wasm, err := out.bytes()
	if err != nil {
		return err
	}
	m, err := json.Marshal(meta)
	if err != nil {
		return err
	}
	rec, err := json.Marshal(preparedRecord{Rewrite: rw.name, InputSHA256: in.digest, OutputSHA256: out.digest, Meta: m})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(base), 0o755); err != nil {
		return err
	}
	// The module first, so a record never names a module not yet there.
	if err := atomicfile.WriteBytes(base+".wasm", 0o644, wasm); err != nil {
		return err
	}
	return atomicfile.WriteBytes(base+".json", 0o644, rec)
}

func (rw rewrite[M]) forget(base string) {
	err := os.Remove(base + ".json")
	if err == nil || errors.Is(err, os.ErrNotExist) {
		os.Remove(base + ".wasm")
		filehash.Forget(base + ".wasm")
	}
}
