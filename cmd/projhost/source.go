package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/spf13/cobra"

	"github.com/projhost/projhost/source"
	"github.com/projhost/projhost/source/journal"
	kinesissrc "github.com/projhost/projhost/source/kinesis"
)

// Sources of --source.
const (
	sourceJournal = "journal"
	sourceKinesis = "kinesis"
)

// kinesisFlags are the flags that reach a Kinesis stream (every verb talking to Kinesis).
type kinesisFlags struct {
	endpoint string
	region   string
	attempt  time.Duration
}

// registerKinesis registers --kinesis-endpoint (and, when withRegion, --region: `run` and
// `status` share storeFlags' --region with DynamoDB).
func (f *kinesisFlags) register(cmd *cobra.Command, withRegion bool) {
	cmd.Flags().StringVar(&f.endpoint, "kinesis-endpoint", "", "Kinesis endpoint URL, e.g. http://127.0.0.1:4568 for kinesis-local (default: the AWS default chain's for the region)")
	if withRegion {
		cmd.Flags().StringVar(&f.region, "region", "", "AWS region (default: from the AWS config; us-east-1 with a local endpoint)")
	}
}

// client returns a Kinesis client (kinesis.NewClient: the AWS default chain, or dummy
// credentials and us-east-1 with a local endpoint and nothing configured).
func (f *kinesisFlags) client(ctx context.Context) (*kinesis.Client, error) {
	return kinesissrc.NewClient(ctx, kinesissrc.WithEndpoint(f.endpoint), kinesissrc.WithRegion(f.region), kinesissrc.WithAttemptTimeout(f.attempt))
}

// sourceFlags choose the stream a projection reads: --source journal (the local journal in
// --data, the default) or kinesis (--stream, --kinesis-endpoint, --initial-position). check is
// the one place they are validated, for every verb that takes them (run, status).
type sourceFlags struct {
	kind    string
	stream  string
	initial string
	kinesisFlags

	pos kinesissrc.InitialPosition // from initial, by check
}

func (f *sourceFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.kind, "source", sourceJournal, "where the events come from: journal (the local journal in --data) or kinesis (--stream)")
	cmd.Flags().StringVar(&f.stream, "stream", "", "--source kinesis: the stream's name or ARN (arn:aws:kinesis:REGION:ACCOUNT:stream/NAME)")
	cmd.Flags().StringVar(&f.initial, "initial-position", kinesissrc.TrimHorizon.String(), "--source kinesis: where a shard without a cursor starts: TRIM_HORIZON (its oldest record), LATEST (records put after the worker opened it) or AT_TIMESTAMP=<RFC 3339 time>")
	f.kinesisFlags.register(cmd, false)
}

// check validates the source flags together with the store flags sf of the same command
// (cmd tells which flags were given). Errors name the flags and what to do.
func (f *sourceFlags) check(cmd *cobra.Command, sf *storeFlags) error {
	given := func(name string) bool { return cmd.Flags().Changed(name) }
	switch f.kind {
	case sourceJournal:
		for _, fl := range []string{"stream", "kinesis-endpoint", "initial-position"} {
			if given(fl) {
				return fmt.Errorf("--%s needs --source kinesis (the local journal is read from --data)", fl)
			}
		}
		return nil
	case sourceKinesis:
	default:
		return fmt.Errorf("unknown --source %q: use journal or kinesis", f.kind)
	}
	if f.stream == "" {
		return fmt.Errorf("--source kinesis needs --stream NAME or ARN")
	}
	pos, err := kinesissrc.ParseInitialPosition(f.initial)
	if err != nil {
		return fmt.Errorf("--initial-position: %w", err)
	}
	f.pos = pos
	switch {
	case sf.embedded() && !given("data"):
		return fmt.Errorf("--source kinesis with --store sqlite needs --data DIR (the embedded store's directory; Kinesis keeps no files), or use --store dynamodb")
	case !sf.embedded() && given("data"):
		return fmt.Errorf("--data is not used with --source kinesis and --store %s (nothing is kept in files): drop it", sf.store)
	}
	f.region = sf.region
	return nil
}

// openedSource is a source with what else the commands use it for.
type openedSource struct {
	source.Source
	header  source.Header // the journal's heads; nil for Kinesis
	kinesis *kinesissrc.Source
	close   func() error
}

// open opens the source checked by check: the journal in sf.data (with open: journal.Open or
// journal.OpenReadOnly), or the Kinesis stream (no call made yet).
func (f *sourceFlags) open(ctx context.Context, sf *storeFlags, open func(string, ...journal.Option) (*journal.Journal, error), logger *slog.Logger) (*openedSource, error) {
	if f.kind != sourceKinesis {
		jopts, err := sf.journalOptions()
		if err != nil {
			return nil, err
		}
		j, err := openJournal(sf.data, open, jopts...)
		if err != nil {
			return nil, err
		}
		return &openedSource{Source: j, header: j, close: j.Close}, nil
	}
	c, err := f.client(ctx)
	if err != nil {
		return nil, err
	}
	opts := []kinesissrc.Option{kinesissrc.WithInitialPosition(f.pos)}
	if logger != nil {
		opts = append(opts, kinesissrc.WithLogger(logger))
	}
	k, err := kinesissrc.New(c, f.stream, opts...)
	if err != nil {
		return nil, err
	}
	return &openedSource{Source: k, kinesis: k, close: func() error { return nil }}, nil
}
