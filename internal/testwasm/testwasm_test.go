package testwasm_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/projhost/projhost/internal/testwasm"
)

func TestRepoRoot(t *testing.T) {
	r := testwasm.RepoRoot(t)
	if !filepath.IsAbs(r) {
		t.Fatalf("RepoRoot = %q, want an absolute path", r)
	}
	mod, err := os.ReadFile(filepath.Join(r, "go.mod"))
	if err != nil || !bytes.HasPrefix(mod, []byte("module github.com/projhost/projhost\n")) {
		t.Fatalf("go.mod at %s: %v", r, err)
	}
}

func TestPathBuildsConcurrently(t *testing.T) {
	var wg sync.WaitGroup
	paths := make([]string, 4)
	for i := range paths {
		wg.Add(1)
		go func() {
			defer wg.Done()
			paths[i] = testwasm.Path(t, testwasm.CountAS)
		}()
	}
	wg.Wait()
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(b, []byte("\x00asm\x01\x00\x00\x00")) {
			t.Fatalf("%s is not a WebAssembly module", p)
		}
	}
}

func TestPathUnknownModuleFails(t *testing.T) {
	ft := &fakeTB{TB: t}
	func() {
		defer func() { recover() }()
		testwasm.Path(ft, "no-such-module")
	}()
	if !bytes.Contains([]byte(ft.msg), []byte("No rule to make target")) {
		t.Fatalf("failure message %q does not carry make's output", ft.msg)
	}
}

type fakeTB struct {
	testing.TB
	msg string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.msg = sprintf(format, args...)
	panic("fatal")
}

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }

func TestSmallLEBs(t *testing.T) {
	cases := []struct {
		name string
		b    []byte
		want bool
	}{
		{"empty", nil, true},
		{"2^16 in three bytes", []byte{0x80, 0x80, 0x04}, true},
		{"2^16+1", []byte{0x81, 0x80, 0x04}, false},
		{"2^31-1 after small bytes", []byte{1, 2, 0xFF, 0xFF, 0xFF, 0xFF, 0x07}, false},
		{"unterminated at the end", []byte{0x7F, 0xFF, 0xFF, 0xFF}, false},
		{"header", []byte("\x00asm\x01\x00\x00\x00"), true},
	}
	for _, c := range cases {
		if got := testwasm.SmallLEBs(c.b); got != c.want {
			t.Errorf("%s: SmallLEBs(% x) = %v, want %v", c.name, c.b, got, c.want)
		}
	}
}
