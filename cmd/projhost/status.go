package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/projhost/projhost/shardmap"
	"github.com/projhost/projhost/source"
	"github.com/projhost/projhost/source/journal"
	"github.com/projhost/projhost/status"
	"github.com/projhost/projhost/store/sqlite"
)

// shardStatus is one row of `projhost status` (status.Row: its JSON is `status --json`'s line).
type shardStatus = status.Row

func init() {
	var sf storeFlags
	var srcf sourceFlags
	var name string
	var asJSON bool
	var leaseDuration time.Duration
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show each shard's lease owner and its liveness, state, cursor, journal head and lag in events (Kinesis: lag in ms)",
		Long: `Status shows each shard's lease owner, whether the owner is live, the shard's state, cursor,
dead letters and module version, and its lag.

LEASE is live, expired or unknown (- without an owner). Leases carry no clock time: as the
workers do, status watches each lease's counter, which every renewal increments, on its own
clock, and calls a lease expired when it did not change for --lease-duration (set it to the
workers'). So status takes a moment: it returns as soon as every owned lease was seen renewed
(about a third of the lease duration, the workers' renew interval), and waits a whole lease
duration when an owner is dead. --lease-duration 0 does not watch (LEASE unknown).

STATE is finished (a closed shard read to its end), stopped (by --on-error stop: see the line
below the table; resume with projhost resume), paused (projhost pause), running (an owner holds
it: its lease live or unknown) or idle (no owner, or the owner's lease expired).

Lag: for the
local journal the head and the events behind; with --source kinesis MillisBehindLatest at the
saved cursor, from one GetShardIterator AFTER_SEQUENCE_NUMBER the cursor and one GetRecords of
Limit 1 per unfinished shard (status runs outside the workers; these calls count against the
shard's read quota of 5 a second like a worker's), and whether a record follows the cursor
(Kinesis cannot tell how many).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if err := srcf.check(cmd, &sf); err != nil {
				return err
			}
			if leaseDuration < 0 {
				return fmt.Errorf("--lease-duration %v is negative: use the workers' lease duration (default %v), or 0 not to judge liveness", leaseDuration, shardmap.DefaultLeaseDuration)
			}
			j, err := srcf.open(ctx, &sf, journal.OpenReadOnly, nil)
			if err != nil {
				return err
			}
			defer j.close()
			// Read-only: status answers while a paused worker holds the store's write lock, and
			// on a read-only directory. The journal exists, so this is a data dir: no store yet
			// means no projection ran.
			st, err := sf.openReadOnly(ctx)
			if errors.Is(err, sqlite.ErrNoStore) {
				if asJSON {
					return nil
				}
				fmt.Fprintln(cmd.OutOrStdout(), "no projection has run on this store yet")
				return nil
			}
			if err != nil {
				return err
			}
			defer st.Close()
			names := []string{name}
			if name == "" {
				if names, err = status.Projections(ctx, st.Leases); errors.Is(err, status.ErrNoLister) {
					return fmt.Errorf("--name is required with --store %s", sf.store)
				} else if err != nil {
					return err
				}
			}
			cfg := status.Config{Stores: st.Stores, Source: j.Source, Header: j.header}
			if j.header == nil {
				cfg.Prober = j.kinesis
			}
			if leaseDuration > 0 {
				// Judge the owners' liveness: watch the lease counters until every owned
				// lease was renewed, or for a lease duration (then the silent ones are expired).
				cfg.Watcher = status.NewWatcher(leaseDuration, nil)
				if err := cfg.Watcher.Watch(ctx, st.Leases, names, 0); err != nil {
					return err
				}
			}
			rows, err := status.Rows(ctx, cfg, names)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				for _, r := range rows {
					if err := enc.Encode(r); err != nil {
						return err
					}
				}
				return nil
			}
			if len(rows) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "no projection has run on this store yet")
				return nil
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			if j.header == nil {
				if err := kinesisTable(tw, rows); err != nil {
					return err
				}
				printNotes(cmd.OutOrStdout(), rows, leaseDuration, sf.args())
				return nil
			}
			withVersions := slices.ContainsFunc(rows, func(r shardStatus) bool { return r.Version > 0 })
			vcol := func(r shardStatus) string {
				if !withVersions {
					return ""
				}
				if r.Version == 0 {
					return "\t-"
				}
				return fmt.Sprintf("\tv%d", r.Version)
			}
			fmt.Fprintln(tw, "PROJECTION\tSHARD\tOWNER\tLEASE\tSTATE\tEPOCH\tCURSOR\tHEAD\tDEAD LETTERS\tLAG (events)"+map[bool]string{true: "\tVERSION"}[withVersions])
			var total int64
			for _, r := range rows {
				lag := fmt.Sprint(r.LagEvents)
				if r.Problem != "" {
					lag = "ERROR: " + r.Problem
				} else {
					total += r.LagEvents
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%d\t%s%s\n", escapeText(r.Projection), escapeText(r.Shard), orDash(escapeText(r.Owner)), leaseCell(r),
					r.RunState, r.Epoch, orDash(r.Cursor), orDash(r.Head), r.DeadLetters, lag, vcol(r))
			}
			fmt.Fprintf(tw, "\t\t\t\t\t\t\t\ttotal\t%d\n", total)
			if err := tw.Flush(); err != nil {
				return err
			}
			printNotes(cmd.OutOrStdout(), rows, leaseDuration, sf.args())
			return nil
		},
	}
	sf.register(cmd)
	srcf.register(cmd)
	cmd.Flags().StringVar(&name, "name", "", "projection name (default: every projection in the store)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON lines instead of a table (the fields of package status's Row; run_state and lease are the STATE and LEASE columns)")
	cmd.Flags().DurationVar(&leaseDuration, "lease-duration", shardmap.DefaultLeaseDuration, "the workers' --lease-duration: a lease whose owner renewed nothing for this long is shown expired; status watches the leases up to this long (0: do not watch, liveness unknown)")
	rootCmd.AddCommand(cmd)
}

// leaseCell is the LEASE column: live, expired (for how long the owner has been silent),
// unknown, or - without an owner.
func leaseCell(r shardStatus) string {
	switch r.Lease {
	case status.LeaseFree:
		return "-"
	case status.LeaseExpired:
		return fmt.Sprintf("expired (silent %s)", (time.Duration(r.LeaseSilentMs) * time.Millisecond).Round(100*time.Millisecond))
	}
	return r.Lease
}

// printNotes prints what the table's rows ask of the operator: how to resume each stopped
// shard, and what an expired lease means.
func printNotes(w io.Writer, rows []shardStatus, leaseDuration time.Duration, storeArgs string) {
	expired := 0
	for _, r := range rows {
		if r.Lease == status.LeaseExpired {
			expired++
		}
	}
	if expired > 0 {
		fmt.Fprintf(w, "%d lease(s) expired: their owner renewed nothing for a lease duration (%v; set --lease-duration to the workers'): it is dead or cut off from the store, and a live worker of the projection takes the shards over (with none running, start one)\n", expired, leaseDuration)
	}
	for _, r := range rows {
		if r.Stopped != "" {
			fmt.Fprintf(w, "STOPPED %s shard %s: %s\n  resume with: projhost resume %s --name %s --shard %s\n", r.Projection, r.Shard,
				escapeText(r.Stopped), storeArgs, shellQuote(r.Projection), shellQuote(r.Shard))
		}
	}
}

// kinesisTable prints the rows of a Kinesis projection: lag in ms, and whether records follow.
func kinesisTable(tw *tabwriter.Writer, rows []shardStatus) error {
	withVersions := slices.ContainsFunc(rows, func(r shardStatus) bool { return r.Version > 0 })
	fmt.Fprintln(tw, "PROJECTION\tSHARD\tOWNER\tLEASE\tSTATE\tEPOCH\tCURSOR\tDEAD LETTERS\tLAG (ms)\tBEHIND"+map[bool]string{true: "\tVERSION"}[withVersions])
	var most int64
	for _, r := range rows {
		state := r.RunState
		if r.Closed && r.RunState != status.RunFinished {
			state += " (closed)"
		}
		lag, behind := "-", "-"
		switch {
		case r.Problem != "":
			lag = "ERROR: " + r.Problem
		case r.LagMillis != nil:
			lag = fmt.Sprint(*r.LagMillis)
			most = max(most, *r.LagMillis)
			behind = "caught up"
			if *r.RecordsBehind {
				behind = "records follow"
			} else if *r.LagMillis > 0 {
				behind = "behind (empty stretch)"
			}
		}
		version := ""
		if withVersions {
			version = "\t-"
			if r.Version > 0 {
				version = fmt.Sprintf("\tv%d", r.Version)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%d\t%s\t%s%s\n", escapeText(r.Projection), escapeText(r.Shard), orDash(escapeText(r.Owner)), leaseCell(r),
			state, r.Epoch, orDash(r.Cursor), r.DeadLetters, lag, behind, version)
	}
	fmt.Fprintf(tw, "\t\t\t\t\t\t\tmost\t%d\t\n", most)
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// shardLag is the lag in events of one shard of projection name.
func shardLag(ctx context.Context, hd source.Header, st *stores, name, shard string) (int64, error) {
	head, err := hd.Head(ctx, shard)
	if err != nil {
		return 0, err
	}
	c, err := st.Cursors.Get(ctx, name, shard)
	if err != nil {
		return 0, err
	}
	return status.SeqDiff(head, c.Seq), nil
}
