package python

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-sandbox/airlock/engine"
	"github.com/airlock-sandbox/airlock/wasi/memfs"
)

// TestStoredImageRejected: a corrupt image, or one made from other inputs,
// is reported, discarded and replaced by a fresh capture. Captured or
// loaded, the image has the range of random's state the host fills
// (randomReport).
func TestStoredImageRejected(t *testing.T) {
	cache, err := CacheDir()
	if err != nil {
		t.Fatal(err)
	}
	art, err := Load("", cache)
	if err != nil {
		t.Fatalf("%v (scripts/setup.sh fetches it)", err)
	}
	wasm, _, err := LoadAsyncified(art, cache)
	if err != nil {
		t.Fatalf("%v (scripts/setup.sh prepares it)", err)
	}
	ctx := context.Background()
	mod, err := engine.LoadResumable(ctx, wasm, engine.Options{CacheDir: filepath.Join(cache, "compiled")})
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Close(ctx)
	sum := sha256.Sum256(wasm)
	sha := hex.EncodeToString(sum[:])
	spec := ImageSpec{ModuleSHA: sha, Env: art.Env}
	if art.Layer != nil {
		spec.Layers = []*memfs.Layer{art.Layer}
	}
	key := spec.Key()
	dir := t.TempDir()
	path := ImagePath(dir, key)
	os.MkdirAll(filepath.Dir(path), 0o755)

	check := func(name, wantNotice string) {
		t.Helper()
		var notice bytes.Buffer
		img, err := loadOrCapture(ctx, mod, spec, dir, &notice)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		fresh := img.Fresh()
		img.Close()
		if fresh.Len != 4*mtWords {
			t.Fatalf("%s: the image's fresh range is %+v, want random's state (%d bytes)", name, fresh, 4*mtWords)
		}
		if !strings.Contains(notice.String(), wantNotice) {
			t.Fatalf("%s: notice %q, want it to mention %q", name, notice.String(), wantNotice)
		}
		again, err := engine.ReadSnapshotFile(path, key)
		if err != nil {
			t.Fatalf("%s: the image was not replaced: %v", name, err)
		}
		again.Close()
	}
	os.WriteFile(path, []byte("not an image at all"), 0o644)
	check("garbage", "snapshot image corrupt")

	data, _ := os.ReadFile(path)
	data[len(data)/2] ^= 0xff
	os.WriteFile(path, data, 0o644)
	check("flipped byte", "checksum mismatch")

	img, err := engine.ReadSnapshotFile(path, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := engine.WriteSnapshotFile(path, ImageSpec{ModuleSHA: sha + "-other"}.Key(), img); err != nil {
		t.Fatal(err)
	}
	img.Close()
	check("other inputs", "does not match")

	// A sound image of the right key is used as it is, silently.
	check("sound", "")
}

func TestStartupEnvDiffers(t *testing.T) {
	base := DefaultEnv()
	for name, c := range map[string]struct {
		env  []string
		want bool
	}{
		"default":          {base, false},
		"extra variable":   {append(append([]string{}, base...), "X=1"), false},
		"python variable":  {append(append([]string{}, base...), "PYTHONOPTIMIZE=1"), true},
		"locale":           {append(append([]string{}, base...), "LC_ALL=C"), true},
		"changed LANG":     {MergeEnv(base, map[string]string{"LANG": "C"}), true},
		"removed variable": {withoutLANG(base), true},
	} {
		if got := StartupEnvDiffers(base, c.env); got != c.want {
			t.Errorf("%s: %v, want %v", name, got, c.want)
		}
	}
}

func withoutLANG(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "LANG=") {
			out = append(out, kv)
		}
	}
	return out
}
