// Package s3blobs is a registry.Blobs module store on an Amazon S3 bucket (or an S3-compatible
// server such as s3rver, tools/s3rver): the bytes of each module are the object
// PREFIX + <sha256> + ".wasm" of one bucket, written whole with one PutObject and read with one
// GetObject.
//
// Concurrency: a *Blobs is safe for concurrent use by several goroutines, and several processes
// may share a bucket and prefix. Objects are content-addressed, so concurrent Puts of one module
// write the same bytes and the last one wins harmlessly (S3 PutObject replaces an object
// atomically: a reader sees the old bytes or the new, never a mix; S3 User Guide, "Amazon S3
// data consistency model").
package s3blobs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/projhost/projhost/registry"
)

// Limits of object names, from the Amazon S3 User Guide: "General purpose bucket naming rules"
// (3 to 63 characters: lowercase letters, digits, dots and hyphens, beginning and ending with a
// letter or digit, no two adjacent dots, not an IP address) and "Naming Amazon S3 objects" (a
// key is at most 1,024 bytes of UTF-8).
const (
	MaxKeyBytes = 1024
	// MaxPrefixBytes is the longest prefix: MaxKeyBytes less a 64-digit SHA-256 and ".wasm".
	MaxPrefixBytes = MaxKeyBytes - 64 - len(".wasm")
)

// ErrNoBucket: the bucket does not exist (or the credentials may not see it). *BucketError
// wraps it.
var ErrNoBucket = errors.New("s3blobs: no such bucket")

// BucketError is the error of a call on a bucket that does not exist.
type BucketError struct {
	Bucket string
	Err    error // the S3 error (types.NoSuchBucket, or a 404 of HeadBucket)
}

func (e *BucketError) Error() string {
	return fmt.Sprintf("s3blobs: bucket %q does not exist (or these credentials cannot see it): create it (aws s3 mb s3://%s) or name an existing one",
		e.Bucket, e.Bucket)
}

// Unwrap returns ErrNoBucket and the S3 error.
func (e *BucketError) Unwrap() []error { return []error{ErrNoBucket, e.Err} }

// Blobs is the module store in one bucket under one key prefix. Create it with New or Open.
type Blobs struct {
	client *s3.Client
	bucket string
	prefix string
}

var (
	bucketRE = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)
	ipRE     = regexp.MustCompile(`^\d+\.\d+\.\d+\.\d+$`)
)

// CheckBucket returns registry.ErrInvalid (wrapped) unless name follows S3's general purpose
// bucket naming rules (see MaxKeyBytes).
func CheckBucket(name string) error {
	if !bucketRE.MatchString(name) || strings.Contains(name, "..") || ipRE.MatchString(name) {
		return fmt.Errorf("%w: bucket name %q: S3 bucket names are 3 to 63 lowercase letters, digits, dots and hyphens, beginning and ending with a letter or digit",
			registry.ErrInvalid, name)
	}
	return nil
}

// CheckPrefix returns registry.ErrInvalid (wrapped) unless prefix is valid UTF-8 of at most
// MaxPrefixBytes bytes ("" is valid: the objects are at the bucket's top level).
func CheckPrefix(prefix string) error {
	if !utf8.ValidString(prefix) || len(prefix) > MaxPrefixBytes {
		return fmt.Errorf("%w: key prefix %q: at most %d bytes of UTF-8", registry.ErrInvalid, prefix, MaxPrefixBytes)
	}
	return nil
}

// ParseURL splits a module store URL s3://BUCKET[/PREFIX] into its bucket and key prefix; a
// prefix not ending in "/" gets one (s3://b/modules and s3://b/modules/ both give "modules/"),
// none gives "". Errors: registry.ErrInvalid (wrapped) for another scheme, a bad bucket name
// (CheckBucket), a bad prefix (CheckPrefix), or a query or fragment.
func ParseURL(s string) (bucket, prefix string, err error) {
	u, err := url.Parse(s)
	if err != nil || !strings.HasPrefix(s, "s3://") || u.Opaque != "" || u.User != nil {
		return "", "", fmt.Errorf("%w: module store %q: want s3://BUCKET[/PREFIX]", registry.ErrInvalid, s)
	}
	if u.RawQuery != "" || u.Fragment != "" || strings.Contains(s, "?") || strings.Contains(s, "#") {
		return "", "", fmt.Errorf("%w: module store %q: no query or fragment in s3://BUCKET[/PREFIX]", registry.ErrInvalid, s)
	}
	if err := CheckBucket(u.Host); err != nil {
		return "", "", err
	}
	prefix = strings.TrimPrefix(u.Path, "/")
	if strings.HasPrefix(prefix, "/") || strings.Contains(prefix, "//") {
		return "", "", fmt.Errorf("%w: module store %q: an empty folder name in the prefix (\"//\")", registry.ErrInvalid, s)
	}
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	if err := CheckPrefix(prefix); err != nil {
		return "", "", err
	}
	return u.Host, prefix, nil
}

// New returns the module store in bucket under prefix (both checked: CheckBucket,
// CheckPrefix; errors wrap registry.ErrInvalid). It makes no call: a missing bucket shows at
// the first Put or Get (*BucketError). The prefix is used verbatim: end it with "/" for a
// folder.
func New(client *s3.Client, bucket, prefix string) (*Blobs, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: no S3 client", registry.ErrInvalid)
	}
	if err := CheckBucket(bucket); err != nil {
		return nil, err
	}
	if err := CheckPrefix(prefix); err != nil {
		return nil, err
	}
	return &Blobs{client: client, bucket: bucket, prefix: prefix}, nil
}

// Open is New, then a HeadBucket call so that a missing bucket or a wrong endpoint is reported
// before any other work. Errors: those of New; *BucketError (ErrNoBucket) when the bucket does
// not exist; the S3 call's error (wrapped) otherwise.
func Open(ctx context.Context, client *s3.Client, bucket, prefix string) (*Blobs, error) {
	b, err := New(client, bucket, prefix)
	if err != nil {
		return nil, err
	}
	if _, err := client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(bucket)}); err != nil {
		return nil, b.wrap("open bucket", err)
	}
	return b, nil
}

// Bucket is the store's bucket.
func (b *Blobs) Bucket() string { return b.bucket }

// Key is the object key of the module with SHA-256 sum: PREFIX + sum + ".wasm".
func (b *Blobs) Key(sum string) string { return b.prefix + sum + ".wasm" }

// String is the store's URL: s3://BUCKET/PREFIX.
func (b *Blobs) String() string { return "s3://" + b.bucket + "/" + b.prefix }

// Put implements registry.Blobs: it stores wasm as the object Key(sum), unless an object
// holding exactly these bytes is there already (then it only reads it, with Get: the same
// module deployed twice is uploaded once; a damaged object is replaced). On s3rver a 64 MiB
// module takes about 0.5-0.7 s to put and 0.25-0.3 s to read (BenchmarkBlobs). Errors: registry.ErrInvalid
// (wrapped) for a malformed sum; registry.ErrCorrupt when sum is not the SHA-256 of wasm;
// *BucketError when the bucket does not exist; the S3 call's error (wrapped) otherwise.
func (b *Blobs) Put(ctx context.Context, sum string, wasm []byte) error {
	if err := registry.CheckSum(sum); err != nil {
		return err
	}
	if got := registry.Sum(wasm); got != sum {
		return fmt.Errorf("%w: put %s: the bytes hash to %s", registry.ErrCorrupt, sum, got)
	}
	_, err := b.Get(ctx, sum)
	switch {
	case err == nil:
		return nil
	case !errors.Is(err, registry.ErrNoModule) && !errors.Is(err, registry.ErrCorrupt):
		return err
	}
	_, err = b.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket:        aws.String(b.bucket),
		Key:           aws.String(b.Key(sum)),
		Body:          bytes.NewReader(wasm),
		ContentLength: aws.Int64(int64(len(wasm))),
		ContentType:   aws.String("application/wasm"),
	})
	if err != nil {
		return b.wrap("store module "+sum, err)
	}
	return nil
}

// Get implements registry.Blobs: the bytes of the object Key(sum). Errors: registry.ErrInvalid
// (wrapped) for a malformed sum; registry.ErrNoModule (wrapped) when there is no such object;
// registry.ErrCorrupt (wrapped) when its bytes do not hash to sum; *BucketError when the bucket
// does not exist; the S3 call's error (wrapped) otherwise.
func (b *Blobs) Get(ctx context.Context, sum string) ([]byte, error) {
	if err := registry.CheckSum(sum); err != nil {
		return nil, err
	}
	out, err := b.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(b.bucket), Key: aws.String(b.Key(sum))})
	if err != nil {
		var nk *types.NoSuchKey
		if errors.As(err, &nk) {
			return nil, fmt.Errorf("%w: %s in %s", registry.ErrNoModule, sum, b)
		}
		return nil, b.wrap("read module "+sum, err)
	}
	defer out.Body.Close()
	data, err := io.ReadAll(out.Body)
	if err != nil {
		return nil, fmt.Errorf("s3blobs: read module %s from %s: %w", sum, b, err)
	}
	if got := registry.Sum(data); got != sum {
		return nil, fmt.Errorf("%w: s3://%s/%s hashes to %s", registry.ErrCorrupt, b.bucket, b.Key(sum), got)
	}
	return data, nil
}

// wrap turns a missing bucket into a *BucketError and wraps any other error with what was done.
func (b *Blobs) wrap(what string, err error) error {
	var nb *types.NoSuchBucket
	var nf *types.NotFound
	var ae smithy.APIError
	if errors.As(err, &nb) || errors.As(err, &nf) || errors.As(err, &ae) && ae.ErrorCode() == "NoSuchBucket" {
		return &BucketError{Bucket: b.bucket, Err: err}
	}
	return fmt.Errorf("s3blobs: %s in %s: %w", what, b, err)
}
