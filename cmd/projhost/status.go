package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"slices"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/projhost/projhost/deadletter"
	"github.com/projhost/projhost/registry"
	"github.com/projhost/projhost/shardmap"
	"github.com/projhost/projhost/source"
	"github.com/projhost/projhost/source/journal"
	"github.com/projhost/projhost/source/kinesis"
	"github.com/projhost/projhost/store/sqlite"
)

// projectionLister is implemented by lease stores that can list the projections they hold.
type projectionLister interface {
	Projections(ctx context.Context) ([]string, error)
}

// shardStatus is one row of `projhost status`.
type shardStatus struct {
	Projection string `json:"projection"`
	Shard      string `json:"shard"`
	Owner      string `json:"owner"`
	State      string `json:"state"`
	Epoch      int64  `json:"epoch"`
	Cursor     string `json:"cursor"`
	Head       string `json:"head"`
	LagEvents  int64  `json:"lag_events"` // -1 when unknown (Kinesis) or the cursor is beyond the head (see Problem)
	// LagMillis (Kinesis) is MillisBehindLatest at the cursor (a probe: GetShardIterator
	// AFTER_SEQUENCE_NUMBER the cursor, GetRecords Limit 1); -1 when the server did not say; 0
	// for a finished shard; absent for the journal.
	LagMillis *int64 `json:"lag_ms,omitempty"`
	// RecordsBehind (Kinesis): the probe found a record after the cursor.
	RecordsBehind *bool `json:"records_behind,omitempty"`
	// Closed: the shard was split or merged (no new records); its lease is FINISHED once read.
	Closed  bool   `json:"closed,omitempty"`
	Problem string `json:"problem,omitempty"`
	// Stopped is why the stop error policy stopped the shard ("" = not stopped); State is then
	// "STOPPED" until `projhost resume`.
	Stopped string `json:"stopped,omitempty"`
	// DeadLetters counts the shard's dead letters not replayed or dropped yet.
	DeadLetters int `json:"dead_letters"`
	// Version is the module registry version the shard's owner last switched it to (workers
	// running the active version: run without --handler), VersionSince the switch point (the
	// last event the version before handled); absent when none was recorded.
	Version      int64  `json:"version,omitempty"`
	VersionSince string `json:"version_since,omitempty"`
}

func init() {
	var sf storeFlags
	var srcf sourceFlags
	var name string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show each shard's lease owner, cursor, journal head and lag in events (Kinesis: lag in ms)",
		Long: `Status shows each shard's lease owner and state, cursor and dead letters, and its lag: for the
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
				pl, ok := st.Leases.(projectionLister)
				if !ok {
					return fmt.Errorf("--name is required with --store %s", sf.store)
				}
				if names, err = pl.Projections(ctx); err != nil {
					return err
				}
			}
			shards, err := j.Shards(ctx)
			if err != nil {
				return err
			}
			var rows []shardStatus
			for _, p := range names {
				leases, err := st.Leases.List(ctx, p)
				if err != nil {
					return err
				}
				byShard := map[string]int{}
				for i, l := range leases {
					byShard[l.ShardID] = i
				}
				letters, err := st.DeadLetters.List(ctx, p, deadletter.Filter{})
				if err != nil {
					return err
				}
				versions := map[string]registry.ShardVersion{}
				if st.Registry != nil {
					vs, err := st.Registry.Shards(ctx, p)
					if err != nil {
						return err
					}
					for _, v := range vs {
						versions[v.ShardID] = v
					}
				}
				open := map[string]int{}
				for _, l := range letters {
					if l.State == deadletter.StateFailed || l.State == deadletter.StateReplayRequested {
						open[l.ShardID]++
					}
				}
				for _, sh := range shards {
					row := shardStatus{Projection: p, Shard: sh.ID}
					if i, ok := byShard[sh.ID]; ok {
						row.Owner, row.State, row.Epoch = leases[i].Owner, string(leases[i].State), leases[i].Epoch
					}
					c, err := st.Cursors.Get(ctx, p, sh.ID)
					if err != nil {
						return err
					}
					row.Cursor, row.DeadLetters = c.Seq, open[sh.ID]
					if c.Stopped != "" {
						row.State, row.Stopped = "STOPPED", c.Stopped
					}
					row.Closed = sh.Closed
					if v, ok := versions[sh.ID]; ok {
						row.Version, row.VersionSince = v.Version, v.Seq
					}
					if j.header == nil {
						probeRow(ctx, j.kinesis, &row)
						rows = append(rows, row)
						continue
					}
					if row.Head, err = j.header.Head(ctx, sh.ID); err != nil {
						return err
					}
					// A child of a split or merge numbers its events after its parents'.
					start, err := journalStart(ctx, j.header, sh.ID)
					if err != nil {
						return err
					}
					row.LagEvents = seqDiff(row.Head, maxSeq(row.Cursor, start))
					if source.CompareSeq(row.Cursor, row.Head) > 0 {
						row.LagEvents = -1
						row.Problem = "cursor beyond the journal's end: was the journal replaced? use a new --name"
					}
					rows = append(rows, row)
				}
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
				printStopped(cmd.OutOrStdout(), rows)
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
			fmt.Fprintln(tw, "PROJECTION\tSHARD\tOWNER\tSTATE\tEPOCH\tCURSOR\tHEAD\tDEAD LETTERS\tLAG (events)"+map[bool]string{true: "\tVERSION"}[withVersions])
			var total int64
			for _, r := range rows {
				owner := r.Owner
				if owner == "" {
					owner = "-"
				}
				lag := fmt.Sprint(r.LagEvents)
				if r.Problem != "" {
					lag = "ERROR: " + r.Problem
				} else {
					total += r.LagEvents
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%d\t%s%s\n", r.Projection, r.Shard, owner, orDash(r.State), r.Epoch, orDash(r.Cursor), orDash(r.Head), r.DeadLetters, lag, vcol(r))
			}
			fmt.Fprintf(tw, "\t\t\t\t\t\t\ttotal\t%d\n", total)
			if err := tw.Flush(); err != nil {
				return err
			}
			printStopped(cmd.OutOrStdout(), rows)
			return nil
		},
	}
	sf.register(cmd)
	srcf.register(cmd)
	cmd.Flags().StringVar(&name, "name", "", "projection name (default: every projection in the store)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON lines instead of a table")
	rootCmd.AddCommand(cmd)
}

// printStopped prints how to resume each stopped shard of rows.
func printStopped(w io.Writer, rows []shardStatus) {
	for _, r := range rows {
		if r.Stopped != "" {
			fmt.Fprintf(w, "STOPPED %s shard %s: %s\n  resume with: projhost resume --name %s --shard %s\n", r.Projection, r.Shard, escapeText(r.Stopped), r.Projection, r.Shard)
		}
	}
}

// probeRow fills in a Kinesis shard's lag: 0 for a finished lease, else a probe at the cursor.
func probeRow(ctx context.Context, k *kinesis.Source, row *shardStatus) {
	row.LagEvents = -1
	if row.State == string(shardmap.StateFinished) {
		row.LagMillis, row.RecordsBehind = new(int64), new(bool)
		return
	}
	p, err := k.Probe(ctx, row.Shard, row.Cursor)
	if err != nil {
		row.Problem = err.Error()
		return
	}
	row.LagMillis, row.RecordsBehind = &p.MillisBehind, &p.More
}

// kinesisTable prints the rows of a Kinesis projection: lag in ms, and whether records follow.
func kinesisTable(tw *tabwriter.Writer, rows []shardStatus) error {
	fmt.Fprintln(tw, "PROJECTION\tSHARD\tOWNER\tSTATE\tEPOCH\tCURSOR\tDEAD LETTERS\tLAG (ms)\tBEHIND")
	var most int64
	for _, r := range rows {
		state := orDash(r.State)
		if r.Closed && r.State != string(shardmap.StateFinished) {
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%d\t%s\t%s\n", r.Projection, r.Shard, orDash(r.Owner), state, r.Epoch, orDash(r.Cursor), r.DeadLetters, lag, behind)
	}
	fmt.Fprintf(tw, "\t\t\t\t\t\tmost\t%d\t\n", most)
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// journalStart is the sequence number before a shard's first one on the journal
// (journal.Journal.Start: "" for the shards Create made, the parents' largest last one for a
// child), "" for other sources.
func journalStart(ctx context.Context, hd source.Header, shard string) (string, error) {
	if s, ok := hd.(interface {
		Start(context.Context, string) (string, error)
	}); ok {
		return s.Start(ctx, shard)
	}
	return "", nil
}

// maxSeq is the larger of two decimal sequence numbers ("" = 0).
func maxSeq(a, b string) string {
	if source.CompareSeq(orZero(a), orZero(b)) < 0 {
		return b
	}
	return a
}

// seqDiff returns head - cursor for decimal sequence numbers ("" = 0), never negative. The
// journal numbers a shard's events consecutively (from its Start), so this is the lag in events
// when the cursor is at least the shard's Start.
func seqDiff(head, cursor string) int64 {
	h, c := new(big.Int), new(big.Int)
	if _, ok := h.SetString(orZero(head), 10); !ok {
		return 0
	}
	if _, ok := c.SetString(orZero(cursor), 10); !ok {
		return 0
	}
	d := h.Sub(h, c)
	if d.Sign() < 0 || !d.IsInt64() {
		return 0
	}
	return d.Int64()
}

func orZero(s string) string {
	if s == "" {
		return "0"
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
	return seqDiff(head, c.Seq), nil
}
