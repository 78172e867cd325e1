package main

import (
	"fmt"
	"sort"

	"github.com/spf13/cobra"

	"github.com/projhost/projhost/manage"
)

func init() {
	var sf storeFlags
	var name, shard string
	cmd := &cobra.Command{
		Use:   "resume",
		Short: "Lift a pause (projhost pause) and resume shards the stop error policy stopped",
		Long: `Resume lifts the pause of --shard, or without --shard the projection's pause and every shard's,
and clears the STOPPED state of that shard (or of every stopped shard of --name). The workers
holding the shards notice within about a second and continue from the saved cursor with the
handler they run: for a stopped shard fix the handler (restart the workers with it, or deploy
a new version) or the cause first, or the shard stops again at the same event. A shard whose
projection is paused as a whole stays paused after resume --shard: resume without --shard.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkNameShard(cmd, name, shard); err != nil {
				return err
			}
			ctx := cmd.Context()
			st, err := sf.openExisting(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			r, err := manage.Resume(ctx, st.Stores, name, shard)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			for _, id := range r.Unpaused {
				if id == "" {
					fmt.Fprintf(out, "unpaused %s\n", name)
				} else {
					fmt.Fprintf(out, "unpaused %s shard %s\n", name, id)
				}
			}
			ids := make([]string, 0, len(r.Stopped))
			for id := range r.Stopped {
				ids = append(ids, id)
			}
			sort.Strings(ids)
			for _, id := range ids {
				fmt.Fprintf(out, "resumed %s shard %s (was: %s)\n", name, id, escapeText(r.Stopped[id]))
			}
			if len(r.Unpaused) == 0 && len(ids) == 0 {
				fmt.Fprintf(out, "no paused or stopped shard of %s%s\n", name, map[bool]string{true: " shard " + shard}[shard != ""])
			}
			if r.StillPaused {
				fmt.Fprintf(out, "%s is paused as a whole: shard %s stays paused until `projhost resume --name %s` (without --shard)\n", name, shard, name)
			}
			return nil
		},
	}
	sf.register(cmd)
	cmd.Flags().StringVar(&name, "name", "", "projection name (required)")
	cmd.Flags().StringVar(&shard, "shard", "", "only this shard (default: the projection and every shard)")
	rootCmd.AddCommand(cmd)
}
