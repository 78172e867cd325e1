package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/projhost/projhost/host"
	"github.com/projhost/projhost/lambda"
	"github.com/projhost/projhost/projection"
	"github.com/projhost/projhost/registry/s3blobs"
	"github.com/projhost/projhost/store/dynamo"
)

// DefaultCacheDir is the default compilation cache directory.
const DefaultCacheDir = "/tmp/projhost/wazero"

// MaxTimeout is the longest timeout a Lambda function may have (15 minutes: AWS Lambda quotas,
// "Function timeout").
const MaxTimeout = 15 * time.Minute

// fmtLong formats a long duration to the second, or as "ever" when it saturated.
func fmtLong(d time.Duration) string {
	if d == math.MaxInt64 {
		return "ever"
	}
	return d.Round(time.Second).String()
}

// validRegion reports whether r can be an AWS region: what the AWS SDK accepts in an endpoint's
// host name (a DNS label: letters, digits and '-', not at either end, at most 63).
func validRegion(r string) bool {
	if len(r) > 63 || r[0] == '-' || r[len(r)-1] == '-' {
		return false
	}
	for _, c := range r {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// settings are the environment's values, checked.
type settings struct {
	projection             string
	bucket, prefix         string
	tablePrefix, region    string
	dynamoEndpoint, s3Endp string
	policy                 projection.Policy
	memPages               uint32
	deadline               time.Duration
	cacheDir               string
	reserve                time.Duration
	logLevel               slog.Level
}

// parseEnv is the one place the environment is read and checked (package documentation),
// with the validators the CLI uses. Errors name the variable.
func parseEnv(getenv func(string) string) (settings, error) {
	s := settings{projection: getenv(lambda.EnvProjection), tablePrefix: getenv(lambda.EnvTablePrefix),
		region: getenv(lambda.EnvRegion), dynamoEndpoint: getenv(lambda.EnvDynamoEndpoint),
		s3Endp: getenv(lambda.EnvS3Endpoint), cacheDir: getenv(lambda.EnvCacheDir)}
	bad := func(name string, err error) (settings, error) { return settings{}, fmt.Errorf("%s: %w", name, err) }
	if s.projection == "" {
		return bad(lambda.EnvProjection, fmt.Errorf("required: the projection's name"))
	}
	if err := projection.CheckName(s.projection); err != nil {
		return bad(lambda.EnvProjection, err)
	}
	ms := getenv(lambda.EnvModuleStore)
	if ms == "" {
		return bad(lambda.EnvModuleStore, fmt.Errorf("required: s3://BUCKET[/PREFIX], the module store `projhost deploy` uses"))
	}
	var err error
	if s.bucket, s.prefix, err = s3blobs.ParseURL(ms); err != nil {
		return bad(lambda.EnvModuleStore, err)
	}
	if s.region != "" && !validRegion(s.region) {
		return bad(lambda.EnvRegion, fmt.Errorf("%q: want an AWS region such as us-east-1 (letters, digits and '-'), or leave it unset for AWS_REGION", s.region))
	}
	if !filepath.IsAbs(or(s.cacheDir, DefaultCacheDir)) {
		return bad(lambda.EnvCacheDir, fmt.Errorf("%q: want an absolute directory under /tmp, the only writable place in Lambda, e.g. %s", s.cacheDir, DefaultCacheDir))
	}
	for name, v := range map[string]string{lambda.EnvDynamoEndpoint: s.dynamoEndpoint, lambda.EnvS3Endpoint: s.s3Endp} {
		if u, err := url.Parse(v); v != "" && (err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "") {
			return bad(name, fmt.Errorf("%q: want an http:// or https:// URL", v))
		}
	}
	if s.policy.OnError, err = projection.ParseOnError(or(getenv(lambda.EnvOnError), string(projection.DefaultOnError))); err != nil {
		return bad(lambda.EnvOnError, err)
	}
	if v := getenv(lambda.EnvMaxAttempts); v != "" {
		if s.policy.MaxAttempts, err = strconv.Atoi(v); err != nil || s.policy.MaxAttempts < 1 {
			return bad(lambda.EnvMaxAttempts, fmt.Errorf("%q: want a whole number, at least 1", v))
		}
	}
	if s.memPages, err = host.ParseMemoryLimit(or(getenv(lambda.EnvMemoryLimit), host.DefaultMemoryLimit)); err != nil {
		return bad(lambda.EnvMemoryLimit, err)
	}
	if s.deadline, err = duration(getenv(lambda.EnvBatchDeadline), host.DefaultBatchDeadline); err != nil || s.deadline < time.Millisecond {
		return bad(lambda.EnvBatchDeadline, fmt.Errorf("%q: want a duration of at least 1ms, e.g. 5s", getenv(lambda.EnvBatchDeadline)))
	}
	if v := getenv(lambda.EnvTrusted); v != "" {
		trusted, err := strconv.ParseBool(v)
		if err != nil {
			return bad(lambda.EnvTrusted, fmt.Errorf("%q: want false (Lambda mode runs no trusted module)", v))
		}
		if trusted {
			return bad(lambda.EnvTrusted, fmt.Errorf("Lambda mode runs no trusted module: a handler call without a deadline could take the invocation's whole time, "+
				"and a record the handler loops on would then never be dead-lettered or handed back; unset it and raise %s if calls need longer", lambda.EnvBatchDeadline))
		}
	}
	if s.reserve, err = duration(getenv(lambda.EnvReserve), lambda.DefaultReserve); err != nil || s.reserve <= 0 {
		return bad(lambda.EnvReserve, fmt.Errorf("%q: want a positive duration, e.g. 1s", getenv(lambda.EnvReserve)))
	}
	if err := s.logLevel.UnmarshalText([]byte(or(getenv(lambda.EnvLogLevel), "info"))); err != nil {
		return bad(lambda.EnvLogLevel, fmt.Errorf("%q: use debug, info, warn or error", getenv(lambda.EnvLogLevel)))
	}
	s.cacheDir = or(s.cacheDir, DefaultCacheDir)
	if min := s.lambdaConfig().MinTimeout(); min > MaxTimeout {
		return bad(lambda.EnvMaxAttempts+", "+lambda.EnvBatchDeadline+" and "+lambda.EnvReserve,
			fmt.Errorf("%d attempts of up to %v and a reserve of %v need an invocation of at least %v to settle one failing record, over Lambda's %v maximum timeout: lower them",
				cmp.Or(s.policy.MaxAttempts, projection.DefaultMaxAttempts), s.deadline, s.reserve, fmtLong(min), MaxTimeout))
	}
	return s, nil
}

func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func duration(v string, def time.Duration) (time.Duration, error) {
	if v == "" {
		return def, nil
	}
	return time.ParseDuration(v)
}

// lambdaConfig is the lambda.Config of s without its stores, module store and runtime.
func (s settings) lambdaConfig() lambda.Config {
	return lambda.Config{Core: projection.Config{Projection: s.projection, Policy: s.policy},
		BatchDeadline: s.deadline, Reserve: s.reserve}
}

// build makes the Handler of s: the DynamoDB stores (their tables checked), the module store
// (its bucket checked), the runtime with its compilation cache, and the core's configuration
// (checked by lambda.New: projection.Config.Validate). Errors name the variable to look at.
func build(ctx context.Context, s settings, logger *slog.Logger) (*lambda.Handler, error) {
	dcfg := dynamo.Config{Endpoint: s.dynamoEndpoint, Region: s.region, Prefix: s.tablePrefix}
	st, err := dynamo.Open(ctx, dcfg)
	if err != nil {
		return nil, fmt.Errorf("%s / %s: %w", lambda.EnvTablePrefix, lambda.EnvRegion, err)
	}
	if err := dynamo.CheckTablesWithoutLeases(ctx, dcfg); errors.Is(err, dynamo.ErrNoTables) {
		return nil, fmt.Errorf("%s %q: %w", lambda.EnvTablePrefix, or(s.tablePrefix, dynamo.DefaultPrefix), err)
	} else if err != nil {
		return nil, fmt.Errorf("reaching DynamoDB (%s %q, %s %q): %w", lambda.EnvRegion, s.region, lambda.EnvDynamoEndpoint, s.dynamoEndpoint, err)
	}
	c, err := s3blobs.NewClient(ctx, s3blobs.ClientConfig{Endpoint: s.s3Endp, Region: s.region})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", lambda.EnvRegion, err)
	}
	blobs, err := s3blobs.Open(ctx, c, s.bucket, s.prefix)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", lambda.EnvModuleStore, err)
	}
	rt, err := host.NewRuntime(ctx, host.WithCacheDir(s.cacheDir), host.WithMemoryLimitPages(s.memPages), host.WithLogger(logger))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", lambda.EnvCacheDir, err)
	}
	cfg := s.lambdaConfig()
	cfg.Core.Stores, cfg.Core.Logger, cfg.Blobs, cfg.Runtime = st, logger, blobs, rt
	cfg.Metrics = os.Stdout // one EMF line per invocation (lambda.EMFNamespace); the logs go to stderr
	return lambda.New(cfg)
}
