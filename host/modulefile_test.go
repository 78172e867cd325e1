package host_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/host"
)

// ReadModuleFile refuses what is not a regular file without blocking or reading it (a named
// pipe with no writer, /dev/zero, a directory) and files over the limit.
func TestReadModuleFile(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small.wasm")
	require.NoError(t, os.WriteFile(small, []byte("\x00asm\x01\x00\x00\x00"), 0o644))
	fifo := filepath.Join(dir, "pipe.wasm")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	for _, tc := range []struct {
		name, path string
		limit      int64
		want       error
		msg        string
	}{
		{"a module", small, 8, nil, ""},
		{"over the limit", small, 7, host.ErrModuleTooLarge, "has 8 bytes, the limit is 7"},
		{"a directory", dir, 1 << 20, host.ErrNotModuleFile, "is a directory"},
		{"a named pipe without a writer", fifo, 1 << 20, host.ErrNotModuleFile, "is a named pipe (FIFO)"},
		{"a device", "/dev/zero", 1 << 20, host.ErrNotModuleFile, "is a character device"},
		{"missing", filepath.Join(dir, "nope.wasm"), 1 << 20, fs.ErrNotExist, "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			done := make(chan struct{})
			var b []byte
			var err error
			go func() { defer close(done); b, err = host.ReadModuleFile(tc.path, tc.limit) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("ReadModuleFile blocked")
			}
			if tc.want == nil {
				require.NoError(t, err)
				require.Len(t, b, 8)
				return
			}
			require.True(t, errors.Is(err, tc.want), "%v", err)
			require.ErrorContains(t, err, tc.msg)
		})
	}
}
