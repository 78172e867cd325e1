package registry_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/projhost/projhost/registry"
	"github.com/projhost/projhost/registry/registrytest"
)

func TestDirBlobsConformance(t *testing.T) {
	d, err := registry.NewDirBlobs(filepath.Join(t.TempDir(), "modules"))
	if err != nil {
		t.Fatal(err)
	}
	registrytest.RunBlobs(t, func(t *testing.T) registry.Blobs { return d })
}

// TestDirBlobsDamaged: bytes damaged in the directory are reported as ErrCorrupt by Get, and a
// Put of the right bytes repairs them; a directory that does not exist holds nothing.
func TestDirBlobsDamaged(t *testing.T) {
	ctx := context.Background()
	d, err := registry.NewDirBlobs(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b := []byte("\x00asm\x01\x00\x00\x00")
	sum := registry.Sum(b)
	if err := d.Put(ctx, sum, b); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d.Dir(), sum+".wasm"), []byte("damaged"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Get(ctx, sum); !errors.Is(err, registry.ErrCorrupt) {
		t.Fatalf("Get of damaged bytes = %v, want ErrCorrupt", err)
	}
	if err := d.Put(ctx, sum, b); err != nil {
		t.Fatal(err)
	}
	if got, err := d.Get(ctx, sum); err != nil || string(got) != string(b) {
		t.Fatalf("Get after the repairing Put = %q, %v", got, err)
	}
	missing := registry.OpenDirBlobs(filepath.Join(t.TempDir(), "none"))
	if _, err := missing.Get(ctx, sum); !errors.Is(err, registry.ErrNoModule) {
		t.Fatalf("Get from a missing directory = %v, want ErrNoModule", err)
	}
}
