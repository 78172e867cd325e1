package kinesis_test

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/projhost/projhost/internal/eventfile"
	"github.com/projhost/projhost/internal/flightcheck"
	"github.com/projhost/projhost/internal/kinesistest"
	"github.com/projhost/projhost/source"
	kinesissrc "github.com/projhost/projhost/source/kinesis"
)

// BenchmarkFlights20k measures kinesis-local with flights-20k on a 4-shard stream (partition
// key origin): PutRecords in batches of 500 (put rec/s; also over the first and the last tenth
// of the records, as kinesis-local slows down while a stream fills), then one consumer reading the 4 shards
// through the source, a goroutine per shard as container mode runs them, with Read(10000, 1 s)
// (read rec/s, GetRecords calls), and the server's own ceiling on the same stream: GetRecords
// in a loop per shard without pacing, Limit 10000 (raw rec/s); the two reads take turns at going
// first. Each iteration uses a new stream.
//
//	PROJHOST_KINESIS_ENDPOINT=http://127.0.0.1:PORT go test -run '^$' -bench Flights20k -benchtime 3x ./source/kinesis
func BenchmarkFlights20k(b *testing.B) {
	c := kinesistest.Client(b)
	entries := flightEntries(b)
	ctx := context.Background()
	var putS, firstS, lastS, readS, rawS time.Duration
	var calls int64
	for i := 0; i < b.N; i++ {
		name, _ := kinesistest.Stream(b, c, 4)
		start := time.Now()
		// In tenths, to show the put rate as the stream fills.
		tenth := len(entries) / 10
		for j := 0; j < 10; j++ {
			part := entries[j*tenth : (j+1)*tenth]
			if j == 9 {
				part = entries[j*tenth:]
			}
			t0 := time.Now()
			if _, err := kinesistest.Put(ctx, c, name, part); err != nil {
				b.Fatal(err)
			}
			switch j {
			case 0:
				firstS += time.Since(t0)
			case 9:
				lastS += time.Since(t0)
			}
		}
		putS += time.Since(start)

		src, err := kinesissrc.New(c, name)
		if err != nil {
			b.Fatal(err)
		}
		ss, err := src.Shards(ctx)
		if err != nil {
			b.Fatal(err)
		}
		// Alternate which read goes first: the first read after the puts was slower in some runs.
		readSource := func() {
			start := time.Now()
			if n := readShards(b, ss, func(id string) func() (int, bool, error) {
				r, err := src.Open(ctx, id, "")
				if err != nil {
					b.Fatal(err)
				}
				return func() (int, bool, error) {
					bt, err := r.Read(ctx, kinesissrc.MaxRead, time.Second)
					return len(bt.Events), bt.MillisBehind == 0, err
				}
			}); n != len(entries) {
				b.Fatalf("read %d records through the source, want %d", n, len(entries))
			}
			readS += time.Since(start)
			calls += src.Stats().GetRecords
		}
		readRaw := func() {
			start := time.Now()
			if n := readShards(b, ss, func(id string) func() (int, bool, error) {
				it, err := c.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String(name), ShardId: aws.String(id),
					ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
				if err != nil {
					b.Fatal(err)
				}
				iter := it.ShardIterator
				return func() (int, bool, error) {
					out, err := c.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(kinesissrc.MaxRead)})
					if err != nil {
						return 0, false, err
					}
					iter = out.NextShardIterator
					return len(out.Records), aws.ToInt64(out.MillisBehindLatest) == 0, nil
				}
			}); n != len(entries) {
				b.Fatalf("read %d records with raw GetRecords, want %d", n, len(entries))
			}
			rawS += time.Since(start)
		}
		if i%2 == 0 {
			readSource()
			readRaw()
		} else {
			readRaw()
			readSource()
		}
	}
	n := float64(b.N * len(entries))
	b.ReportMetric(n/putS.Seconds(), "put-rec/s")
	b.ReportMetric(n/10/firstS.Seconds(), "put-first-tenth-rec/s")
	b.ReportMetric(n/10/lastS.Seconds(), "put-last-tenth-rec/s")
	b.ReportMetric(n/readS.Seconds(), "read-rec/s")
	b.ReportMetric(n/rawS.Seconds(), "raw-rec/s")
	b.ReportMetric(float64(calls)/float64(b.N), "GetRecords/op")
	b.ReportMetric(0, "ns/op")
}

// readShards reads every shard in a goroutine with the reader open returns (records read,
// caught up, error) until the shard is caught up with nothing more, and returns the records read.
func readShards(b *testing.B, ss []source.Shard, open func(id string) func() (int, bool, error)) int {
	var wg sync.WaitGroup
	var mu sync.Mutex
	total := 0
	for _, s := range ss {
		next := open(s.ID)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n, tip, err := next()
				if err != nil {
					b.Errorf("read %s: %v", s.ID, err)
					return
				}
				mu.Lock()
				total += n
				mu.Unlock()
				if n == 0 && tip {
					return
				}
			}
		}()
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
	return total
}

// flightEntries returns flights-20k as PutRecords entries, partition key origin.
func flightEntries(b *testing.B) []types.PutRecordsRequestEntry {
	f, err := os.Open(flightcheck.DataPath("flights-20k.json"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	var entries []types.PutRecordsRequestEntry
	if err := eventfile.Scan(f, "origin", func(_ int, key string, raw []byte) error {
		entries = append(entries, types.PutRecordsRequestEntry{PartitionKey: aws.String(key), Data: append([]byte(nil), raw...)})
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	return entries
}
