package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"os"
	"sync"
	"time"
)

// Line is what a peer worker (subcommands kcl and harlow) writes on stdout, one JSON object per
// line: Count records of Shard handled by Worker between First and Last, and in MaxSeq the
// highest sequence number of the shard this worker handled so far (decimal, as Kinesis gives it). The reporter writes one line per
// shard per flush period (FlushEvery) in which records were handled, so that writing the lines
// costs the measured process next to nothing.
type Line struct {
	Worker string    `json:"worker"`
	Shard  string    `json:"shard"`
	Count  int       `json:"count"`
	MaxSeq string    `json:"max_seq,omitempty"`
	First  time.Time `json:"first"`
	Last   time.Time `json:"last"`
}

// FlushEvery is how often a Reporter writes the records handled since its last write.
const FlushEvery = 50 * time.Millisecond

// Reporter gathers the records a peer's handler sees and writes them as Lines. Handle is safe
// for concurrent use (the peers call their handlers from one goroutine per shard).
type Reporter struct {
	worker string
	mu     sync.Mutex
	open   map[string]*Line    // per shard: handled since the last flush
	maxSeq map[string]*big.Int // per shard: highest sequence number seen so far
	enc    *json.Encoder
	now    func() time.Time
}

// NewReporter returns a Reporter writing to w for worker.
func NewReporter(w io.Writer, worker string) *Reporter {
	return &Reporter{worker: worker, open: map[string]*Line{}, maxSeq: map[string]*big.Int{},
		enc: json.NewEncoder(w), now: time.Now}
}

// Handle records n records of shard, the last of which has sequence number seq ("" if unknown).
func (r *Reporter) Handle(shard string, n int, seq string) {
	t := r.now().UTC()
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.open[shard]
	if l == nil {
		l = &Line{Worker: r.worker, Shard: shard, First: t}
		r.open[shard] = l
	}
	l.Count += n
	l.Last = t
	if s, ok := new(big.Int).SetString(seq, 10); ok {
		if m := r.maxSeq[shard]; m == nil || s.Cmp(m) > 0 {
			r.maxSeq[shard] = s
		}
	}
	if m := r.maxSeq[shard]; m != nil {
		l.MaxSeq = m.String()
	}
}

// Flush writes one Line per shard with records handled since the last Flush, in shard order.
func (r *Reporter) Flush() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range sortedKeys(r.open) {
		if err := r.enc.Encode(r.open[s]); err != nil {
			return err
		}
		delete(r.open, s)
	}
	return nil
}

// Run flushes every FlushEvery until stop is closed, then once more.
func (r *Reporter) Run(stop <-chan struct{}) {
	t := time.NewTicker(FlushEvery)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			_ = r.Flush()
		case <-stop:
			_ = r.Flush()
			return
		}
	}
}

// Handled is one group of records handled, from a peer's Line or a projhost trace batch.
type Handled struct {
	Worker string
	Shard  string
	Count  int
	First  time.Time
	Last   time.Time
}

// ParseLine reads one line of a worker's output: a peer's Line, or a projhost trace record of
// worker (batch records only). ok is false for any other line (a trace record of another event,
// a blank line); err is set for a line that is not JSON.
func ParseLine(worker string, b []byte) (h Handled, ok bool, err error) {
	if len(b) == 0 {
		return Handled{}, false, nil
	}
	// The fields of a peer's Line and those of projhost's trace records (projection.TraceRecord:
	// time, event, shard, events) the driver reads.
	var probe struct {
		Worker string    `json:"worker"`
		Shard  string    `json:"shard"`
		Count  int       `json:"count"`
		First  time.Time `json:"first"`
		Last   time.Time `json:"last"`
		Event  string    `json:"event"`
		Time   time.Time `json:"time"`
		Events int       `json:"events"`
	}
	if err := json.Unmarshal(b, &probe); err != nil {
		return Handled{}, false, fmt.Errorf("not a worker line: %w: %.80q", err, b)
	}
	switch {
	case probe.Event == "batch" && probe.Events > 0:
		// A projhost batch record is written when the handler returned: First = Last = then.
		return Handled{Worker: worker, Shard: probe.Shard, Count: probe.Events, First: probe.Time, Last: probe.Time}, true, nil
	case probe.Event == "" && probe.Count > 0 && probe.Shard != "":
		w := probe.Worker
		if w == "" {
			w = worker
		}
		return Handled{Worker: w, Shard: probe.Shard, Count: probe.Count, First: probe.First, Last: probe.Last}, true, nil
	}
	return Handled{}, false, nil
}

// Tail follows the file at path (written by a worker), sending every Handled it parses on out,
// until stop is closed and the file has been read to its end. Lines that do not parse are
// counted in bad. It polls every 20 ms (the file may not exist yet).
func Tail(path, worker string, out chan<- Handled, stop <-chan struct{}, bad *int) error {
	var f *os.File
	var rd *bufio.Reader
	var partial []byte
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	for {
		stopping := false
		select {
		case <-stop:
			stopping = true
		default:
		}
		if f == nil {
			var err error
			if f, err = os.Open(path); err != nil {
				if !os.IsNotExist(err) {
					return err
				}
				f = nil
			} else {
				rd = bufio.NewReaderSize(f, 1<<16)
			}
		}
		for f != nil {
			b, err := rd.ReadBytes('\n')
			partial = append(partial, b...)
			if err == io.EOF {
				break
			}
			if err != nil {
				return err
			}
			h, ok, perr := ParseLine(worker, partial[:len(partial)-1])
			partial = partial[:0]
			if perr != nil {
				*bad++
				continue
			}
			if ok {
				out <- h
			}
		}
		if stopping {
			return nil
		}
		select {
		case <-tick.C:
		case <-stop:
		}
	}
}
