package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/spf13/cobra"

	"github.com/projhost/projhost/internal/eventfile"
	"github.com/projhost/projhost/internal/kinesisadmin"
	kinesissrc "github.com/projhost/projhost/source/kinesis"
)

// kinesisPutAttempt is the default HTTP attempt timeout of `kinesis put`: long, because a
// PutRecords of 500 takes seconds on a loaded local server, and an attempt that times out is
// retried by the SDK and may then be stored twice.
const kinesisPutAttempt = 2 * time.Minute

// maxStreamShards bounds --shards of create and update-shard-count: Kinesis' default shard
// quota per account in most regions (Developer Guide, "Quotas and limits"; raise it with AWS
// and this check with it) is lower; UpdateShardCount refuses what the account cannot take.
const maxStreamShards = 10000

func init() {
	kc := &cobra.Command{Use: "kinesis", Short: "Create, fill and reshard Kinesis streams (for local use and tests: kinesis-local, or AWS)",
		Long: `Create, fill and reshard Kinesis Data Streams streams, for local use and tests. Each verb
takes --kinesis-endpoint (e.g. http://127.0.0.1:4568 for tools/kinesis-local; default: AWS through
the default credential and region chain) and --region. Resharding verbs wait until the stream is
ACTIVE again.`}

	var cShards int
	create := kinesisVerb(&cobra.Command{
		Use:   "create",
		Short: "Create a stream of --shards shards (provisioned) and wait until it is ACTIVE",
		Args:  cobra.NoArgs,
	}, func(cmd *cobra.Command, _ []string, c *kinesis.Client, stream string) error {
		if err := checkShardCount(cShards); err != nil {
			return err
		}
		if kinesisadmin.IsARN(stream) {
			return fmt.Errorf("--stream: create takes a stream name, not an ARN")
		}
		ctx := cmd.Context()
		if _, err := c.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String(stream), ShardCount: aws.Int32(int32(cShards)),
			StreamModeDetails: &types.StreamModeDetails{StreamMode: types.StreamModeProvisioned}}); err != nil {
			return fmt.Errorf("creating stream %s: %w", stream, err)
		}
		arn, err := kinesisadmin.WaitActive(ctx, c, stream)
		if err != nil {
			return err
		}
		fmt.Fprintf(cmd.OutOrStdout(), "stream %s with %d shards is ACTIVE: %s\n", stream, cShards, arn)
		return nil
	})
	create.Flags().IntVar(&cShards, "shards", 4, fmt.Sprintf("number of shards, 1 to %d", maxStreamShards))

	var keyField string
	put := kinesisVerb(&cobra.Command{
		Use:   "put [FILE|-]",
		Short: "Put events from a JSON array or JSON lines file (gzip accepted) as Kinesis records; - or no file reads stdin",
		Long: `Put events from a JSON array or JSON lines file (gzip accepted; - or no file reads stdin) as
records of --stream, one record per element: its compact JSON as data, its --key-field (a string
or number; valid UTF-8, 1 to 256 characters) as partition key. The journal's input formats and
rules (projhost journal append).

Records go in PutRecords calls of at most 500 records and 5 MiB (data and partition keys; a
record is at most 1 MiB), one call after the other. Entries a call refuses (throttling, an
internal failure) are sent again, only they, with backoff (100ms doubling to 5s, 20 rounds).
Delivery is AT LEAST ONCE: a call whose answer is lost (a timeout, a dropped connection) is
retried by the SDK and its records may be stored twice; and a record sent again lands after
the records that followed it, so one key's order holds only when nothing was resent (printed).
It prints the records put and records/s on stderr; an interrupted or failed put says how many
of the input's first records are stored.`,
		Args: cobra.MaximumNArgs(1),
	}, func(cmd *cobra.Command, args []string, c *kinesis.Client, stream string) error {
		in, name, closeIn, err := openInput(cmd, args)
		if err != nil {
			return err
		}
		defer closeIn()
		ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		p := kinesisadmin.NewPutter(c, stream)
		start := time.Now()
		err = eventfile.Scan(in, keyField, func(i int, key string, raw []byte) error {
			err := p.Add(ctx, kinesisadmin.Record{PartitionKey: key, Data: append([]byte(nil), raw...)})
			if err != nil {
				return fmt.Errorf("element %d: %w", i, err)
			}
			return nil
		})
		if err == nil {
			err = p.Flush(ctx)
		}
		st := p.Stats()
		if err != nil {
			what := "failed"
			if ctx.Err() != nil {
				what = "interrupted"
			}
			return fmt.Errorf("%s: %s: %w: the input's first %d records are stored (%d records put in all); put the rest again without them (records of the unconfirmed batch may then be stored twice)",
				name, what, err, p.Stored(), st.Records)
		}
		el := time.Since(start)
		fmt.Fprintf(cmd.ErrOrStderr(), "put %d records from %s to %s in %s (%.0f records/s, %d PutRecords calls, %d entries resent)\n",
			st.Records, name, stream, el.Round(time.Millisecond), float64(st.Records)/el.Seconds(), st.Calls, st.Resent)
		return nil
	})
	put.Flags().StringVar(&keyField, "key-field", "origin", "top-level JSON field used as the partition key")

	var sShard, sAt string
	split := kinesisVerb(&cobra.Command{
		Use:   "split",
		Short: "Split --shard in two at --at (default the middle of its hash key range) and wait until the stream is ACTIVE",
		Args:  cobra.NoArgs,
	}, func(cmd *cobra.Command, _ []string, c *kinesis.Client, stream string) error {
		ctx := cmd.Context()
		if sShard == "" {
			return fmt.Errorf("--shard is required")
		}
		sh, err := kinesisadmin.FindOpenShard(ctx, c, stream, sShard)
		if err != nil {
			return err
		}
		at := sAt
		if at == "" {
			if at, err = kinesisadmin.MidHashKey(sh); err != nil {
				return err
			}
		} else if err := kinesisadmin.CheckSplitKey(sh, at); err != nil {
			return err
		}
		in := &kinesis.SplitShardInput{ShardToSplit: aws.String(sShard), NewStartingHashKey: aws.String(at)}
		in.StreamName, in.StreamARN = kinesisadmin.Names(stream)
		if _, err := c.SplitShard(ctx, in); err != nil {
			return fmt.Errorf("splitting shard %s of %s at %s: %w", sShard, stream, at, err)
		}
		return reshardDone(ctx, cmd.OutOrStdout(), c, stream, fmt.Sprintf("split %s at hash key %s", sShard, at))
	})
	split.Flags().StringVar(&sShard, "shard", "", "shard to split (an open shard id, e.g. shardId-000000000001)")
	split.Flags().StringVar(&sAt, "at", "", "starting hash key of the upper child (decimal, above the shard's starting hash key, at most its ending one; default the middle)")

	var mShards []string
	merge := kinesisVerb(&cobra.Command{
		Use:   "merge",
		Short: "Merge two adjacent shards (--shard A --shard B, in either order) and wait until the stream is ACTIVE",
		Args:  cobra.NoArgs,
	}, func(cmd *cobra.Command, _ []string, c *kinesis.Client, stream string) error {
		ctx := cmd.Context()
		if len(mShards) != 2 || mShards[0] == mShards[1] {
			return fmt.Errorf("merge takes two different shards: --shard A --shard B")
		}
		a, err := kinesisadmin.FindOpenShard(ctx, c, stream, mShards[0])
		if err != nil {
			return err
		}
		b, err := kinesisadmin.FindOpenShard(ctx, c, stream, mShards[1])
		if err != nil {
			return err
		}
		// The lower hash key range first: Kinesis takes either order, kinesis-local only this one.
		if kinesisadmin.StartKey(a).Cmp(kinesisadmin.StartKey(b)) > 0 {
			a, b = b, a
		}
		in := &kinesis.MergeShardsInput{ShardToMerge: a.ShardId, AdjacentShardToMerge: b.ShardId}
		in.StreamName, in.StreamARN = kinesisadmin.Names(stream)
		if _, err := c.MergeShards(ctx, in); err != nil {
			return fmt.Errorf("merging shards %s and %s of %s: %w", aws.ToString(a.ShardId), aws.ToString(b.ShardId), stream, err)
		}
		return reshardDone(ctx, cmd.OutOrStdout(), c, stream, fmt.Sprintf("merged %s and %s", aws.ToString(a.ShardId), aws.ToString(b.ShardId)))
	})
	merge.Flags().StringArrayVar(&mShards, "shard", nil, "a shard to merge (give it twice: two adjacent open shards)")

	var uShards int
	update := kinesisVerb(&cobra.Command{
		Use:   "update-shard-count",
		Short: "Reshard the stream to --shards open shards (UpdateShardCount, uniform scaling) and wait until it is ACTIVE",
		Args:  cobra.NoArgs,
	}, func(cmd *cobra.Command, _ []string, c *kinesis.Client, stream string) error {
		if err := checkShardCount(uShards); err != nil {
			return err
		}
		ctx := cmd.Context()
		in := &kinesis.UpdateShardCountInput{TargetShardCount: aws.Int32(int32(uShards)), ScalingType: types.ScalingTypeUniformScaling}
		in.StreamName, in.StreamARN = kinesisadmin.Names(stream)
		if _, err := c.UpdateShardCount(ctx, in); err != nil {
			return fmt.Errorf("updating the shard count of %s to %d: %w", stream, uShards, err)
		}
		return reshardDone(ctx, cmd.OutOrStdout(), c, stream, fmt.Sprintf("shard count updated to %d", uShards))
	})
	update.Flags().IntVar(&uShards, "shards", 0, fmt.Sprintf("target number of open shards, 1 to %d (Kinesis: at most double or half the current count per call)", maxStreamShards))

	kc.AddCommand(create, put, split, merge, update)
	rootCmd.AddCommand(kc)
}

func checkShardCount(n int) error {
	if n < 1 || n > maxStreamShards {
		return fmt.Errorf("--shards %d: use 1 to %d", n, maxStreamShards)
	}
	return nil
}

// reshardDone waits until the stream is ACTIVE and prints what was done and its open shards.
func reshardDone(ctx context.Context, w io.Writer, c *kinesis.Client, stream, what string) error {
	if _, err := kinesisadmin.WaitActive(ctx, c, stream); err != nil {
		return err
	}
	all, err := kinesisadmin.ListShards(ctx, c, stream)
	if err != nil {
		return err
	}
	var open []string
	for _, s := range all {
		if s.SequenceNumberRange == nil || s.SequenceNumberRange.EndingSequenceNumber == nil {
			open = append(open, aws.ToString(s.ShardId))
		}
	}
	fmt.Fprintf(w, "%s: %s: %d open shards %v\n", stream, what, len(open), open)
	return nil
}

// kinesisVerb completes a `projhost kinesis` verb: it registers --stream, --kinesis-endpoint,
// --region and --attempt-timeout (put: kinesisPutAttempt, else kinesis.DefaultAttemptTimeout),
// and runs run with a client once --stream is given.
func kinesisVerb(cmd *cobra.Command, run func(cmd *cobra.Command, args []string, c *kinesis.Client, stream string) error) *cobra.Command {
	var stream string
	kf := &kinesisFlags{}
	cmd.Flags().StringVar(&stream, "stream", "", "stream name (or ARN, except for create)")
	kf.register(cmd, true)
	attempt, why := kinesissrc.DefaultAttemptTimeout, ""
	if cmd.Name() == "put" {
		attempt, why = kinesisPutAttempt, "; one that times out is retried by the SDK, and its records may be stored twice"
	}
	cmd.Flags().DurationVar(&kf.attempt, "attempt-timeout", attempt, "bound on one HTTP attempt of a Kinesis call"+why)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if stream == "" {
			return fmt.Errorf("--stream is required")
		}
		c, err := kf.client(cmd.Context())
		if err != nil {
			return err
		}
		return run(cmd, args, c, stream)
	}
	return cmd
}
