package engine

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/airlock-sandbox/airlock/internal/atomicfile"
	"github.com/airlock-sandbox/airlock/internal/filehash"
)

// The on-disk image format, version 3. All integers little-endian.
//
//	off  size  field
//	0    8     magic "ALKIMAGE"
//	8    4     format version (ImageFormat)
//	12   4     header size (imageHeader: memory starts here, page-aligned)
//	16   32    key: what the image was made from, chosen by the caller
//	48   8     memory size in bytes (a multiple of 64 KiB)
//	56   4     unwind buffer address
//	60   4     number of globals, n (at most 64)
//	64   32    sha256 of bytes 0-63, bytes 96 to the globals' end, and the memory
//	96   4     entry point (Snapshot.Entry), 0 for none
//	100  4     fresh range's address (Snapshot.Fresh)
//	104  4     fresh range's length, 0 for none
//	108  4     zero
//	112  8n    globals
//	...        zero padding to imageHeader
//	4096       memory
//
// ImageFormat also versions what an image assumes of the module
// LoadResumable prepares (which globals are exported, in which order):
// bump it when either changes, so stored images are recaptured.
const (
	ImageFormat = 3 // 2: the entry point; 3: the fresh range
	imageMagic  = "ALKIMAGE"
	imageHeader = 4096
	maxGlobals  = 64
)

// ImageKey names what an image was captured from (module, program,
// arguments, environment, ...); ReadImage rejects an image whose key
// differs from the one expected.
type ImageKey [32]byte

// Sentinels an *ImageError wraps.
var (
	// ErrImageCorrupt: the file is not an image, is truncated, or fails its checksum.
	ErrImageCorrupt = errors.New("engine: snapshot image corrupt")
	// ErrImageMismatch: a sound image of another format version or key.
	ErrImageMismatch = errors.New("engine: snapshot image does not match")
)

// ImageError is why a stored image was rejected. Callers discard the file
// and capture a new image.
type ImageError struct {
	Path   string
	Err    error // ErrImageCorrupt or ErrImageMismatch
	Detail string
}

func (e *ImageError) Error() string {
	return fmt.Sprintf("%v: %s: %s", e.Err, e.Path, e.Detail)
}

func (e *ImageError) Unwrap() error { return e.Err }

// WriteSnapshotFile stores img under key at path, atomically (write, then
// rename).
func WriteSnapshotFile(path string, key ImageKey, img *Snapshot) error {
	return storeImage(path, key, img, atomicfile.Write)
}

// CreateSnapshotFile is WriteSnapshotFile where no file is at path: when another
// process stored one first, it is left, and the error satisfies
// errors.Is(err, fs.ErrExist).
func CreateSnapshotFile(path string, key ImageKey, img *Snapshot) error {
	return storeImage(path, key, img, atomicfile.Create)
}

func storeImage(path string, key ImageKey, img *Snapshot, write func(string, os.FileMode, func(io.Writer) error) error) error {
	if len(img.globals) > maxGlobals || len(img.memory)%65536 != 0 || img.base != nil || !img.fresh.within(len(img.memory)) {
		return fmt.Errorf("engine: image not storable (%d globals, %d bytes, fresh range %#x+%d)", len(img.globals), len(img.memory), img.fresh.Addr, img.fresh.Len)
	}
	head := make([]byte, imageHeader)
	copy(head, imageMagic)
	binary.LittleEndian.PutUint32(head[8:], ImageFormat)
	binary.LittleEndian.PutUint32(head[12:], imageHeader)
	copy(head[16:48], key[:])
	binary.LittleEndian.PutUint64(head[48:], uint64(len(img.memory)))
	binary.LittleEndian.PutUint32(head[56:], img.unwindBuffer)
	binary.LittleEndian.PutUint32(head[60:], uint32(len(img.globals)))
	binary.LittleEndian.PutUint32(head[96:], img.entry)
	binary.LittleEndian.PutUint32(head[100:], img.fresh.Addr)
	binary.LittleEndian.PutUint32(head[104:], img.fresh.Len)
	for i, g := range img.globals {
		binary.LittleEndian.PutUint64(head[globalsAt+8*i:], g)
	}
	sum := imageChecksum(head, img.memory)
	copy(head[64:96], sum[:])

	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("engine: store image: %w", err)
	}
	err := write(path, 0o644, func(w io.Writer) error {
		if _, err := w.Write(head); err != nil {
			return err
		}
		_, err := w.Write(img.memory)
		return err
	})
	if err != nil {
		return fmt.Errorf("engine: store image: %w", err)
	}
	return nil
}

// globalsAt is where the header's globals start.
const globalsAt = 112

// imageChecksum covers the header's first 64 bytes, the entry point, the
// fresh range, the globals and memory.
func imageChecksum(head, memory []byte) [32]byte {
	n := binary.LittleEndian.Uint32(head[60:])
	h := sha256.New()
	h.Write(head[:64])
	h.Write(head[96 : globalsAt+8*n])
	h.Write(memory)
	var sum [32]byte
	h.Sum(sum[:0])
	return sum
}

// ReadSnapshotFile loads the image stored at path, checking it was stored
// under key and is intact.
//
// # Errors
// An *ImageError (ErrImageCorrupt or ErrImageMismatch) for a file that is
// not a sound image of this key; the open error (os.ErrNotExist, say)
// otherwise.
func ReadSnapshotFile(path string, key ImageKey) (*Snapshot, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	bad := func(sentinel error, format string, args ...any) (*Snapshot, error) {
		return nil, &ImageError{Path: path, Err: sentinel, Detail: fmt.Sprintf(format, args...)}
	}
	head := make([]byte, imageHeader)
	if _, err := io.ReadFull(f, head); err != nil {
		return bad(ErrImageCorrupt, "short header: %v", err)
	}
	if string(head[:8]) != imageMagic {
		return bad(ErrImageCorrupt, "not an image (magic %q)", head[:8])
	}
	if v := binary.LittleEndian.Uint32(head[8:]); v != ImageFormat {
		return bad(ErrImageMismatch, "format version %d, want %d", v, ImageFormat)
	}
	if h := binary.LittleEndian.Uint32(head[12:]); h != imageHeader {
		return bad(ErrImageCorrupt, "header size %d", h)
	}
	if [32]byte(head[16:48]) != key {
		return bad(ErrImageMismatch, "made from other inputs (key %x, want %x)", head[16:24], key[:8])
	}
	size := binary.LittleEndian.Uint64(head[48:])
	n := binary.LittleEndian.Uint32(head[60:])
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if n > maxGlobals || size%65536 != 0 || uint64(st.Size()) != imageHeader+size {
		return bad(ErrImageCorrupt, "bad sizes (%d globals, %d bytes of memory, file %d bytes)", n, size, st.Size())
	}
	unwind := binary.LittleEndian.Uint32(head[56:])
	if uint64(unwind)+unwindPages*65536 > size {
		return bad(ErrImageCorrupt, "unwind buffer %#x outside memory", unwind)
	}
	fresh := Range{Addr: binary.LittleEndian.Uint32(head[100:]), Len: binary.LittleEndian.Uint32(head[104:])}
	if !fresh.within(int(size)) {
		return bad(ErrImageCorrupt, "fresh range %#x+%d outside memory", fresh.Addr, fresh.Len)
	}
	globals := make([]uint64, n)
	for i := range globals {
		globals[i] = binary.LittleEndian.Uint64(head[globalsAt+8*i:])
	}
	// The checksum was verified before while the file's stamp still
	// describes it (internal/filehash): unchanged since, it is not
	// hashed again.
	want := hex.EncodeToString(head[64:96])
	stamped, _ := filehash.Stamped(path, st)
	verify := func(memory []byte) bool {
		if stamped == want {
			return true
		}
		if [32]byte(head[64:96]) != imageChecksum(head, memory) {
			return false
		}
		filehash.Remember(f, path, st, want)
		return true
	}
	img, err := mapImageFile(f, size, verify)
	if errors.Is(err, ErrImageCorrupt) {
		return bad(ErrImageCorrupt, "checksum mismatch")
	}
	if err != nil || img == nil { // nothing mapped: read instead
		memory := make([]byte, size)
		if _, err := f.ReadAt(memory, imageHeader); err != nil {
			return bad(ErrImageCorrupt, "short memory: %v", err)
		}
		if !verify(memory) {
			return bad(ErrImageCorrupt, "checksum mismatch")
		}
		img = newSnapshot(memory, globals, unwind)
	}
	img.globals, img.unwindBuffer = globals, unwind
	img.entry = binary.LittleEndian.Uint32(head[96:])
	img.fresh = fresh
	return img, nil
}
