package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/projhost/projhost/source/journal"
	"github.com/projhost/projhost/status"
)

// journalReshardCommands are `journal split`, `journal merge` and `journal status`.
func journalReshardCommands() []*cobra.Command {
	var sdata, at, sshard string
	var sbusy time.Duration
	split := &cobra.Command{
		Use:   "split",
		Short: "Split an open shard into two children over its hash key range (Kinesis SplitShard)",
		Long: `Split an open shard into two children over its hash key range (Kinesis SplitShard).

The shard is closed and two open shards with the next ids take its range: the first
[start, at-1], the second [at, end], where at is --at (a decimal hash key, Kinesis'
NewStartingHashKey) or by default the midpoint. Events appended afterwards go to the children;
running workers finish the parent (read to its end) and start the children after it. One
transaction: appends by other processes land before it on the parent or after it on a child.
Prints the children, one a line: ID, parents, hash key range.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if sshard == "" {
				return fmt.Errorf("--shard is required (the shard to split; see `projhost journal status --data %s`)", sdata)
			}
			return reshardJournal(cmd, sdata, sbusy, func(ctx context.Context, j *journal.Journal) ([]string, error) {
				kids, err := j.Split(ctx, sshard, at)
				return kids[:], err
			})
		},
	}
	split.Flags().StringVar(&sdata, "data", defaultDataDir, "data directory")
	split.Flags().StringVar(&sshard, "shard", "", "id of the open shard to split (required)")
	split.Flags().StringVar(&at, "at", "", "decimal hash key where the second child starts, above the shard's start and at most its end (default: the midpoint)")
	busyFlag(split, &sbusy)

	var mdata string
	var mshards []string
	var mbusy time.Duration
	merge := &cobra.Command{
		Use:   "merge",
		Short: "Merge two open shards with adjacent hash key ranges into one child (Kinesis MergeShards)",
		Long: `Merge two open shards with adjacent hash key ranges into one child (Kinesis MergeShards).

Both shards are closed and one open shard with the next id takes the union of their ranges.
Events appended afterwards go to the child; running workers finish both parents before they
start it. One transaction. Prints the child: ID, parents, hash key range.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(mshards) != 2 {
				return fmt.Errorf("give the two shards to merge as --shard A --shard B (got %d)", len(mshards))
			}
			return reshardJournal(cmd, mdata, mbusy, func(ctx context.Context, j *journal.Journal) ([]string, error) {
				child, err := j.Merge(ctx, mshards[0], mshards[1])
				return []string{child}, err
			})
		},
	}
	merge.Flags().StringVar(&mdata, "data", defaultDataDir, "data directory")
	merge.Flags().StringArrayVar(&mshards, "shard", nil, "an open shard to merge; give it twice (required)")
	busyFlag(merge, &mbusy)

	var tdata string
	var asJSON bool
	var tbusy time.Duration
	status := &cobra.Command{
		Use:   "status",
		Short: "Show the journal's shards: lineage (parents), open or closed, hash key range, head and events",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts, err := journalOptions(tbusy)
			if err != nil {
				return err
			}
			j, err := openJournal(tdata, journal.OpenReadOnly, opts...)
			if err != nil {
				return err
			}
			defer j.Close()
			rows, err := journalLineage(cmd.Context(), j)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSONLines(cmd.OutOrStdout(), rows)
			}
			return printLineage(cmd.OutOrStdout(), rows)
		},
	}
	status.Flags().StringVar(&tdata, "data", defaultDataDir, "data directory")
	status.Flags().BoolVar(&asJSON, "json", false, "print JSON lines instead of a table")
	busyFlag(status, &tbusy)
	return []*cobra.Command{split, merge, status}
}

// reshardJournal opens the journal in dir, runs change and prints the children it returns.
func reshardJournal(cmd *cobra.Command, dir string, busy time.Duration, change func(context.Context, *journal.Journal) ([]string, error)) error {
	opts, err := journalOptions(busy)
	if err != nil {
		return err
	}
	j, err := openJournal(dir, journal.Open, opts...)
	if err != nil {
		return err
	}
	defer j.Close()
	kids, err := change(cmd.Context(), j)
	if err != nil {
		return fmt.Errorf("%w (the journal is unchanged; `projhost journal status --data %s` lists the shards)", err, dir)
	}
	rows, err := journalLineage(cmd.Context(), j)
	if err != nil {
		return err
	}
	for _, r := range rows {
		for _, k := range kids {
			if r.Shard == k {
				fmt.Fprintf(cmd.OutOrStdout(), "%s\tparents %s\thash keys [%s, %s]\n", r.Shard, strings.Join(r.Parents, ","), r.HashKeyStart, r.HashKeyEnd)
			}
		}
	}
	return nil
}

// lineageRow is one shard of `journal status`.
type lineageRow struct {
	Shard        string   `json:"shard"`
	Parents      []string `json:"parents"`
	State        string   `json:"state"` // OPEN or CLOSED
	HashKeyStart string   `json:"hash_key_start"`
	HashKeyEnd   string   `json:"hash_key_end"`
	Head         string   `json:"head"`   // last sequence number, "" when empty
	Events       int64    `json:"events"` // how many the shard holds
}

func journalLineage(ctx context.Context, j *journal.Journal) ([]lineageRow, error) {
	ss, err := j.Shards(ctx)
	if err != nil {
		return nil, err
	}
	rows := make([]lineageRow, 0, len(ss))
	for _, s := range ss {
		r := lineageRow{Shard: s.ID, Parents: s.ParentIDs, State: "OPEN", HashKeyStart: s.HashKeyStart, HashKeyEnd: s.HashKeyEnd}
		if r.Parents == nil {
			r.Parents = []string{}
		}
		if s.Closed {
			r.State = "CLOSED"
		}
		if r.Head, err = j.Head(ctx, s.ID); err != nil {
			return nil, err
		}
		start, err := j.Start(ctx, s.ID)
		if err != nil {
			return nil, err
		}
		if r.Head != "" {
			r.Events = status.SeqDiff(r.Head, start)
		}
		rows = append(rows, r)
	}
	return rows, nil
}

func printLineage(w io.Writer, rows []lineageRow) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SHARD\tSTATE\tPARENTS\tHASH KEY START\tHASH KEY END\tHEAD\tEVENTS")
	open := 0
	for _, r := range rows {
		if r.State == "OPEN" {
			open++
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\n", r.Shard, r.State, orDash(strings.Join(r.Parents, ",")),
			r.HashKeyStart, r.HashKeyEnd, orDash(r.Head), r.Events)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "%d shards, %d open\n", len(rows), open)
	return nil
}

// writeJSONLines writes each row as one line of JSON.
func writeJSONLines[T any](w io.Writer, rows []T) error {
	enc := json.NewEncoder(w)
	for _, r := range rows {
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	return nil
}
