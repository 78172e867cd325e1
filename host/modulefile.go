package host

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// Errors of ReadModuleFile.
var (
	// ErrNotModuleFile: the path names a directory, a device, a named pipe or a socket, not
	// a regular file.
	ErrNotModuleFile = errors.New("host: not a regular file: give the .wasm file")
	// ErrModuleTooLarge: the module is larger than the limit given (deploy.ErrTooLarge is
	// this error too).
	ErrModuleTooLarge = errors.New("module too large")
)

// DefaultMaxModuleFile is the limit the projhost commands that only run a module (test, bench)
// put on a module file: 1 GiB, far above any handler (a standard Go build of an example is about
// 3 MB), so that a mistaken path is refused before memory runs out. Commands that store a
// module (deploy, run --handler) take registry.DefaultMaxModuleSize (--max-module-size).
const DefaultMaxModuleFile = 1 << 30

// ReadModuleFile reads the module file at path, of at most limit bytes. It never blocks on a
// named pipe and never reads more than limit+1 bytes (a device such as /dev/zero is refused
// before it is read). Errors: ErrNotModuleFile (wrapped, naming the kind of file),
// ErrModuleTooLarge (wrapped, with the size and the limit), the file system's (fs.ErrNotExist,
// ...). The bytes are not validated: Runtime.Load does that.
func ReadModuleFile(path string, limit int64) ([]byte, error) {
	// O_NONBLOCK: opening a named pipe does not wait for a writer (it is refused below).
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("reading handler: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("reading handler: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: handler %s is %s", ErrNotModuleFile, path, fileKind(fi.Mode()))
	}
	tooLarge := func(n int64) error {
		return fmt.Errorf("%w: %s has %d bytes, the limit is %d", ErrModuleTooLarge, path, n, limit)
	}
	if fi.Size() > limit {
		return nil, tooLarge(fi.Size())
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("reading handler %s: %w", path, err)
	}
	if int64(len(b)) > limit {
		return nil, tooLarge(int64(len(b)))
	}
	return b, nil
}

// fileKind names a file mode that is not a regular file's.
func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "not a regular file (" + m.Type().String() + ")"
}
