package s3blobs_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/projhost/projhost/registry"
	"github.com/projhost/projhost/registry/s3blobs"
)

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		in, bucket, prefix string
	}{
		{"s3://modules", "modules", ""},
		{"s3://modules/", "modules", ""},
		{"s3://my.bucket-1/projhost", "my.bucket-1", "projhost/"},
		{"s3://abc/a/b/", "abc", "a/b/"},
	} {
		b, p, err := s3blobs.ParseURL(tc.in)
		if err != nil || b != tc.bucket || p != tc.prefix {
			t.Errorf("ParseURL(%q) = %q, %q, %v; want %q, %q", tc.in, b, p, err, tc.bucket, tc.prefix)
		}
	}
	for _, in := range []string{
		"", "modules", "/tmp/modules", "s3:/modules", "s3:modules", "http://modules/x", "s3://",
		"s3://ab", "s3://Upper", "s3://-lead", "s3://trail-", "s3://a..b", "s3://192.168.1.2", "s3://under_score",
		"s3://" + strings.Repeat("a", 64), "s3://bucket/x?versionId=1", "s3://bucket/x#frag", "s3://user@bucket/x",
		"s3://bucket/" + strings.Repeat("p", s3blobs.MaxPrefixBytes), "s3://bucket/\xff",
		"s3://bucket//a", "s3://bucket/a//b",
	} {
		if b, p, err := s3blobs.ParseURL(in); !errors.Is(err, registry.ErrInvalid) {
			t.Errorf("ParseURL(%q) = %q, %q, %v; want ErrInvalid", in, b, p, err)
		}
	}
	if _, p, err := s3blobs.ParseURL("s3://bucket/" + strings.Repeat("p", s3blobs.MaxPrefixBytes-1)); err != nil || len(p) != s3blobs.MaxPrefixBytes {
		t.Errorf("a prefix of the maximum length: %d bytes, %v", len(p), err)
	}
}

func TestNewChecks(t *testing.T) {
	if _, err := s3blobs.New(nil, "bucket", ""); !errors.Is(err, registry.ErrInvalid) {
		t.Errorf("New without a client = %v, want ErrInvalid", err)
	}
}
