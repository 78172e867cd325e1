package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func init() {
	var sf storeFlags
	var name, shard string
	cmd := &cobra.Command{
		Use:   "resume",
		Short: "Resume shards the stop error policy stopped (run --on-error stop)",
		Long: `Resume clears the STOPPED state of one shard (--shard) or of every stopped shard of --name. The
workers holding the shards notice within a second and continue from the saved cursor with the
handler they run: fix the handler (restart the workers with it) or the cause first, or the shard
stops again at the same event.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if name == "" {
				return fmt.Errorf("--name is required")
			}
			ctx := cmd.Context()
			st, err := sf.openExisting(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			ids := []string{shard}
			if shard == "" {
				leases, err := st.Leases.List(ctx, name)
				if err != nil {
					return err
				}
				ids = ids[:0]
				for _, l := range leases {
					ids = append(ids, l.ShardID)
				}
			}
			n := 0
			for _, id := range ids {
				c, err := st.Cursors.Get(ctx, name, id)
				if err != nil {
					return err
				}
				if c.Stopped == "" {
					continue
				}
				if err := st.Cursors.Resume(ctx, name, id); err != nil {
					return fmt.Errorf("resuming shard %s: %w", id, err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "resumed %s shard %s (was: %s)\n", name, id, escapeText(c.Stopped))
				n++
			}
			if n == 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "no stopped shard of %s%s\n", name, map[bool]string{true: " shard " + shard}[shard != ""])
			}
			return nil
		},
	}
	sf.register(cmd)
	cmd.Flags().StringVar(&name, "name", "", "projection name (required)")
	cmd.Flags().StringVar(&shard, "shard", "", "only this shard (default: every stopped shard)")
	rootCmd.AddCommand(cmd)
}
