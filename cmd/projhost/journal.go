package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/projhost/projhost/internal/eventfile"
	"github.com/projhost/projhost/source/journal"
	"github.com/projhost/projhost/wasmabi"
)

// appendTxBytes is the event data `journal append` puts in one transaction at most (beyond its
// first event): 10,000 events of 1 MiB would otherwise be held in memory at once.
const appendTxBytes = 8 << 20

func init() {
	jc := &cobra.Command{Use: "journal", Short: "Create, append to, split, merge and list the local journal (a sharded event log in --data)"}

	var data string
	var shards int
	var cbusy, abusy time.Duration
	create := &cobra.Command{
		Use:   "create",
		Short: "Create a local journal with a number of shards (split and merge change them later)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if shards < 1 || shards > journal.MaxShards {
				return fmt.Errorf("--shards %d: use 1 to %d", shards, journal.MaxShards)
			}
			opts, err := journalOptions(cbusy)
			if err != nil {
				return err
			}
			if err := os.MkdirAll(data, 0o755); err != nil {
				return err
			}
			j, err := journal.Create(data, shards, opts...)
			if err != nil {
				return err
			}
			defer j.Close()
			fmt.Fprintf(cmd.OutOrStdout(), "journal with %d shards in %s\n", shards, data)
			rows, err := journalLineage(cmd.Context(), j)
			if err != nil || len(rows) == shards {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), "resharded since (journal split|merge):")
			return printLineage(cmd.OutOrStdout(), rows)
		},
	}
	create.Flags().StringVar(&data, "data", defaultDataDir, "data directory")
	create.Flags().IntVar(&shards, "shards", 4, fmt.Sprintf("number of shards, 1 to %d (journal split|merge change them later)", journal.MaxShards))
	busyFlag(create, &cbusy)

	var adata, keyField string
	var batch int
	appendCmd := &cobra.Command{
		Use:   "append [FILE|-]",
		Short: "Append events from a JSON array or JSON lines file (gzip accepted); - or no file reads stdin",
		Long: `Append events from a JSON array or JSON lines file (gzip accepted); - or no file reads stdin.
Each element must be a JSON object with the --key-field as a string or number (the partition key:
valid UTF-8, 1 to 256 characters, the Kinesis limit); each event is at most 1 MiB (the Kinesis
record limit).
Events are appended in transactions of --batch events (fewer when their data reaches 8 MiB): an
interrupted append keeps whole transactions and says how many events went in.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := journal.ValidateAppendBatch(batch); err != nil {
				return fmt.Errorf("--batch: %w", err)
			}
			opts, err := journalOptions(abusy)
			if err != nil {
				return err
			}
			in, name, closeIn, err := openInput(cmd, args)
			if err != nil {
				return err
			}
			defer closeIn()
			j, err := openJournal(adata, journal.Open, opts...)
			if err != nil {
				return err
			}
			defer j.Close()
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			start := time.Now()
			buf := make([]journal.AppendEvent, 0, batch)
			var data []byte // the events' data, one after the other (reused once they are appended)
			total := 0
			flush := func() error {
				if len(buf) == 0 {
					return nil
				}
				if _, err := j.Append(ctx, buf); err != nil {
					return fmt.Errorf("appending input events %d..%d: %w", total+1, total+len(buf), err)
				}
				total += len(buf)
				buf, data = buf[:0], data[:0]
				return nil
			}
			err = eventfile.Scan(in, keyField, func(i int, key string, raw []byte) error {
				if len(raw) > wasmabi.MaxDataLen {
					return fmt.Errorf("%w: element %d is %d bytes; events are at most %d bytes (the Kinesis record limit)", eventfile.ErrBadInput, i, len(raw), wasmabi.MaxDataLen)
				}
				if len(buf) > 0 && len(data)+len(raw) > appendTxBytes {
					if err := flush(); err != nil {
						return err
					}
				}
				// Earlier events keep their slices of data's old array when append moves it.
				at := len(data)
				data = append(data, raw...)
				buf = append(buf, journal.AppendEvent{PartitionKey: key, Data: data[at:len(data):len(data)]})
				if len(buf) == cap(buf) {
					return flush()
				}
				return nil
			})
			if err == nil {
				err = flush()
			}
			if err != nil {
				if ctx.Err() != nil {
					return fmt.Errorf("%s: interrupted after appending %d events (the first %d of the input; append the rest without them)", name, total, total)
				}
				return fmt.Errorf("%s: %w (%d events appended before the error)", name, err, total)
			}
			el := time.Since(start)
			fmt.Fprintf(cmd.ErrOrStderr(), "appended %d events from %s in %s (%.0f events/s)\n", total, name, el.Round(time.Millisecond), float64(total)/el.Seconds())
			return nil
		},
	}
	appendCmd.Flags().StringVar(&adata, "data", defaultDataDir, "data directory")
	appendCmd.Flags().StringVar(&keyField, "key-field", "origin", "top-level JSON field used as the partition key")
	appendCmd.Flags().IntVar(&batch, "batch", journal.TxEvents, fmt.Sprintf("events per append transaction, 1 to %d", journal.TxEvents))
	busyFlag(appendCmd, &abusy)

	jc.AddCommand(append([]*cobra.Command{create, appendCmd}, journalReshardCommands()...)...)
	rootCmd.AddCommand(jc)
}
