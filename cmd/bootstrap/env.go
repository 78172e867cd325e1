package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
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

// settings are the environment's values, checked.
type settings struct {
	projection             string
	bucket, prefix         string
	tablePrefix, region    string
	dynamoEndpoint, s3Endp string
	policy                 projection.Policy
	memPages               uint32
	deadline               time.Duration
	trusted                bool
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
	ms := getenv(lambda.EnvModuleStore)
	if ms == "" {
		return bad(lambda.EnvModuleStore, fmt.Errorf("required: s3://BUCKET[/PREFIX], the module store `projhost deploy` uses"))
	}
	var err error
	if s.bucket, s.prefix, err = s3blobs.ParseURL(ms); err != nil {
		return bad(lambda.EnvModuleStore, err)
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
		if s.trusted, err = strconv.ParseBool(v); err != nil {
			return bad(lambda.EnvTrusted, fmt.Errorf("%q: want true or false", v))
		}
	}
	if s.reserve, err = duration(getenv(lambda.EnvReserve), lambda.DefaultReserve); err != nil || s.reserve <= 0 {
		return bad(lambda.EnvReserve, fmt.Errorf("%q: want a positive duration, e.g. 1s", getenv(lambda.EnvReserve)))
	}
	if err := s.logLevel.UnmarshalText([]byte(or(getenv(lambda.EnvLogLevel), "info"))); err != nil {
		return bad(lambda.EnvLogLevel, fmt.Errorf("%q: use debug, info, warn or error", getenv(lambda.EnvLogLevel)))
	}
	s.cacheDir = or(s.cacheDir, DefaultCacheDir)
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

// build makes the Handler of s: the DynamoDB stores, the module store (its bucket checked), the
// runtime with its compilation cache, and the core's configuration (checked by lambda.New:
// projection.Config.Validate).
func build(ctx context.Context, s settings, logger *slog.Logger) (*lambda.Handler, error) {
	st, err := dynamo.Open(ctx, dynamo.Config{Endpoint: s.dynamoEndpoint, Region: s.region, Prefix: s.tablePrefix})
	if err != nil {
		return nil, fmt.Errorf("PROJHOST_TABLE_PREFIX / DynamoDB: %w", err)
	}
	c, err := s3blobs.NewClient(ctx, s3blobs.ClientConfig{Endpoint: s.s3Endp, Region: s.region})
	if err != nil {
		return nil, err
	}
	blobs, err := s3blobs.Open(ctx, c, s.bucket, s.prefix)
	if err != nil {
		return nil, fmt.Errorf("PROJHOST_MODULE_STORE: %w", err)
	}
	rt, err := host.NewRuntime(ctx, host.WithCacheDir(s.cacheDir), host.WithMemoryLimitPages(s.memPages), host.WithLogger(logger))
	if err != nil {
		return nil, err
	}
	return lambda.New(lambda.Config{
		Core:    projection.Config{Projection: s.projection, Stores: st, Policy: s.policy, Logger: logger},
		Blobs:   blobs,
		Runtime: rt,
		ModuleOptions: []host.ModuleOption{host.WithBatchDeadline(s.deadline),
			host.WithTrusted(s.trusted)},
		Reserve: s.reserve,
	})
}
