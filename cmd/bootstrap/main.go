// Command bootstrap is projhost's AWS Lambda function for the provided.al2023 runtime: it runs
// one projection's active handler version over the batches a Kinesis event source mapping
// delivers (package lambda: one shard's records per invocation, batchItemFailures naming the
// first uncommitted record), with the read model, cursors, dead letters and module registry in
// DynamoDB and the module bytes in S3.
//
// Build it static, without cgo and without the RPC mode of aws-lambda-go:
//
//	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 go build -tags lambda.norpc -o bootstrap ./cmd/bootstrap
//
// (`make bootstrap`; `make build-ProjectionFunction ARTIFACTS_DIR=...` is AWS SAM's makefile
// build). Configure the function with FunctionResponseTypes [ReportBatchItemFailures] and
// ParallelizationFactor 1 (see package lambda for why, and for what the ESM's retry settings
// mean under each error policy).
//
// # Environment
//
// Read and validated once, at start-up (a bad value ends the process with a message naming the
// variable; Lambda reports it as an init error; the names are lambda.EnvVars, which the SAM
// template's test checks the function's Environment against):
//
//	PROJHOST_PROJECTION        required: the projection (its versions, read model, cursors)
//	PROJHOST_MODULE_STORE      required: s3://BUCKET[/PREFIX], where `projhost deploy` put the
//	                           module bytes (objects PREFIX/<sha256>.wasm; the bucket must exist)
//	PROJHOST_TABLE_PREFIX      DynamoDB table name prefix (default "projhost-")
//	PROJHOST_REGION            AWS region of DynamoDB and S3 (default: AWS_REGION, which
//	                           Lambda sets)
//	PROJHOST_DYNAMODB_ENDPOINT DynamoDB endpoint URL, for a local server (default: AWS's)
//	PROJHOST_S3_ENDPOINT       S3 endpoint URL, for a local server (default: AWS's); with an
//	                           endpoint and no credentials, dummy ones, as the CLI does
//	PROJHOST_ON_ERROR          error policy: stop (default), retry or dead-letter
//	PROJHOST_MAX_ATTEMPTS      handler calls of a failing batch before the policy acts, per
//	                           invocation (default 5)
//	PROJHOST_MEMORY_LIMIT      a handler instance's memory cap, e.g. 256MiB (default 128MiB)
//	PROJHOST_BATCH_DEADLINE    how long one handler call may run (default 5s)
//	PROJHOST_TRUSTED           false, or unset: Lambda mode refuses true (a call without a
//	                           deadline could use the invocation's whole time)
//	PROJHOST_CACHE_DIR         the compilation cache, an absolute path (default
//	                           /tmp/projhost/wazero: /tmp is the only writable directory in
//	                           Lambda; it survives warm starts)
//	PROJHOST_RESERVE           time kept before an invocation's deadline to commit and respond
//	                           (default 1s)
//	PROJHOST_LOG_LEVEL         debug, info (default), warn or error; logs are JSON lines on
//	                           stderr (CloudWatch Logs)
//
// Credentials are the AWS default chain's (the function's role in Lambda).
//
// # Metrics
//
// At the end of every invocation with records, one CloudWatch embedded-metric-format line on
// stdout (lambda.Config.Metrics; the metrics are listed at lambda.EMFNamespace): CloudWatch
// Logs extracts them into namespace "projhost" with dimensions projection and shard. The log
// lines are on stderr.
//
// The function's timeout must leave time for one record the handler keeps failing on:
// PROJHOST_MAX_ATTEMPTS calls of up to PROJHOST_BATCH_DEADLINE with their backoff, and
// PROJHOST_RESERVE (lambda.Config.MinTimeout; the bootstrap logs it as min_timeout when ready,
// and refuses a configuration whose minimum is over Lambda's 15-minute maximum). Each
// invocation handles its records in chunks that fit the time it has left (see package lambda).
//
// Start-up checks, each ending the process with a message naming what to fix: the environment,
// AWS_LAMBDA_RUNTIME_API (set by Lambda and by the Runtime Interface Emulator), the DynamoDB
// tables of PROJHOST_TABLE_PREFIX, the module store's bucket, the compilation cache.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	awslambda "github.com/aws/aws-lambda-go/lambda"
)

func main() {
	s, err := parseEnv(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bootstrap:", err)
		os.Exit(2)
	}
	if os.Getenv("AWS_LAMBDA_RUNTIME_API") == "" {
		fmt.Fprintln(os.Stderr, "bootstrap: AWS_LAMBDA_RUNTIME_API is not set: this program is an AWS Lambda function's bootstrap; "+
			"run it in Lambda, under the Runtime Interface Emulator (aws-lambda-rie), or with `sam local invoke`")
		os.Exit(2)
	}
	logger := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: s.logLevel}))
	slog.SetDefault(logger) // the AWS SDK's lines too
	ctx := context.Background()
	h, err := build(ctx, s, logger)
	if err != nil {
		logger.Error("bootstrap: cannot start", "err", err)
		os.Exit(1)
	}
	// Load and compile the active version in the init phase; when it fails (nothing deployed
	// yet, say), every invocation tries again.
	if err := h.Warm(ctx); err != nil {
		logger.Error("bootstrap: the active handler version cannot be loaded yet: the invocations will try again", "err", err)
	} else {
		logger.Info("bootstrap: ready", "projection", s.projection, "version", h.Version().Number,
			"min_timeout", s.lambdaConfig().MinTimeout().Round(time.Millisecond).String())
	}
	awslambda.Start(h.Handle)
}
