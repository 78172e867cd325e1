package bench

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteHandler prints rep: the module's costs, then a table of batch size x deadline -> events/s.
func WriteHandler(w io.Writer, rep *HandlerReport) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "handler %s: %s events per pass, events/s = median of passes (wall, 1 goroutine)\n", rep.Name, group(int64(rep.Events)))
	fmt.Fprintf(tw, "  compile cold\t%s\t(new runtime, empty cache dir)\n", Dur(rep.CompileCold))
	fmt.Fprintf(tw, "  compile warm\t%s\t(new runtime, same cache dir)\n", Dur(rep.CompileWarm))
	fmt.Fprintf(tw, "  instantiate\t%s\t(instance + _initialize)\n", Dur(rep.Instantiate))
	fmt.Fprintf(tw, "  guest memory\t%s\t(%d pages after a first batch of %d)\n", Bytes(int64(rep.GuestMemory)), rep.GuestMemory/65536, rep.MemBatch)
	fmt.Fprintf(tw, "  Go heap delta\t%s\t(per instance; the guest memory is outside the Go heap on Linux)\n", signedBytes(rep.HeapDelta))
	if err := tw.Flush(); err != nil { // the cost lines and the table align separately
		return err
	}
	fmt.Fprintln(tw, "  batch\tdeadline\tevents/s\tpasses")
	for _, r := range rep.Rows {
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%d\n", r.BatchSize, onOff(r.Deadline), group(int64(r.EventsPerSec+0.5)), r.Passes)
	}
	return tw.Flush()
}

// WriteNative prints the native baseline alone (MeasureNative): batch size -> events/s.
func WriteNative(w io.Writer, rep *NativeReport) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "native %s (compiled into the host, the host's handler path without WebAssembly): %s events per pass, events/s = median of passes\n", rep.Name, group(int64(rep.Events)))
	fmt.Fprintln(tw, "  batch\tevents/s\tpasses")
	for _, r := range rep.Rows {
		fmt.Fprintf(tw, "  %d\t%s\t%d\n", r.BatchSize, group(int64(r.EventsPerSec+0.5)), r.Passes)
	}
	return tw.Flush()
}

// WriteComparison prints, for each batch size of native, the native rate and every module's
// rate at that batch size (deadline on and off) with its ratio to native (wasm/native).
// Modules without that batch size are left out of its rows. The ratios mean what they say when
// the rates come from one interleaved rotation per batch size, as MeasureHandlers measures them.
func WriteComparison(w io.Writer, native *NativeReport, reps []*HandlerReport) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "%s: WebAssembly vs native, passes interleaved per batch size (events/s = median of passes; native = compiled into the host, same host path; ratio = wasm/native)\n", native.Name)
	fmt.Fprintln(tw, "  batch\tbuild\tdeadline\tevents/s\twasm/native")
	for _, n := range native.Rows {
		fmt.Fprintf(tw, "  %d\tnative\t-\t%s\t1.00\n", n.BatchSize, group(int64(n.EventsPerSec+0.5)))
		for _, rep := range reps {
			for _, r := range rep.Rows {
				if r.BatchSize != n.BatchSize {
					continue
				}
				fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\n", r.BatchSize, rep.Name, onOff(r.Deadline),
					group(int64(r.EventsPerSec+0.5)), ratio(r.EventsPerSec, n.EventsPerSec))
			}
		}
	}
	return tw.Flush()
}

// WriteE2E prints the end-to-end results: a table per module in the order of the results (the
// native handler's last), then, when there are native results, each module's projection rate
// as a ratio of the native one (wasm/native) by shard count, then the runner warnings of each
// run.
func WriteE2E(w io.Writer, trusted bool, results []E2EResult) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	mode := "deadline on"
	if trusted {
		mode = "trusted"
	}
	var names []string
	byModule := map[string][]E2EResult{}
	native := ""
	for _, r := range results {
		if _, ok := byModule[r.Module]; !ok {
			names = append(names, r.Module)
		}
		byModule[r.Module] = append(byModule[r.Module], r)
		if r.Native {
			native = r.Module
		}
	}
	if len(names) == 0 {
		fmt.Fprintf(tw, "e2e (%s): no runs\n", mode)
	}
	for i, name := range names {
		if i > 0 {
			if err := tw.Flush(); err != nil { // each table aligns by itself
				return err
			}
		}
		if name == native {
			fmt.Fprintf(tw, "e2e %s: the Go handler compiled into the host, through the same runner, journal and store\n", name)
		} else {
			fmt.Fprintf(tw, "e2e %s (%s): journal append, then one in-process runner with the embedded store until caught up\n", name, mode)
		}
		writeE2ERows(tw, byModule[name])
	}
	if native != "" && len(names) > 1 {
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintf(tw, "e2e wasm/native: each module's project events/s (wall) and events/cpu-s / those of %s (same journal, same read model)\n", native)
		fmt.Fprint(tw, "  shards\tper")
		for _, name := range names[:len(names)-1] {
			fmt.Fprintf(tw, "\t%s", name)
		}
		fmt.Fprintln(tw)
		for _, n := range byModule[native] {
			for _, per := range []struct {
				name string
				rate func(E2EResult) float64
			}{{"wall s", E2EResult.ProjectRate}, {"cpu s", E2EResult.ProjectCPURate}} {
				fmt.Fprintf(tw, "  %d\t%s", n.Shards, per.name)
				for _, name := range names[:len(names)-1] {
					r := "-"
					for _, m := range byModule[name] {
						if m.Shards == n.Shards {
							r = ratio(per.rate(m), per.rate(n))
						}
					}
					fmt.Fprintf(tw, "\t%s", r)
				}
				fmt.Fprintln(tw)
			}
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range results {
		for _, wn := range r.Warnings {
			fmt.Fprintf(tw, "  %s, %d shards: %d× warning %q\n", r.Module, r.Shards, wn.Count, wn.Message)
		}
	}
	return tw.Flush()
}

func writeE2ERows(tw *tabwriter.Writer, results []E2EResult) {
	fmt.Fprintln(tw, "  shards\tevents\tappend ev/s\tproject ev/s\tproject time\tev/cpu-s\tbatches\treplayed\tcursor saves\tper 100 ev\tlease creates\tlease updates\tlease conflicts")
	for _, r := range results {
		cpu := "-"
		if r.ProjectCPU > 0 {
			cpu = group(int64(r.ProjectCPURate() + 0.5))
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%d\t%.2f\t%d\t%d\t%d\n", r.Shards, group(r.Events),
			group(int64(r.AppendRate()+0.5)), group(int64(r.ProjectRate()+0.5)), Dur(r.ProjectTime), cpu,
			r.Stats.Batches, group(r.Replayed()), r.Stats.CursorSaves, r.CursorSavesPer100(),
			r.LeaseCreates, r.LeaseUpdates, r.LeaseConflicts)
	}
}

// Dur formats d for the tables: microseconds below 1 ms ("250 µs"), milliseconds with one
// decimal below 1 s ("12.3 ms"), else seconds with two decimals ("1.25 s").
func Dur(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%d µs", d.Microseconds())
	case d < time.Second:
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
}

// Bytes formats n bytes in binary units: "512 B", "64.0 KiB", "1.5 MiB", "2.0 GiB".
func Bytes(n int64) string {
	const k = 1024
	switch {
	case n < k:
		return fmt.Sprintf("%d B", n)
	case n < k*k:
		return fmt.Sprintf("%.1f KiB", float64(n)/k)
	case n < k*k*k:
		return fmt.Sprintf("%.1f MiB", float64(n)/(k*k))
	default:
		return fmt.Sprintf("%.1f GiB", float64(n)/(k*k*k))
	}
}

func signedBytes(n int64) string {
	if n < 0 {
		return "-" + Bytes(-n)
	}
	return "+" + Bytes(n)
}

// group formats n with thousands separators: 1234567 -> "1,234,567".
func group(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func ratio(a, b float64) string {
	if b <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", a/b)
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}
