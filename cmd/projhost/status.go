package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/projhost/projhost/deadletter"
	"github.com/projhost/projhost/source"
	"github.com/projhost/projhost/source/journal"
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
	LagEvents  int64  `json:"lag_events"` // -1 when the cursor is beyond the head (see Problem)
	Problem    string `json:"problem,omitempty"`
	// Stopped is why the stop error policy stopped the shard ("" = not stopped); State is then
	// "STOPPED" until `projhost resume`.
	Stopped string `json:"stopped,omitempty"`
	// DeadLetters counts the shard's dead letters not replayed or dropped yet.
	DeadLetters int `json:"dead_letters"`
}

func init() {
	var sf storeFlags
	var name string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show each shard's lease owner, cursor, journal head and lag in events",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			jopts, err := sf.journalOptions()
			if err != nil {
				return err
			}
			j, err := openJournal(sf.data, journal.OpenReadOnly, jopts...)
			if err != nil {
				return err
			}
			defer j.Close()
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
					if row.Head, err = j.Head(ctx, sh.ID); err != nil {
						return err
					}
					// A child of a split or merge numbers its events after its parents'.
					start, err := journalStart(ctx, j, sh.ID)
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
			fmt.Fprintln(tw, "PROJECTION\tSHARD\tOWNER\tSTATE\tEPOCH\tCURSOR\tHEAD\tDEAD LETTERS\tLAG (events)")
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
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%d\t%s\n", r.Projection, r.Shard, owner, orDash(r.State), r.Epoch, orDash(r.Cursor), orDash(r.Head), r.DeadLetters, lag)
			}
			fmt.Fprintf(tw, "\t\t\t\t\t\t\ttotal\t%d\n", total)
			if err := tw.Flush(); err != nil {
				return err
			}
			for _, r := range rows {
				if r.Stopped != "" {
					fmt.Fprintf(cmd.OutOrStdout(), "STOPPED %s shard %s: %s\n  resume with: projhost resume --name %s --shard %s\n", r.Projection, r.Shard, escapeText(r.Stopped), r.Projection, r.Shard)
				}
			}
			return nil
		},
	}
	sf.register(cmd)
	cmd.Flags().StringVar(&name, "name", "", "projection name (default: every projection in the store)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON lines instead of a table")
	rootCmd.AddCommand(cmd)
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
