package dynamotables

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/logging"

	"github.com/projhost/projhost/internal/awsconfig"
)

// ItemAPI is the part of the DynamoDB client the stores use; *dynamodb.Client implements it.
// Tests may wrap it (e.g. to count requests).
type ItemAPI interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
}

// IsConditionalCheckFailed reports whether err is DynamoDB's ConditionalCheckFailedException.
func IsConditionalCheckFailed(err error) bool {
	var ccf *types.ConditionalCheckFailedException
	return errors.As(err, &ccf)
}

// IsInvalidRequest reports whether err is DynamoDB refusing a request as invalid, which no
// retry fixes: a ValidationException (an item over 400 KB, an attribute DynamoDB does not take)
// or a SerializationException (Amazon DynamoDB Developer Guide, "Error handling with
// DynamoDB": 400 errors other than throttling and conditional checks are the request's fault).
// A missing table (ResourceNotFoundException) is not one: it is fixed by creating it.
func IsInvalidRequest(err error) bool {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return false
	}
	switch ae.ErrorCode() {
	case "ValidationException", "SerializationException":
		return true
	}
	return false
}

// Defaults of NewClient.
const (
	// DefaultMaxAttempts is the number of attempts per request (first try + retries) of the SDK's
	// standard retryer. Higher than the SDK's 3 so that on-demand tables ride out throttling
	// while they scale (ProvisionedThroughputExceededException, ThrottlingException).
	DefaultMaxAttempts = 10
	// DefaultMaxBackoff caps the exponential backoff between attempts.
	DefaultMaxBackoff = 5 * time.Second
	// LocalRegion is the region used with an explicit endpoint when none is configured.
	LocalRegion = awsconfig.LocalRegion
	// DefaultAttemptTimeout bounds one HTTP attempt of a client made by NewClient without
	// WithConfig (DynamoDB answers in milliseconds; the SDK retries a timed-out attempt).
	DefaultAttemptTimeout = 10 * time.Second
)

// ClientOption configures NewClient. Options are applied in order; later ones win.
type ClientOption func(*clientOptions)

type clientOptions struct {
	endpoint    string
	region      string
	creds       aws.CredentialsProvider
	cfg         *aws.Config
	maxAttempts int
	maxBackoff  time.Duration
	attempt     time.Duration
	logger      *slog.Logger
}

// WithEndpoint sets the DynamoDB endpoint URL, e.g. "http://127.0.0.1:4567" for dynalite or
// DynamoDB Local. "" (the default) uses AWS's endpoint for the region (or AWS_ENDPOINT_URL*).
func WithEndpoint(url string) ClientOption { return func(o *clientOptions) { o.endpoint = url } }

// WithRegion sets the region. Default: the AWS default chain (AWS_REGION, shared config); with
// an endpoint and no region configured anywhere, LocalRegion.
func WithRegion(region string) ClientOption { return func(o *clientOptions) { o.region = region } }

// WithStaticCredentials uses fixed credentials instead of the default chain.
func WithStaticCredentials(accessKeyID, secretAccessKey string) ClientOption {
	return func(o *clientOptions) {
		o.creds = credentials.NewStaticCredentialsProvider(accessKeyID, secretAccessKey, "")
	}
}

// WithConfig uses cfg as the base configuration instead of loading the AWS default chain.
// Endpoint, region, credential and retry options still apply on top of it.
func WithConfig(cfg aws.Config) ClientOption { return func(o *clientOptions) { o.cfg = &cfg } }

// WithLogger routes the SDK's own log lines (retries, response-body warnings) to l, as
// structured records with source=aws-sdk (default: slog.Default()).
func WithLogger(l *slog.Logger) ClientOption { return func(o *clientOptions) { o.logger = l } }

// WithAttemptTimeout bounds one HTTP attempt (default DefaultAttemptTimeout; values <= 0 keep
// the default). It does not apply with WithConfig, whose HTTP client is kept.
func WithAttemptTimeout(d time.Duration) ClientOption {
	return func(o *clientOptions) {
		if d > 0 {
			o.attempt = d
		}
	}
}

// WithMaxAttempts sets the attempts per request (default DefaultMaxAttempts; values < 1 keep
// the default).
func WithMaxAttempts(n int) ClientOption { return func(o *clientOptions) { o.maxAttempts = n } }

// NewClient returns a DynamoDB client.
//
// Without WithConfig it loads the AWS default chain (environment, shared config, SSO, IMDS...).
// With an endpoint set (a local server), IMDS is not consulted, the region defaults to
// LocalRegion, and when no credentials are found static dummy credentials ("local"/"local")
// are used, since local servers accept any signature.
//
// The SDK logs through WithLogger's logger (slog.Default()), never straight to stderr. Response
// checksums: the CRC32 of DynamoDB responses (x-amz-crc32) is validated on AWS's endpoint;
// with an endpoint set it is not, since Amazon's DynamoDB Local 1.25 answers every refused
// conditional write with "x-amz-crc32: 0" (the SDK warned "response did not match expected
// checksum" on each, after having read the body whole; a loopback connection has TCP's
// checksums). DynamoDB has no flexible checksums: aws.Config.ResponseChecksumValidation does
// not apply.
//
// Retries are the SDK's standard retryer (exponential backoff with jitter, throttling and
// transient errors) with DefaultMaxAttempts attempts, DefaultMaxBackoff, and no client-side
// retry quota (so sustained throttling slows writers down instead of failing them).
// Errors: loading the shared configuration failed.
func NewClient(ctx context.Context, opts ...ClientOption) (*dynamodb.Client, error) {
	o := clientOptions{maxAttempts: DefaultMaxAttempts, maxBackoff: DefaultMaxBackoff, attempt: DefaultAttemptTimeout}
	for _, fn := range opts {
		fn(&o)
	}
	if o.maxAttempts < 1 {
		o.maxAttempts = DefaultMaxAttempts
	}
	cfg, err := awsconfig.Load(ctx, awsconfig.Options{Endpoint: o.endpoint, Region: o.region, Credentials: o.creds, Base: o.cfg})
	if err != nil {
		return nil, fmt.Errorf("dynamotables: %w", err)
	}
	maxAttempts, maxBackoff := o.maxAttempts, o.maxBackoff
	cfg.Retryer = func() aws.Retryer {
		return retry.NewStandard(func(so *retry.StandardOptions) {
			so.MaxAttempts = maxAttempts
			so.MaxBackoff = maxBackoff
			so.RateLimiter = ratelimit.None
		})
	}
	if o.cfg == nil {
		// Each HTTP attempt gets a deadline so a black-holed connection fails and is retried
		// instead of hanging the caller (TCP retransmissions alone take ~15 minutes).
		cfg.HTTPClient = awshttp.NewBuildableClient().WithTimeout(o.attempt)
	}
	cfg.Logger = sdkLogger(o.logger)
	endpoint := o.endpoint
	return dynamodb.NewFromConfig(cfg, func(do *dynamodb.Options) {
		if endpoint != "" {
			do.BaseEndpoint = aws.String(endpoint)
			do.DisableValidateResponseChecksum = true
		}
	}), nil
}

// sdkLogger adapts l (nil: slog.Default() at each line) to the SDK's logging.Logger: warnings
// at slog's warn level, debug lines at debug, with source=aws-sdk.
func sdkLogger(l *slog.Logger) logging.Logger {
	return logging.LoggerFunc(func(c logging.Classification, format string, v ...any) {
		lg := l
		if lg == nil {
			lg = slog.Default()
		}
		lvl := slog.LevelInfo
		switch c {
		case logging.Warn:
			lvl = slog.LevelWarn
		case logging.Debug:
			lvl = slog.LevelDebug
		}
		lg.Log(context.Background(), lvl, fmt.Sprintf(format, v...), "source", "aws-sdk")
	})
}
