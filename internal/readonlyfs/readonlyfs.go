// Package readonlyfs helps tests run a program where it cannot write: a world-readable temp
// directory to copy a binary and data into, permission changes over a tree, and the command
// prefix that drops root's power to ignore permissions.
package readonlyfs

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Wrapper returns the command prefix that runs a program without the right to write what its
// permissions forbid: none for a user other than root; as root, setpriv to user and group
// nobody (65534). It skips t when running as root without setpriv.
func Wrapper(t *testing.T) []string {
	t.Helper()
	if os.Getuid() != 0 {
		return nil
	}
	p, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("running as root without setpriv: cannot drop the permission to write")
	}
	return []string{p, "--reuid=65534", "--regid=65534", "--clear-groups"}
}

// TempDir returns a new directory that every user may read and enter (t.TempDir's are private
// to their owner), removed with its contents when t ends, whatever their permissions then.
func TempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "projhost-ro-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Chmod(dir, 0o755, 0o644); os.RemoveAll(dir) })
	return dir
}

// Chmod sets dirMode on dir and every directory below it and fileMode on every file.
func Chmod(dir string, dirMode, fileMode os.FileMode) {
	_ = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return nil
		}
		if info.IsDir() {
			return os.Chmod(p, dirMode)
		}
		return os.Chmod(p, fileMode)
	})
}

// Copy copies the file from to the new file to with mode, failing t on error.
func Copy(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.Copy(out, in)
	if err := errors.Join(err, out.Close()); err != nil {
		t.Fatal(err)
	}
}
