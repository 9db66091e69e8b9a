package engine

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
)

// cacheWriteFailed tells whether err is wazero's compilation cache
// failing to store a file under cacheDir (no space, no permission, a
// read-only file system): the compile itself went through.
func cacheWriteFailed(err error, cacheDir string) bool {
	var pe *fs.PathError
	if !errors.As(err, &pe) {
		return false
	}
	dir, err := filepath.Abs(cacheDir)
	if err != nil {
		return false
	}
	path, err := filepath.Abs(pe.Path)
	return err == nil && strings.HasPrefix(path, dir+string(filepath.Separator))
}
