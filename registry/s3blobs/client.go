package s3blobs

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/projhost/projhost/internal/awsconfig"
)

// Defaults of NewClient.
const (
	// LocalRegion is the region used with an explicit endpoint when none is configured.
	LocalRegion = awsconfig.LocalRegion
	// DefaultAttemptTimeout bounds one HTTP attempt: long enough for a 64 MiB module
	// (registry.DefaultMaxModuleSize) at a few MB/s.
	DefaultAttemptTimeout = 2 * time.Minute
)

// ClientConfig configures NewClient. The zero value is AWS's default chain.
type ClientConfig struct {
	// Endpoint is the S3 endpoint URL, e.g. "http://127.0.0.1:4569" for s3rver
	// (tools/s3rver). "" (the default) is AWS's endpoint for the region (or AWS_ENDPOINT_URL*).
	// With one, buckets are addressed path-style (ENDPOINT/BUCKET/KEY: local servers have no
	// per-bucket host names), IMDS is not consulted, the region defaults to LocalRegion and
	// dummy credentials stand in when none are configured (internal/awsconfig).
	Endpoint string
	// Region overrides the configured region when not "".
	Region string
	// AccessKeyID and SecretAccessKey, when both set, are used instead of the default chain.
	AccessKeyID, SecretAccessKey string
	// Base is used (copied, its HTTP client and retryer kept) instead of loading the default
	// chain when not nil.
	Base *aws.Config
	// AttemptTimeout bounds one HTTP attempt (<= 0: DefaultAttemptTimeout). Not applied with
	// Base, whose HTTP client is kept.
	AttemptTimeout time.Duration
}

// NewClient returns an S3 client for New and Open. Retries are the SDK's standard ones (3
// attempts). Uploads carry the SDK's default checksum (s3rver 3.7.1 takes it); responses are
// not checked against S3's checksums (aws.ResponseChecksumValidationWhenRequired): Get checks
// each module's SHA-256 itself, and the SDK would otherwise log a line on every GetObject
// from a server that sends none. Errors: loading the shared configuration failed.
func NewClient(ctx context.Context, c ClientConfig) (*s3.Client, error) {
	o := awsconfig.Options{Endpoint: c.Endpoint, Region: c.Region, Base: c.Base}
	if c.AccessKeyID != "" && c.SecretAccessKey != "" {
		o.Credentials = credentials.NewStaticCredentialsProvider(c.AccessKeyID, c.SecretAccessKey, "")
	}
	cfg, err := awsconfig.Load(ctx, o)
	if err != nil {
		return nil, fmt.Errorf("s3blobs: %w", err)
	}
	if c.Base == nil {
		attempt := c.AttemptTimeout
		if attempt <= 0 {
			attempt = DefaultAttemptTimeout
		}
		cfg.HTTPClient = awshttp.NewBuildableClient().WithTimeout(attempt)
	}
	cfg.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	return s3.NewFromConfig(cfg, func(so *s3.Options) {
		if c.Endpoint != "" {
			so.BaseEndpoint = aws.String(c.Endpoint)
			so.UsePathStyle = true
		}
	}), nil
}
