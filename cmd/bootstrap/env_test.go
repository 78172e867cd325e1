package main

import (
	"log/slog"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/lambda"
	"github.com/projhost/projhost/projection"
)

func TestParseEnv(t *testing.T) {
	base := map[string]string{"PROJHOST_PROJECTION": "flights", "PROJHOST_MODULE_STORE": "s3://modules-bucket/projhost"}
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	s, err := parseEnv(env())
	require.NoError(t, err)
	require.Equal(t, "modules-bucket", s.bucket)
	require.Equal(t, "projhost/", s.prefix)
	require.Equal(t, projection.Stop, s.policy.OnError)
	require.Equal(t, 0, s.policy.MaxAttempts, "the core's default")
	require.Equal(t, uint32(2048), s.memPages)
	require.Equal(t, 5*time.Second, s.deadline)
	require.Equal(t, DefaultCacheDir, s.cacheDir)
	require.Equal(t, time.Second, s.reserve)
	require.Equal(t, slog.LevelInfo, s.logLevel)

	s, err = parseEnv(env("PROJHOST_ON_ERROR", "dead-letter", "PROJHOST_MAX_ATTEMPTS", "3", "PROJHOST_MEMORY_LIMIT", "256MiB",
		"PROJHOST_TRUSTED", "false", "PROJHOST_LOG_LEVEL", "debug", "PROJHOST_S3_ENDPOINT", "http://127.0.0.1:4569",
		"PROJHOST_REGION", "eu-west-1", "PROJHOST_CACHE_DIR", "/tmp/cache"))
	require.NoError(t, err)
	require.Equal(t, projection.Policy{OnError: projection.DeadLetter, MaxAttempts: 3}, s.policy)
	require.Equal(t, uint32(4096), s.memPages)
	require.Equal(t, "eu-west-1", s.region)
	require.Equal(t, "/tmp/cache", s.cacheDir)
	// One call, then 3 calls of 5s (plus a tenth and 20ms each) with 100ms + 200ms of backoff,
	// then 1s of reserve.
	require.Equal(t, 4*(5500+20)*time.Millisecond+300*time.Millisecond+time.Second, s.lambdaConfig().MinTimeout())

	for _, c := range []struct {
		kv   []string
		want string // and the variable's name
	}{
		{[]string{"PROJHOST_PROJECTION", ""}, "required"},
		{[]string{"PROJHOST_MODULE_STORE", ""}, "required"},
		{[]string{"PROJHOST_MODULE_STORE", "/var/modules"}, "s3://"},
		{[]string{"PROJHOST_MODULE_STORE", "s3://Bad_Bucket"}, "bucket"},
		{[]string{"PROJHOST_DYNAMODB_ENDPOINT", "127.0.0.1:4567"}, "want an http:// or https:// URL"},
		{[]string{"PROJHOST_S3_ENDPOINT", "ftp://x"}, "want an http:// or https:// URL"},
		{[]string{"PROJHOST_ON_ERROR", "skip"}, "unknown error policy"},
		{[]string{"PROJHOST_MAX_ATTEMPTS", "0"}, "at least 1"},
		{[]string{"PROJHOST_MEMORY_LIMIT", "5GiB"}, "at most 4GiB"},
		{[]string{"PROJHOST_BATCH_DEADLINE", "10us"}, "at least 1ms"},
		{[]string{"PROJHOST_TRUSTED", "maybe"}, "want false"},
		{[]string{"PROJHOST_TRUSTED", "true"}, "runs no trusted module"},
		{[]string{"PROJHOST_PROJECTION", "a\nb"}, "control character"},
		{[]string{"PROJHOST_REGION", "us east 1"}, "want an AWS region"},
		{[]string{"PROJHOST_REGION", "-us-east-1"}, "want an AWS region"},
		{[]string{"PROJHOST_CACHE_DIR", "cache"}, "want an absolute directory"},
		{[]string{"PROJHOST_MAX_ATTEMPTS", "1000000"}, "over Lambda's 15m0s maximum timeout"},
		{[]string{"PROJHOST_BATCH_DEADLINE", "5m"}, "over Lambda's 15m0s maximum timeout"},
		{[]string{"PROJHOST_MAX_ATTEMPTS", "9223372036854775807"}, "need an invocation of at least ever"},
		{[]string{"PROJHOST_MAX_ATTEMPTS", "3000000000"}, "over Lambda's 15m0s maximum timeout"},
		{[]string{"PROJHOST_BATCH_DEADLINE", "2562047h"}, "over Lambda's 15m0s maximum timeout"},
		{[]string{"PROJHOST_RESERVE", "20m"}, "and a reserve of 20m0s need"},
		{[]string{"PROJHOST_RESERVE", "-1s"}, "positive duration"},
		{[]string{"PROJHOST_LOG_LEVEL", "loud"}, "use debug, info, warn or error"},
	} {
		_, err := parseEnv(env(c.kv...))
		require.ErrorContains(t, err, c.kv[0], "%v", c.kv)
		require.ErrorContains(t, err, c.want, "%v", c.kv)
	}
}

// TestEnvVarsOneList: parseEnv reads exactly the variables lambda.EnvVars lists (the list the SAM
// template's test checks the function's Environment against), and refuses to start without each
// of lambda.EnvRequired.
func TestEnvVarsOneList(t *testing.T) {
	full := map[string]string{lambda.EnvProjection: "flights", lambda.EnvModuleStore: "s3://modules-bucket"}
	read := map[string]bool{}
	_, err := parseEnv(func(k string) string { read[k] = true; return full[k] })
	require.NoError(t, err)
	require.ElementsMatch(t, lambda.EnvVars(), slices.Collect(maps.Keys(read)))
	for _, name := range lambda.EnvRequired() {
		_, err := parseEnv(func(k string) string {
			if k == name {
				return ""
			}
			return full[k]
		})
		require.ErrorContains(t, err, name+": required")
	}
}
