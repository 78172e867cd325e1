package registry

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// DirBlobs is a Blobs store in a directory: the bytes of each module in the file
// <sha256>.wasm. Put writes a temporary file in the directory, syncs it and renames it into
// place, so a reader never sees a partial module and a crash leaves at most a stray
// temporary file (".tmp-*"). Several processes may share the directory (a local file system).
type DirBlobs struct {
	dir string
}

// NewDirBlobs returns the Blobs store in dir, creating the directory (mode 0755) if missing.
func NewDirBlobs(dir string) (*DirBlobs, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("registry: module store directory: %w", err)
	}
	return &DirBlobs{dir: dir}, nil
}

// OpenDirBlobs returns the Blobs store in dir without creating anything (for commands that
// only read). A missing directory holds no module: Get returns ErrNoModule.
func OpenDirBlobs(dir string) *DirBlobs { return &DirBlobs{dir: dir} }

// Dir is the store's directory.
func (d *DirBlobs) Dir() string { return d.dir }

func (d *DirBlobs) path(sum string) string { return filepath.Join(d.dir, sum+".wasm") }

// Put implements Blobs.
func (d *DirBlobs) Put(ctx context.Context, sum string, wasm []byte) error {
	if err := CheckSum(sum); err != nil {
		return err
	}
	if Sum(wasm) != sum {
		return fmt.Errorf("%w: put %s: the bytes hash to %s", ErrCorrupt, sum, Sum(wasm))
	}
	if b, err := os.ReadFile(d.path(sum)); err == nil && Sum(b) == sum {
		return nil
	}
	f, err := os.CreateTemp(d.dir, ".tmp-*")
	if err != nil {
		return fmt.Errorf("registry: store module %s: %w", sum, err)
	}
	tmp := f.Name()
	err = f.Chmod(0o644) // readable by workers running as other users, as the directory is
	if err == nil {
		_, err = f.Write(wasm)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, d.path(sum))
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("registry: store module %s: %w", sum, err)
	}
	return nil
}

// Get implements Blobs.
func (d *DirBlobs) Get(ctx context.Context, sum string) ([]byte, error) {
	if err := CheckSum(sum); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(d.path(sum))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s in %s", ErrNoModule, sum, d.dir)
	}
	if err != nil {
		return nil, fmt.Errorf("registry: read module %s: %w", sum, err)
	}
	if got := Sum(b); got != sum {
		return nil, fmt.Errorf("%w: %s in %s hashes to %s", ErrCorrupt, d.path(sum), d.dir, got)
	}
	return b, nil
}
