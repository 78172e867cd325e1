// Package s3test gives tests an S3 client for a real local S3-compatible server, and fresh
// buckets on it.
//
// Use it from a test package's TestMain:
//
//	func TestMain(m *testing.M) { s3test.Main(m) }
//
// Main uses the server at $PROJHOST_S3_ENDPOINT when set (e.g. "http://127.0.0.1:4569" from
// tools/s3rver/start.sh, which .ci/run starts); otherwise it starts tools/s3rver on a free
// loopback port for the package's tests (objects in a temporary directory) and stops it
// afterwards. When no server can be had, tests calling Client are skipped — unless CI=true,
// where Main fails the run instead.
//
// s3rver 3.7.1 answers the calls registry/s3blobs makes (HeadBucket, PutObject, GetObject with
// NoSuchKey and NoSuchBucket) as S3 does, path-style only (tools/s3rver starts it with
// --no-vhost-buckets), and accepts any well-formed signature.
package s3test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/projhost/projhost/internal/localserver"
	"github.com/projhost/projhost/registry/s3blobs"
)

// EndpointEnv names the environment variable with an already running server's endpoint URL.
const EndpointEnv = "PROJHOST_S3_ENDPOINT"

var harness = &localserver.Harness{Name: "s3test",
	Server: localserver.Server{Tool: "s3rver", PidEnv: "S3RVER_PIDFILE", EndpointEnv: EndpointEnv}}

// Main finds or starts the server, runs the tests, stops a server it started, and exits with
// the tests' code. It never returns.
func Main(m *testing.M) { os.Exit(harness.Run(m)) }

// RunFunc is Main around run, returning the code, for a TestMain that needs another server
// too: s3test.RunFunc(func() int { return dynamotest.Run(m) }).
func RunFunc(run func() int) int { return harness.RunFunc(run) }

// Endpoint returns the server's endpoint URL, or skips t when there is none.
func Endpoint(t testing.TB) string { t.Helper(); return harness.Endpoint(t) }

// Client returns a client for the server (s3blobs.NewClient: path-style, region us-east-1,
// dummy credentials), or skips t.
func Client(t testing.TB) *s3.Client {
	t.Helper()
	ep := Endpoint(t)
	c, err := s3blobs.NewClient(context.Background(), s3blobs.ClientConfig{Endpoint: ep, Region: s3blobs.LocalRegion,
		AccessKeyID: "local", SecretAccessKey: "local"})
	if err != nil {
		t.Fatalf("s3test: client for %s: %v", ep, err)
	}
	return c
}

// Bucket creates a bucket under a fresh random name ("t<hex>") and returns it; when t ends,
// every object in it is deleted, then the bucket.
func Bucket(t testing.TB, c *s3.Client) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "t" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatalf("s3test: create bucket %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := Empty(ctx, c, name); err != nil {
			t.Errorf("s3test: empty bucket %s: %v", name, err)
			return
		}
		if _, err := c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(name)}); err != nil {
			t.Errorf("s3test: delete bucket %s: %v", name, err)
		}
	})
	return name
}

// Empty deletes every object of bucket (ListObjectsV2 pages of up to 1,000 keys, one
// DeleteObjects call per page).
func Empty(ctx context.Context, c *s3.Client, bucket string) error {
	p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return err
		}
		if len(page.Contents) == 0 {
			continue
		}
		ids := make([]types.ObjectIdentifier, len(page.Contents))
		for i, o := range page.Contents {
			ids[i] = types.ObjectIdentifier{Key: o.Key}
		}
		if _, err := c.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String(bucket), Delete: &types.Delete{Objects: ids}}); err != nil {
			return err
		}
	}
	return nil
}
