package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/projhost/projhost/internal/eventfile"
	"github.com/projhost/projhost/source/journal"
)

func init() {
	jc := &cobra.Command{Use: "journal", Short: "Create and append to the local journal (a sharded event log in --data)"}

	var data string
	var shards int
	create := &cobra.Command{
		Use:   "create",
		Short: "Create a local journal with a fixed number of shards",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if shards < 1 {
				return fmt.Errorf("--shards must be at least 1")
			}
			if err := os.MkdirAll(data, 0o755); err != nil {
				return err
			}
			j, err := journal.Create(data, shards)
			if err != nil {
				return err
			}
			defer j.Close()
			fmt.Fprintf(cmd.OutOrStdout(), "journal with %d shards in %s\n", shards, data)
			return nil
		},
	}
	create.Flags().StringVar(&data, "data", defaultDataDir, "data directory")
	create.Flags().IntVar(&shards, "shards", 4, "number of shards (fixed for the journal's life)")

	var adata, keyField string
	var batch int
	appendCmd := &cobra.Command{
		Use:   "append [FILE|-]",
		Short: "Append events from a JSON array or JSON lines file (gzip accepted); - or no file reads stdin",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var in io.Reader = cmd.InOrStdin()
			name := "stdin"
			if len(args) == 1 && args[0] != "-" {
				f, err := os.Open(args[0])
				if err != nil {
					return err
				}
				defer f.Close()
				in, name = f, args[0]
			}
			j, err := openJournal(adata)
			if err != nil {
				return err
			}
			defer j.Close()
			ctx := cmd.Context()
			start := time.Now()
			buf := make([]journal.AppendEvent, 0, batch)
			total := 0
			flush := func() error {
				if len(buf) == 0 {
					return nil
				}
				if _, err := j.Append(ctx, buf); err != nil {
					return fmt.Errorf("appending events %d..%d: %w (events before %d are in the journal)", total, total+len(buf)-1, err, total)
				}
				total += len(buf)
				buf = buf[:0]
				return nil
			}
			err = eventfile.Scan(in, keyField, func(_ int, key string, raw []byte) error {
				buf = append(buf, journal.AppendEvent{PartitionKey: key, Data: append([]byte(nil), raw...)})
				if len(buf) == cap(buf) {
					return flush()
				}
				return nil
			})
			if err == nil {
				err = flush()
			}
			if err != nil {
				return fmt.Errorf("%s: %w (%d events appended before the error)", name, err, total)
			}
			el := time.Since(start)
			fmt.Fprintf(cmd.ErrOrStderr(), "appended %d events from %s in %s (%.0f events/s)\n", total, name, el.Round(time.Millisecond), float64(total)/el.Seconds())
			return nil
		},
	}
	appendCmd.Flags().StringVar(&adata, "data", defaultDataDir, "data directory")
	appendCmd.Flags().StringVar(&keyField, "key-field", "origin", "top-level JSON field used as the partition key")
	appendCmd.Flags().IntVar(&batch, "batch", 1000, "events per append transaction")

	jc.AddCommand(create, appendCmd)
	rootCmd.AddCommand(jc)
}
