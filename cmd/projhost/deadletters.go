package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/projhost/projhost/deadletter"
)

func init() {
	dc := &cobra.Command{
		Use:   "deadletters",
		Short: "Inspect, replay or drop the events a handler failed on (run --on-error dead-letter)",
		Long: `Dead letters are the events a projection's handler kept failing on under --on-error dead-letter:
the full event, the error and its state (failed, replay_requested, replayed, dropped, or
superseded: stored just before a worker stopped, its event is handled again). After fixing
the handler (and restarting the workers with it), "replay" asks the shards' owners to re-handle the
events; each replay is committed with the shard's cursor, exactly once. With no worker running, the
next "projhost run" applies them (run --until-caught-up waits for them).`,
	}
	var sf storeFlags
	var name, shard, seq, state string
	var asJSON, all bool
	addFlags := func(c *cobra.Command, withSeq bool) {
		sf.register(c)
		c.Flags().StringVar(&name, "name", "", "projection name (required)")
		c.Flags().StringVar(&shard, "shard", "", "only this shard")
		if withSeq {
			c.Flags().StringVar(&seq, "seq", "", "only the dead letter of this sequence number (needs --shard)")
		}
	}
	needName := func() error {
		if name == "" {
			return fmt.Errorf("--name is required")
		}
		if seq != "" && shard == "" {
			return fmt.Errorf("--seq needs --shard")
		}
		return nil
	}

	list := &cobra.Command{
		Use: "list", Short: "List dead letters (newest state first per shard and sequence number)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkShardFlag(cmd, shard); err != nil {
				return err
			}
			if err := needName(); err != nil {
				return err
			}
			st0 := deadletter.State(state)
			if state != "" && !st0.Valid() {
				return fmt.Errorf("--state %q: use failed, replay_requested, replayed, dropped or superseded", state)
			}
			st, err := sf.openReadOnly(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			ls, err := st.DeadLetters.List(cmd.Context(), name, deadletter.Filter{ShardID: shard, State: st0})
			if err != nil {
				return err
			}
			return printLetters(cmd, ls, asJSON)
		},
	}
	addFlags(list, false)
	list.Flags().StringVar(&state, "state", "", "only letters in this state: failed, replay_requested, replayed, dropped or superseded")
	list.Flags().BoolVar(&asJSON, "json", false, "print JSON lines (with the event data)")

	show := &cobra.Command{
		Use: "show", Short: "Show one dead letter with its event data (JSON)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkShardFlag(cmd, shard); err != nil {
				return err
			}
			if name == "" || shard == "" || seq == "" {
				return fmt.Errorf("--name, --shard and --seq are required")
			}
			st, err := sf.openReadOnly(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			l, err := st.DeadLetters.Get(cmd.Context(), name, shard, seq)
			if err != nil {
				return fmt.Errorf("dead letter %s/%s/%s: %w", name, shard, seq, err)
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			return enc.Encode(deadletter.ToJSON(l, true))
		},
	}
	addFlags(show, true)

	transition := func(use, short string, move func(context.Context, deadletter.Store, string, deadletter.Selection) ([]deadletter.Letter, error), done string) *cobra.Command {
		c := &cobra.Command{
			Use: use, Short: short, Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				if err := checkShardFlag(cmd, shard); err != nil {
					return err
				}
				if err := needName(); err != nil {
					return err
				}
				if use == "drop" && seq == "" && !all {
					return fmt.Errorf("drop needs --shard and --seq, or --all to drop every open dead letter of the selection")
				}
				st, err := sf.openExisting(cmd.Context())
				if err != nil {
					return err
				}
				defer st.Close()
				moved, err := move(cmd.Context(), st.DeadLetters, name, deadletter.Selection{ShardID: shard, Seq: seq})
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%d dead letter(s) %s\n", len(moved), done)
				return nil
			},
		}
		addFlags(c, true)
		return c
	}
	replay := transition("replay", "Ask the shards' owners to re-handle failed dead letters with the handler they run now", deadletter.Replay,
		"to replay: the shards' owners apply them (with no worker running, the next `projhost run` does)")
	drop := transition("drop", "Give dead letters up (state dropped; they stay listed)", deadletter.Drop, "dropped")
	drop.Flags().BoolVar(&all, "all", false, "drop every open dead letter of --name (and --shard)")
	dc.AddCommand(list, show, replay, drop)
	rootCmd.AddCommand(dc)
}

func printLetters(cmd *cobra.Command, ls []deadletter.Letter, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(cmd.OutOrStdout())
		for _, l := range ls {
			if err := enc.Encode(deadletter.ToJSON(l, true)); err != nil {
				return err
			}
		}
		return nil
	}
	if len(ls) == 0 {
		fmt.Fprintln(cmd.OutOrStdout(), "no dead letters")
		return nil
	}
	tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SHARD\tSEQ\tSTATE\tKIND\tATTEMPTS\tLAST FAILURE\tPARTITION KEY\tERROR")
	for _, l := range ls {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", l.ShardID, l.Seq, l.State, l.ErrorKind, l.Attempts,
			l.LastFailure.UTC().Format(time.RFC3339), escapeText(l.PartitionKey), escapeText(clip(l.Error, 100)))
	}
	return tw.Flush()
}

// clip shortens s to at most n runes for a table cell.
func clip(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
