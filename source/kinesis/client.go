package kinesis

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/projhost/projhost/internal/awsconfig"
)

// Defaults of NewClient.
const (
	// LocalRegion is the region used with an explicit endpoint when none is configured.
	LocalRegion = awsconfig.LocalRegion
	// DefaultAttemptTimeout bounds one HTTP attempt (GetRecords answers in well under a second;
	// the SDK retries a timed-out attempt of the calls it retries).
	DefaultAttemptTimeout = 10 * time.Second
)

// ClientOption configures NewClient. Options are applied in order; later ones win.
type ClientOption interface{ applyClient(*clientOptions) }

type clientOptionFunc func(*clientOptions)

func (f clientOptionFunc) applyClient(o *clientOptions) { f(o) }

type clientOptions struct {
	endpoint string
	region   string
	creds    aws.CredentialsProvider
	cfg      *aws.Config
	attempt  time.Duration
}

// WithEndpoint sets the Kinesis endpoint URL, e.g. "http://127.0.0.1:4568" for kinesis-local
// (tools/kinesis-local). "" (the default) uses AWS's endpoint for the region (or
// AWS_ENDPOINT_URL*).
func WithEndpoint(url string) ClientOption {
	return clientOptionFunc(func(o *clientOptions) { o.endpoint = url })
}

// WithRegion sets the region. Default: the AWS default chain (AWS_REGION, shared config); with
// an endpoint and no region configured anywhere, LocalRegion.
func WithRegion(region string) ClientOption {
	return clientOptionFunc(func(o *clientOptions) { o.region = region })
}

// WithStaticCredentials uses fixed credentials instead of the default chain.
func WithStaticCredentials(accessKeyID, secretAccessKey string) ClientOption {
	return clientOptionFunc(func(o *clientOptions) {
		o.creds = credentials.NewStaticCredentialsProvider(accessKeyID, secretAccessKey, "")
	})
}

// WithConfig uses cfg as the base configuration instead of loading the AWS default chain (its
// HTTP client and retryer are kept). Endpoint, region and credential options still apply.
func WithConfig(cfg aws.Config) ClientOption {
	return clientOptionFunc(func(o *clientOptions) { o.cfg = &cfg })
}

// WithAttemptTimeout bounds one HTTP attempt (default DefaultAttemptTimeout; values <= 0 keep
// the default). It does not apply with WithConfig, whose HTTP client is kept. An attempt that
// times out is retried by the SDK, and a PutRecords whose first attempt was applied late is then
// applied twice (Kinesis producers are at-least-once): a slow local server wants a long one.
func WithAttemptTimeout(d time.Duration) ClientOption {
	return clientOptionFunc(func(o *clientOptions) {
		if d > 0 {
			o.attempt = d
		}
	})
}

// NewClient returns a Kinesis Data Streams client for New.
//
// Without WithConfig it loads the AWS default chain (environment, shared config, SSO, IMDS...)
// and bounds each HTTP attempt (WithAttemptTimeout). With an endpoint set (a local server),
// IMDS is not consulted, the region defaults to LocalRegion, and when no credentials are found
// static dummy credentials ("local"/"local") are used, since local servers accept any signature.
//
// Retries are the SDK's standard ones (3 attempts) for the calls the source leaves to the SDK
// (ListShards, GetShardIterator); GetRecords is retried by the source itself (see Source).
// Errors: loading the shared configuration failed.
func NewClient(ctx context.Context, opts ...ClientOption) (*kinesis.Client, error) {
	o := clientOptions{attempt: DefaultAttemptTimeout}
	for _, opt := range opts {
		opt.applyClient(&o)
	}
	cfg, err := awsconfig.Load(ctx, awsconfig.Options{Endpoint: o.endpoint, Region: o.region, Credentials: o.creds, Base: o.cfg})
	if err != nil {
		return nil, fmt.Errorf("kinesis: %w", err)
	}
	if o.cfg == nil {
		cfg.HTTPClient = awshttp.NewBuildableClient().WithTimeout(o.attempt)
	}
	endpoint := o.endpoint
	return kinesis.NewFromConfig(cfg, func(ko *kinesis.Options) {
		if endpoint != "" {
			ko.BaseEndpoint = aws.String(endpoint)
		}
	}), nil
}
