package s3blobs_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/projhost/projhost/internal/s3test"
	"github.com/projhost/projhost/registry"
	"github.com/projhost/projhost/registry/registrytest"
	"github.com/projhost/projhost/registry/s3blobs"
)

func TestMain(m *testing.M) { s3test.Main(m) }

// TestConformance runs the Blobs suite on s3rver, at the top of a bucket and under a prefix.
func TestConformance(t *testing.T) {
	c := s3test.Client(t)
	bucket := s3test.Bucket(t, c)
	for _, prefix := range []string{"", "projhost/modules/"} {
		t.Run("prefix="+prefix, func(t *testing.T) {
			b, err := s3blobs.Open(context.Background(), c, bucket, prefix)
			if err != nil {
				t.Fatal(err)
			}
			registrytest.RunBlobs(t, func(t *testing.T) registry.Blobs { return b })
		})
	}
}

// stored puts a small module of text into a fresh bucket's store under prefix and returns the
// client, the bucket, the store, the bytes and their SHA-256.
func stored(t *testing.T, prefix, text string) (*s3.Client, string, *s3blobs.Blobs, []byte, string) {
	t.Helper()
	c := s3test.Client(t)
	bucket := s3test.Bucket(t, c)
	b, err := s3blobs.New(c, bucket, prefix)
	if err != nil {
		t.Fatal(err)
	}
	wasm := []byte("\x00asm\x01\x00\x00\x00 " + text)
	sum := registry.Sum(wasm)
	if err := b.Put(context.Background(), sum, wasm); err != nil {
		t.Fatal(err)
	}
	return c, bucket, b, wasm, sum
}

// TestObjectKey: a module is the object PREFIX<sha256>.wasm holding its bytes.
func TestObjectKey(t *testing.T) {
	ctx := context.Background()
	c, bucket, b, wasm, sum := stored(t, "m/", "key test")
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("m/" + sum + ".wasm")})
	if err != nil {
		t.Fatalf("GetObject m/%s.wasm: %v", sum, err)
	}
	defer out.Body.Close()
	var got bytes.Buffer
	if _, err := got.ReadFrom(out.Body); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), wasm) {
		t.Fatalf("object m/%s.wasm holds %q, want %q", sum, got.Bytes(), wasm)
	}
	if b.Key(sum) != "m/"+sum+".wasm" || b.String() != "s3://"+bucket+"/m/" {
		t.Fatalf("Key = %q, String = %q", b.Key(sum), b.String())
	}
}

// TestDamaged: an object overwritten in the bucket with other bytes is reported as ErrCorrupt
// by Get, and a Put of the right bytes replaces it.
func TestDamaged(t *testing.T) {
	ctx := context.Background()
	c, bucket, b, wasm, sum := stored(t, "", "damaged test")
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(b.Key(sum)),
		Body: bytes.NewReader([]byte("damaged"))}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Get(ctx, sum); !errors.Is(err, registry.ErrCorrupt) {
		t.Fatalf("Get of a damaged object = %v, want ErrCorrupt", err)
	}
	if err := b.Put(ctx, sum, wasm); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Get(ctx, sum); err != nil || !bytes.Equal(got, wasm) {
		t.Fatalf("Get after the repairing Put = %q, %v", got, err)
	}
}

// TestNoBucket: every call on a missing bucket fails with a *BucketError saying to create it.
func TestNoBucket(t *testing.T) {
	ctx := context.Background()
	c := s3test.Client(t)
	const missing = "projhost-no-such-bucket"
	if _, err := s3blobs.Open(ctx, c, missing, ""); !errors.Is(err, s3blobs.ErrNoBucket) {
		t.Fatalf("Open of a missing bucket = %v, want ErrNoBucket", err)
	}
	b, err := s3blobs.New(c, missing, "")
	if err != nil {
		t.Fatal(err)
	}
	wasm := []byte("x")
	sum := registry.Sum(wasm)
	for name, err := range map[string]error{
		"Put": b.Put(ctx, sum, wasm),
		"Get": func() error { _, err := b.Get(ctx, sum); return err }(),
	} {
		var be *s3blobs.BucketError
		if !errors.As(err, &be) || be.Bucket != missing {
			t.Fatalf("%s on a missing bucket = %v, want a *BucketError", name, err)
		}
		want := `s3blobs: bucket "projhost-no-such-bucket" does not exist (or these credentials cannot see it): create it (aws s3 mb s3://projhost-no-such-bucket) or name an existing one`
		if err.Error() != want {
			t.Fatalf("%s error = %q, want %q", name, err, want)
		}
	}
}

// BenchmarkBlobs measures Put (new bytes), Put again (the bytes are there: one Get) and Get of
// modules the size of the AssemblyScript and Go examples and of the default size limit, on the
// local server: go test -run '^$' -bench . -benchtime 5x ./registry/s3blobs
func BenchmarkBlobs(b *testing.B) {
	ctx := context.Background()
	c := s3test.Client(b)
	s, err := s3blobs.New(c, s3test.Bucket(b, c), "bench/")
	if err != nil {
		b.Fatal(err)
	}
	for _, size := range []struct {
		name string
		n    int
	}{{"35KB", 35 << 10}, {"2.7MB", 2700 << 10}, {"64MiB", registry.DefaultMaxModuleSize}} {
		wasm := make([]byte, size.n)
		b.Run("put/"+size.name, func(b *testing.B) {
			b.SetBytes(int64(size.n))
			for i := 0; b.Loop(); i++ {
				wasm[0] = byte(i) // new bytes each time
				wasm[1] = byte(i >> 8)
				if err := s.Put(ctx, registry.Sum(wasm), wasm); err != nil {
					b.Fatal(err)
				}
			}
		})
		sum := registry.Sum(wasm)
		if err := s.Put(ctx, sum, wasm); err != nil {
			b.Fatal(err)
		}
		b.Run("put-again/"+size.name, func(b *testing.B) {
			b.SetBytes(int64(size.n))
			for b.Loop() {
				if err := s.Put(ctx, sum, wasm); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("get/"+size.name, func(b *testing.B) {
			b.SetBytes(int64(size.n))
			for b.Loop() {
				if _, err := s.Get(ctx, sum); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
