package main

import (
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/projhost/projhost/manage"
	"github.com/projhost/projhost/source"
	"github.com/projhost/projhost/source/journal"
)

// checkShardFlag refuses a --shard given empty (an unset shell variable): "" means the whole
// projection, which must not be what a one-shard command silently becomes.
func checkShardFlag(cmd *cobra.Command, shard string) error {
	if cmd.Flags().Changed("shard") && shard == "" {
		return fmt.Errorf("--shard is empty: name a shard (projhost status lists them), or leave --shard out for every shard")
	}
	return nil
}

// checkNameShard checks the --name and --shard of a command that works on a projection or one
// of its shards.
func checkNameShard(cmd *cobra.Command, name, shard string) error {
	if err := checkShardFlag(cmd, shard); err != nil {
		return err
	}
	if name == "" {
		return fmt.Errorf("--name is required")
	}
	return nil
}

func init() {
	var sf storeFlags
	var name, shard string
	pause := &cobra.Command{
		Use:   "pause",
		Short: "Pause a projection (every shard, later ones too) or one shard, on every worker",
		Long: `Pause stops the handling of --shard, or without --shard of the whole projection (shards that
appear later by a split or merge included), on every worker, until projhost resume. The pause is
kept in the store: restarts and lease moves keep it. Each worker notices within about a second
(it reads the pauses once a second), commits what it handled, and then keeps the shard's lease
but reads nothing, calls no handler and leaves the cursor as it is; leases stay balanced.
Lambda mode does not read it: disable the function's event source mapping instead.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkNameShard(cmd, name, shard); err != nil {
				return err
			}
			ctx := cmd.Context()
			st, err := sf.open(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			if err := manage.Pause(ctx, st.Stores, name, shard); err != nil {
				return err
			}
			if shard == "" {
				fmt.Fprintf(cmd.OutOrStdout(), "paused %s (every shard)\n", name)
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "paused %s shard %s\n", name, shard)
			}
			return nil
		},
	}
	sf.register(pause)
	pause.Flags().StringVar(&name, "name", "", "projection name (required)")
	pause.Flags().StringVar(&shard, "shard", "", "only this shard (default: the whole projection)")
	rootCmd.AddCommand(pause)

	var rsf storeFlags
	var srcf sourceFlags
	var rname, rshard, to string
	var settle time.Duration
	reset := &cobra.Command{
		Use:   "reset",
		Short: "Move a shard's cursor (or every shard's) to a sequence number, the start, the head or a time",
		Long: `Reset moves the cursor of --shard, or of every unfinished shard, while workers run: it pauses
them, waits --settle for their owners to commit, revokes each lease at a new epoch so that any
write still in flight from its owner is refused, resets the read model's exactly-once markers of
the shard and writes the cursor, then lifts the pause (a pause given before stays). --to is
  SEQ            the shard goes on after event SEQ (SEQ itself is not handled again)
  trim-horizon   no cursor: the shard starts over from its first event (Kinesis: run's
                 --initial-position, TRIM_HORIZON by default)
  latest         the shard's last event now: only later events are handled
  TIME           an RFC 3339 time (2026-01-02T15:04:05Z): from the first event appended at or
                 after it (the local journal records append times; Kinesis: refused)
A reset does not undo the read model: the handler applies the events after the new cursor again
on top of the documents as they are. Use it with idempotent handlers or to skip events, or use
projhost rebuild. Finished shards (closed and read to their end) are left as they are.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkNameShard(cmd, rname, rshard); err != nil {
				return err
			}
			target, err := manage.ParseTarget(to)
			if err != nil {
				return fmt.Errorf("--to: %w", err)
			}
			if err := srcf.check(cmd, &rsf); err != nil {
				return err
			}
			ctx := cmd.Context()
			var src *openedSource
			if target.Kind == manage.ToLatest || target.Kind == manage.ToTime {
				if src, err = srcf.open(ctx, &rsf, journal.OpenReadOnly, nil); err != nil {
					return err
				}
				defer src.close()
			}
			st, err := rsf.openExisting(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			opts := manage.Options{Settle: settle, Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
			var from source.Source // only latest and TIME read the source
			if src != nil {
				from = src.Source
			}
			rs, err := manage.Reset(ctx, st.Stores, from, rname, rshard, target, opts)
			for _, r := range rs {
				fmt.Fprintf(cmd.OutOrStdout(), "reset %s shard %s to %s\n", rname, r.ShardID, orStart(r.Seq))
			}
			return err
		},
	}
	rsf.register(reset)
	srcf.register(reset)
	reset.Flags().StringVar(&rname, "name", "", "projection name (required)")
	reset.Flags().StringVar(&rshard, "shard", "", "only this shard (default: every unfinished shard)")
	reset.Flags().StringVar(&to, "to", "", "SEQ, trim-horizon, latest or an RFC 3339 time (required)")
	reset.Flags().DurationVar(&settle, "settle", 2*time.Second, "how long to wait after pausing for the owners to commit their batch (0: the default; negative: none)")
	rootCmd.AddCommand(reset)

	var bsf storeFlags
	var bname string
	var bsettle time.Duration
	rebuild := &cobra.Command{
		Use:   "rebuild",
		Short: "Rebuild a projection from zero: clear its documents and cursors, start over, while workers run",
		Long: `Rebuild pauses the projection, waits --settle for the owners to commit, revokes every lease at
a new epoch (finished shards become active again, so closed shards are read again before their
children), resets every shard's exactly-once markers and cursor to the start, deletes every
document of the projection, and lifts the pause (a pause given before stays). The running
workers then project the stream again from its start. Dead letters are kept.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if bname == "" {
				return fmt.Errorf("--name is required")
			}
			ctx := cmd.Context()
			st, err := bsf.open(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			opts := manage.Options{Settle: bsettle, Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
			if err := manage.Rebuild(ctx, st.Stores, bname, opts); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "rebuilding %s from the start\n", bname)
			return nil
		},
	}
	bsf.register(rebuild)
	rebuild.Flags().StringVar(&bname, "name", "", "projection name (required)")
	rebuild.Flags().DurationVar(&bsettle, "settle", 2*time.Second, "how long to wait after pausing for the owners to commit their batch (0: the default; negative: none)")
	rootCmd.AddCommand(rebuild)
}

func orStart(seq string) string {
	if seq == "" {
		return "the start (no cursor)"
	}
	return seq
}
