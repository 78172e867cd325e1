package host

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestParseMemoryLimit(t *testing.T) {
	cases := []struct {
		in    string
		pages uint32
		err   string // substring of the error; "" for success
	}{
		{"128MiB", 2048, ""},
		{"64KiB", 1, ""},
		{"256mib", 4096, ""},
		{"1GiB", 16384, ""},
		{"1G", 16384, ""},
		{"4GiB", 65536, ""},
		{" 64 MiB ", 1024, ""},
		{"1048576", 16, ""},
		{"65536B", 1, ""},
		{DefaultMemoryLimit, DefaultMemoryLimitPages, ""},
		{"", 0, "want a size such as 64MiB"},
		{"MiB", 0, "want a size such as 64MiB"},
		{"-1MiB", 0, "want a size such as 64MiB"},
		{"1.5GiB", 0, "want a size such as 64MiB"},
		{"12TiB", 0, "want a size such as 64MiB"},
		{"128MB", 0, "decimal units are not accepted; use KiB, MiB or GiB"},
		{"100000", 0, "100000 bytes is not a whole number of 64 KiB wasm pages (e.g. 64KiB or 128KiB)"},
		{"100KiB", 0, "not a whole number of 64 KiB wasm pages (e.g. 64KiB or 128KiB)"},
		{"1000", 0, "1000 bytes is less than one 64 KiB wasm page: at least 64KiB"},
		{"0", 0, "0 pages of 64 KiB is not in 1..65536"},
		{"5GiB", 0, "at most 4GiB"},
		{"99999999999999999999999", 0, "at most 4GiB"},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			pages, err := ParseMemoryLimit(c.in)
			if c.err == "" {
				if err != nil || pages != c.pages {
					t.Fatalf("= %d, %v; want %d", pages, err, c.pages)
				}
				if back, err := ParseMemoryLimit(FormatMemoryLimit(pages)); err != nil || back != pages {
					t.Errorf("FormatMemoryLimit(%d) = %q reads back as %d, %v", pages, FormatMemoryLimit(pages), back, err)
				}
				return
			}
			if !errors.Is(err, ErrBadMemoryLimit) || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), c.in) {
				t.Fatalf("err = %v; want ErrBadMemoryLimit naming %q and containing %q", err, c.in, c.err)
			}
		})
	}
}

// TestMemoryLimitOneRule: NewRuntime accepts exactly the page counts ParseMemoryLimit does.
func TestMemoryLimitOneRule(t *testing.T) {
	ctx := context.Background()
	for _, pages := range []uint32{0, 1, DefaultMemoryLimitPages, MaxMemoryLimitPages, MaxMemoryLimitPages + 1} {
		_, perr := ParseMemoryLimit(FormatMemoryLimit(pages))
		rt, err := NewRuntime(ctx, WithCacheDir(""), WithMemoryLimitPages(pages))
		if err == nil {
			if rt.MemoryLimitPages() != pages {
				t.Errorf("pages %d: runtime has %d", pages, rt.MemoryLimitPages())
			}
			rt.Close(ctx)
		}
		if (err == nil) != (perr == nil) || err != nil && !errors.Is(err, ErrBadMemoryLimit) {
			t.Errorf("pages %d: NewRuntime %v, ParseMemoryLimit %v", pages, err, perr)
		}
	}
	if FormatMemoryLimit(DefaultMemoryLimitPages) != DefaultMemoryLimit {
		t.Errorf("DefaultMemoryLimit %q != FormatMemoryLimit(DefaultMemoryLimitPages) %q", DefaultMemoryLimit, FormatMemoryLimit(DefaultMemoryLimitPages))
	}
}
