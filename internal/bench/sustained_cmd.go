package bench

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
)

func sustainedCommand() *cobra.Command {
	var o SustainedOptions
	cmd := &cobra.Command{
		Use:   "sustained --events FILE.ndjson[.gz] --handler H.wasm",
		Short: "Append and project at once on a local journal for a fixed time; rates, lag, CPU, lease losses",
		Long: `sustained creates a journal of --shards shards in a temporary directory, starts --workers
` + "`projhost run`" + ` processes on it (each with --listen on a free loopback port), waits until they
share the shards evenly, then streams the lines of --events (JSON lines, gzip ok) into one
` + "`projhost journal append -`" + ` process for at most --duration (or until the file ends), at most
--rate events/s (0: as fast as it takes them), while it reads every worker's /metrics each
--sample. When the workers have projected every event it prints:

  append events/s      events appended / the append's time (first event to its exit)
  projected events/s   events appended / the time from the append's start until every one
                       was projected (the workers' projhost_events_total sum and every shard's
                       projhost_shard_lag_events 0)
  lag max, p99         over every shard's lag in every sample taken during the run, in events
                       (projhost_shard_lag_events) and ms (projhost_shard_lag_seconds)
  CPU s per 100k       user + system time of each process per 100,000 events appended
  lease losses         what projhost_leases_lost_total of each worker grew by during the run
                       (graceful moves between workers are releases, not losses); the losses
                       while the workers shared out the shards, before the append, apart

--check flightdelays then compares the read model with an independent computation over the
events appended (for the flightdelays handlers). The processes are this binary.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signalContext(cmd)
			defer stop()
			exe, err := os.Executable()
			if err != nil {
				return err
			}
			o.Projhost = exe
			o.Logger = logger(cmd.ErrOrStderr())
			res, err := MeasureSustained(ctx, o)
			if err != nil {
				return err
			}
			PrintSustained(cmd.OutOrStdout(), o, res)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.EventsPath, "events", "", "events file: JSON lines, one object per line, gzip ok (required)")
	f.StringVar(&o.KeyField, "key-field", DefaultKeyField, "top-level JSON field used as the partition key")
	f.StringVar(&o.Handler, "handler", "", "handler module (.wasm) the workers run (required)")
	f.BoolVar(&o.Trusted, "trusted", false, "run the handler without the per-batch deadline (run --trusted)")
	f.IntVar(&o.Shards, "shards", 100, "journal shards, 1 to 1000")
	f.IntVar(&o.Workers, "workers", 2, "worker processes, 1 to 16")
	f.IntVar(&o.Rate, "rate", 0, "most events/s written to the append (0: as fast as it takes them)")
	f.DurationVar(&o.Duration, "duration", DefaultSustainedDuration, "most time the append runs (it also ends with the file)")
	f.DurationVar(&o.CatchUp, "catch-up", DefaultSustainedCatchUp, "most time to wait after the append for every event to be projected")
	f.DurationVar(&o.Balance, "balance", DefaultSustainedBalance, "most time to wait before the append for the workers to share the shards evenly")
	f.DurationVar(&o.Sample, "sample", DefaultSustainedSample, "how often each worker's /metrics is read for the lag")
	f.DurationVar(&o.LeaseDuration, "lease-duration", 0, "the workers' --lease-duration (0: run's default)")
	f.IntVar(&o.BatchSize, "batch-size", 0, "the workers' --batch-size (0: run's default)")
	f.StringVar(&o.Check, "check", "", "compare the read model at the end: flightdelays, or none")
	f.StringVar(&o.TempDir, "tmp", "", "directory for the temporary journal and store (default: the system's)")
	f.BoolVar(&o.Keep, "keep", false, "keep the journal, store and process logs (the directory is printed)")
	return cmd
}

// PrintSustained prints res as the sustained table.
func PrintSustained(w io.Writer, o SustainedOptions, res *SustainedResult) {
	bal := fmt.Sprintf("shared evenly after %v", res.BalanceTime.Round(time.Millisecond))
	if !res.Balanced {
		bal = "NOT shared evenly when the append started"
	}
	fmt.Fprintf(w, "sustained: %d shards, %d workers, handler %s (trusted %v); shards %s\n", res.Shards, len(res.Workers), o.Handler, o.Trusted, bal)
	fmt.Fprintf(w, "  appended            %d events in %v: %.0f events/s\n", res.Appended, res.AppendTime.Round(time.Millisecond), res.AppendRate())
	fmt.Fprintf(w, "  projected           all %d %v after the append started: %.0f events/s\n", res.Appended, res.ProjectTime.Round(time.Millisecond), res.ProjectRate())
	fmt.Fprintf(w, "  lag, events         max %d, p99 %d (%d samples of every shard)\n", res.LagEventsMax, res.LagEventsP99, res.Samples)
	fmt.Fprintf(w, "  lag, ms             max %d, p99 %d\n", res.LagMillisMax, res.LagMillisP99)
	fmt.Fprintf(w, "  CPU s per 100k      append %.2f", res.CPUPer100k(res.AppendCPU))
	for _, wk := range res.Workers {
		fmt.Fprintf(w, ", %s %.2f", wk.ID, res.CPUPer100k(wk.CPU))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  events per worker  ")
	for _, wk := range res.Workers {
		fmt.Fprintf(w, " %s %d", wk.ID, wk.Events)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  lease losses        %d during the run", res.LeasesLost())
	for _, wk := range res.Workers {
		fmt.Fprintf(w, " (%s: %d lost, %d acquired; %d lost before, while the shards were shared out)", wk.ID, wk.LeasesLost, wk.LeasesAcquired, wk.LeasesLostBefore)
	}
	fmt.Fprintln(w)
	switch {
	case res.Checked:
		fmt.Fprintf(w, "  read model          exact (--check %s)\n", o.Check)
	default:
		fmt.Fprintln(w, "  read model          not checked (--check flightdelays checks the flightdelays handlers)")
	}
	if res.Dir != "" {
		fmt.Fprintf(w, "  kept in             %s\n", res.Dir)
	}
}
