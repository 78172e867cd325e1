package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
)

// Result is one consumer's row of the table.
type Result struct {
	Consumer string
	// Throughput phase: Records handled by one worker from TRIM_HORIZON, Elapsed from the
	// process's start to the last record handled, CPU the process's user+sys time (rusage)
	// at its graceful exit, Writes the DynamoDB write requests over the run.
	Records int
	Elapsed time.Duration
	CPU     time.Duration
	// Raw is the server's GetRecords ceiling measured on the same stream right after (records/s;
	// 0 if not measured): the machine's load changes it from one stream to the next.
	Raw float64
	// CPUReading is the CPU time from the first record handled to the exit (CPU less the
	// process's CPU before its first record, read from /proc/PID/stat then; 0 if unknown):
	// what the records cost without start-up and the wait for a first lease.
	CPUReading time.Duration
	Writes     int64
	// ReadModelWrites are the Writes that went to a read-model table (projhost's
	// PREFIXreadmodel: the handler's documents); the peers' trivial handlers keep none.
	ReadModelWrites int64
	Ops             map[string]int64
	Err             string // why the throughput phase has no figures ("" when it has)
	// Failover phase: the time from kill -9 of one of two workers to every shard it held being
	// read again (Failover > 0), or why there is no figure (FailoverNote).
	Failover     time.Duration
	FailoverNote string
}

// RecordsPerSec is Records / Elapsed (0 without either).
func (r Result) RecordsPerSec() float64 {
	if r.Records == 0 || r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Records) / r.Elapsed.Seconds()
}

// RawShare formats RecordsPerSec as a share of Raw ("-" without Raw).
func (r Result) RawShare() string {
	if r.Raw <= 0 || r.Records == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", 100*r.RecordsPerSec()/r.Raw)
}

// CPUPer100k is the CPU seconds per 100,000 records.
func (r Result) CPUPer100k() float64 {
	if r.Records == 0 {
		return 0
	}
	return r.CPU.Seconds() * 100000 / float64(r.Records)
}

// WritesPer100 is the DynamoDB write requests per 100 records.
func (r Result) WritesPer100() float64 {
	if r.Records == 0 {
		return 0
	}
	return float64(r.Writes) * 100 / float64(r.Records)
}

// WritesCell formats the writes per 100 records, with the share outside the read model when
// some went to it.
func (r Result) WritesCell() string {
	s := fmt.Sprintf("%.2f", r.WritesPer100())
	if r.ReadModelWrites > 0 && r.Records > 0 {
		s += fmt.Sprintf(" (%.2f without the read model)", float64(r.Writes-r.ReadModelWrites)*100/float64(r.Records))
	}
	return s
}

// CPUReadingPer100k is CPUReading in seconds per 100,000 records.
func (r Result) CPUReadingPer100k() float64 {
	if r.Records == 0 {
		return 0
	}
	return r.CPUReading.Seconds() * 100000 / float64(r.Records)
}

// ClockTicks is the unit of the CPU times in /proc/PID/stat (USER_HZ, 100 on Linux: proc(5)).
const ClockTicks = 100

// ParseProcStat returns utime + stime of a /proc/PID/stat line (fields 14 and 15, in
// ClockTicks, counted after the parenthesised command name, which may hold spaces).
func ParseProcStat(line string) (time.Duration, error) {
	i := strings.LastIndexByte(line, ')')
	if i < 0 {
		return 0, fmt.Errorf("not a /proc/PID/stat line: %.60q", line)
	}
	f := strings.Fields(line[i+1:]) // f[0] is field 3 (state)
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc/PID/stat line: %.60q", line)
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/PID/stat utime/stime %q: %w", s, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / ClockTicks, nil
}

// RusageCPU is user + system time of a finished process's rusage (os.ProcessState.SysUsage()
// on Linux). Nil gives 0.
func RusageCPU(ru *syscall.Rusage) time.Duration {
	if ru == nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// WriteTable prints the side-by-side table of rs, then the GetRecords ceiling (raw, in
// records/s; 0 when not measured).
func WriteTable(w io.Writer, rs []Result, raw float64) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "consumer\trecords/s\tof raw ceiling\tCPU s per 100k records\tDynamoDB writes per 100 records\tfailover after kill -9")
	for _, r := range rs {
		if r.Err != "" {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t%s\n", r.Consumer, failover(r))
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.2f\t%s\t%s\n", r.Consumer, group(int64(r.RecordsPerSec()+0.5)), r.RawShare(), r.CPUPer100k(), r.WritesCell(), failover(r))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rs {
		if r.Err != "" {
			fmt.Fprintf(w, "  %s throughput: %s\n", r.Consumer, r.Err)
		} else if r.CPUReading > 0 {
			fmt.Fprintf(w, "  %s: %.2f CPU s per 100k records from its first record handled to its exit (start-up and the wait for a first lease left out)\n", r.Consumer, r.CPUReadingPer100k())
		}
		if r.FailoverNote != "" && failover(r) != "as above" {
			fmt.Fprintf(w, "  %s failover: %s\n", r.Consumer, r.FailoverNote)
		}
	}
	if raw > 0 {
		fmt.Fprintf(w, "server's own GetRecords ceiling on the same run (raw loop, 4 shards, Limit 10000, no pacing; median over the streams): %s records/s\n", group(int64(raw+0.5)))
	}
	return nil
}

// failover formats r's failover cell.
func failover(r Result) string {
	if r.Failover > 0 {
		return fmt.Sprintf("%.1f s", r.Failover.Seconds())
	}
	if r.FailoverNote != "" {
		if i := strings.IndexByte(r.FailoverNote, ':'); i > 0 {
			return r.FailoverNote[:i]
		}
	}
	return "-"
}

// group formats n with thousands separators: 12345 -> "12,345".
func group(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
