package main

import (
	"bytes"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestResultFigures(t *testing.T) {
	r := Result{Consumer: "x", Records: 20000, Elapsed: 8 * time.Second, CPU: 1500 * time.Millisecond, Writes: 882, ReadModelWrites: 820}
	require.InDelta(t, 2500, r.RecordsPerSec(), 1e-9)
	require.InDelta(t, 7.5, r.CPUPer100k(), 1e-9)
	require.InDelta(t, 4.41, r.WritesPer100(), 1e-9)
	require.Equal(t, "4.41 (0.31 without the read model)", r.WritesCell())
	require.Equal(t, "0.02", Result{Records: 20000, Writes: 4}.WritesCell())
	var zero Result
	require.Zero(t, zero.RecordsPerSec())
	require.Zero(t, zero.CPUPer100k())
	require.Zero(t, zero.WritesPer100())
}

func TestRusageCPU(t *testing.T) {
	ru := &syscall.Rusage{Utime: syscall.Timeval{Sec: 1, Usec: 250000}, Stime: syscall.Timeval{Sec: 0, Usec: 500}}
	require.Equal(t, 1250500*time.Microsecond, RusageCPU(ru))
	require.Zero(t, RusageCPU(nil))
}

func TestWriteTable(t *testing.T) {
	rs := []Result{
		{Consumer: "projhost", Records: 20000, Elapsed: 8 * time.Second, CPU: 1500 * time.Millisecond, Writes: 882, ReadModelWrites: 820, Raw: 3125, Failover: 6800 * time.Millisecond},
		{Consumer: "projhost, no-op handler", Records: 20000, Elapsed: 5 * time.Second, CPU: 800 * time.Millisecond, Writes: 70, FailoverNote: "as above: the same workers"},
		{Consumer: "kcl", Err: "3 of 20000 records handled after 12m0s", Failover: 0, FailoverNote: ">480 s: 1 of 2 shards read again (s1 after 70.0 s, s2 not yet)"},
		{Consumer: "harlow", Records: 20000, Elapsed: 7 * time.Second, CPU: 350 * time.Millisecond, CPUReading: 300 * time.Millisecond, Writes: 4, FailoverNote: "n/a: no lease coordination"},
	}
	var b bytes.Buffer
	require.NoError(t, WriteTable(&b, rs, 3379.4))
	require.Equal(t, ""+
		"consumer                 records/s  of raw ceiling  CPU s per 100k records  DynamoDB writes per 100 records     failover after kill -9\n"+
		"projhost                 2,500      80%             7.50                    4.41 (0.31 without the read model)  6.8 s\n"+
		"projhost, no-op handler  4,000      -               4.00                    0.35                                as above\n"+
		"kcl                      -          -               -                       -                                   >480 s\n"+
		"harlow                   2,857      -               1.75                    0.02                                n/a\n"+
		"  kcl throughput: 3 of 20000 records handled after 12m0s\n"+
		"  kcl failover: >480 s: 1 of 2 shards read again (s1 after 70.0 s, s2 not yet)\n"+
		"  harlow: 1.50 CPU s per 100k records from its first record handled to its exit (start-up and the wait for a first lease left out)\n"+
		"  harlow failover: n/a: no lease coordination\n"+
		"server's own GetRecords ceiling on the same run (raw loop, 4 shards, Limit 10000, no pacing; median over the streams): 3,379 records/s\n",
		b.String())
}

func TestGroup(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -4500: "-4,500"} {
		require.Equal(t, want, group(n))
	}
}

func TestParseProcStat(t *testing.T) {
	// proc(5): pid (comm) state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt utime stime ...
	line := "4242 (kines ispeers) S 1 4242 4242 0 -1 4194560 1500 0 0 0 123 45 0 0 20 0 9 0 777 1000000 2000 18446744073709551615\n"
	d, err := ParseProcStat(line)
	require.NoError(t, err)
	require.Equal(t, 1680*time.Millisecond, d) // (123 + 45) ticks of 10 ms
	_, err = ParseProcStat("4242 kinesispeers S 1")
	require.ErrorContains(t, err, "not a /proc/PID/stat line")
	_, err = ParseProcStat("4242 (x) S 1 2 3")
	require.ErrorContains(t, err, "short")
	_, err = ParseProcStat("4242 (x) S 1 4242 4242 0 -1 4194560 1500 0 0 0 12x 45 0")
	require.ErrorContains(t, err, "utime/stime")
}
