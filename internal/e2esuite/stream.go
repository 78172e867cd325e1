package e2esuite

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/projhost/projhost/source"
	"github.com/projhost/projhost/source/journal"
	kinesissrc "github.com/projhost/projhost/source/kinesis"
)

// Stream is where a case's events live: the local journal in the case's data directory
// (Journal) or a Kinesis stream on a Kinesis-compatible server (Kinesis). The workers, `status`
// and the other store commands are pointed at it with its flags; the case appends and reshards
// through the CLI (`journal append|split|merge`, `kinesis put|split|merge`) and reads it back in
// this process through the same source package the workers use.
type Stream struct {
	Name string
	// Cases are the names of the cases that run on it (nil: every case). The journal runs
	// them all; a Kinesis stream the ones that need nothing journal-specific (poison events at
	// known sequence numbers, hostile modules, the journal's own head in `status`).
	Cases []string
	open  func(t *testing.T, e *Env) stream
}

// stream is one case's stream.
type stream interface {
	// create makes it with n shards and returns their ids in order.
	create(n int) []string
	// flags select it in `run`, `status` and the other store commands.
	flags() []string
	// appendArgs is the command line appending the JSON-lines file path, partition key origin.
	appendArgs(path string) []string
	// reshardArgs is the command line of a split (one shard) or a merge (two).
	reshardArgs(verb string, shards []string) []string
	// source reads it in this process.
	source() source.Source
	// heads returns every shard's last sequence number ("" = empty) at the time of the call.
	heads(ctx context.Context, shards []string) (map[string]string, error)
	// contents returns every event of each shard, in order, at the time of the call.
	contents(ctx context.Context, shards []string) (map[string][]source.Event, error)
}

// Journal is the local journal (`journal create|append|split|merge` on --data): every case.
func Journal() Stream {
	return Stream{Name: "journal", open: func(t *testing.T, e *Env) stream { return &journalStream{e: e} }}
}

// KinesisCases are the cases that run on a Kinesis stream.
var KinesisCases = []string{"kill -9 twice while appending", "split and merge mid-run with kill -9"}

// Kinesis is a fresh Kinesis stream per case on the server at endpoint (kinesis-local in
// tests), made with `projhost kinesis create` and deleted afterwards; it runs KinesisCases.
func Kinesis(endpoint string) Stream {
	return Stream{Name: "kinesis", Cases: KinesisCases, open: func(t *testing.T, e *Env) stream {
		t.Helper()
		c, err := kinesissrc.NewClient(context.Background(), kinesissrc.WithEndpoint(endpoint),
			kinesissrc.WithStaticCredentials("local", "local"), kinesissrc.WithRegion(kinesissrc.LocalRegion),
			kinesissrc.WithAttemptTimeout(2*time.Minute))
		if err != nil {
			t.Fatalf("kinesis client for %s: %v", endpoint, err)
		}
		var b [4]byte
		_, _ = rand.Read(b[:])
		return &kinesisStream{e: e, endpoint: endpoint, name: "e2e" + hex.EncodeToString(b[:]), client: c}
	}}
}

type journalStream struct {
	e    *Env
	once sync.Once
	j    *journal.Journal
}

func (s *journalStream) create(n int) []string {
	s.e.Projhost("journal", "create", "--data", s.e.Dir, "--shards", fmt.Sprint(n))
	ids := make([]string, n)
	for i := range ids {
		ids[i] = journal.ShardID(i)
	}
	return ids
}

func (s *journalStream) flags() []string { return []string{"--data", s.e.Dir} }

func (s *journalStream) appendArgs(path string) []string {
	return []string{"journal", "append", "--data", s.e.Dir, "--key-field", "origin", path}
}

func (s *journalStream) reshardArgs(verb string, shards []string) []string {
	args := []string{"journal", verb, "--data", s.e.Dir}
	for _, id := range shards {
		args = append(args, "--shard", id)
	}
	return args
}

func (s *journalStream) source() source.Source {
	s.once.Do(func() {
		j, err := journal.Open(s.e.Dir)
		if err != nil {
			s.e.t.Fatalf("opening the journal: %v", err)
		}
		s.j = j
		s.e.t.Cleanup(func() { j.Close() })
	})
	return s.j
}

func (s *journalStream) heads(ctx context.Context, shards []string) (map[string]string, error) {
	j := s.source().(*journal.Journal)
	out := map[string]string{}
	for _, id := range shards {
		h, err := j.Head(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("head of %s: %w", id, err)
		}
		out[id] = h
	}
	return out, nil
}

type kinesisStream struct {
	e        *Env
	endpoint string
	name     string
	client   *kinesis.Client
	once     sync.Once
	src      *kinesissrc.Source

	mu   sync.Mutex
	logs map[string]*shardLog // guarded by mu
}

func (s *kinesisStream) create(n int) []string {
	t := s.e.t
	t.Helper()
	s.e.Projhost("kinesis", "create", "--stream", s.name, "--shards", fmt.Sprint(n), "--kinesis-endpoint", s.endpoint)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := s.client.DeleteStream(ctx, &kinesis.DeleteStreamInput{StreamName: aws.String(s.name), EnforceConsumerDeletion: aws.Bool(true)}); err != nil {
			t.Logf("deleting stream %s: %v", s.name, err)
		}
	})
	ss, err := s.source().Shards(context.Background())
	if err != nil {
		t.Fatalf("listing the shards of %s: %v", s.name, err)
	}
	ids := make([]string, len(ss))
	for i, sh := range ss {
		ids[i] = sh.ID
	}
	sort.Strings(ids) // shardId-000000000000, ...: in hash key order on a new stream
	if len(ids) != n {
		t.Fatalf("a new stream of %d shards lists %d: %v", n, len(ids), ids)
	}
	return ids
}

func (s *kinesisStream) flags() []string {
	f := []string{"--source", "kinesis", "--stream", s.name, "--kinesis-endpoint", s.endpoint}
	if s.e.backend.InDataDir {
		f = append(f, "--data", s.e.Dir)
	}
	return f
}

func (s *kinesisStream) appendArgs(path string) []string {
	return []string{"kinesis", "put", "--stream", s.name, "--kinesis-endpoint", s.endpoint, "--key-field", "origin", path}
}

func (s *kinesisStream) reshardArgs(verb string, shards []string) []string {
	args := []string{"kinesis", verb, "--stream", s.name, "--kinesis-endpoint", s.endpoint}
	for _, id := range shards {
		args = append(args, "--shard", id)
	}
	return args
}

func (s *kinesisStream) source() source.Source {
	s.once.Do(func() {
		src, err := kinesissrc.New(s.client, s.name, kinesissrc.WithIdleTime(kinesissrc.MinCallInterval), kinesissrc.WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			s.e.t.Fatalf("kinesis source on %s: %v", s.name, err)
		}
		s.src = src
	})
	return s.src
}

// heads is the last sequence number of each shard's contents.
func (s *kinesisStream) heads(ctx context.Context, shards []string) (map[string]string, error) {
	cs, err := s.contents(ctx, shards)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, id := range shards {
		out[id] = ""
		if evs := cs[id]; len(evs) > 0 {
			out[id] = evs[len(evs)-1].Seq
		}
	}
	return out, nil
}

// shardLog is what has been read of one Kinesis shard, and the reader that goes on from there.
type shardLog struct {
	r     source.ShardReader
	evs   []source.Event
	ended bool
}

// contents reads each shard on from where the last call stopped, to its end (a closed shard)
// or its tip (an open one: an empty read with MillisBehindLatest 0), and returns every event
// read of each so far. The map and slices are the stream's: callers do not change them.
func (s *kinesisStream) contents(ctx context.Context, shards []string) (map[string][]source.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.logs == nil {
		s.logs = map[string]*shardLog{}
		s.e.t.Cleanup(func() {
			for _, l := range s.logs {
				l.r.Close()
			}
		})
	}
	out := map[string][]source.Event{}
	for _, id := range shards {
		l := s.logs[id]
		if l == nil {
			r, err := s.source().Open(ctx, id, "")
			if err != nil {
				return nil, fmt.Errorf("opening %s: %w", id, err)
			}
			l = &shardLog{r: r}
			s.logs[id] = l
		}
		for !l.ended {
			b, err := l.r.Read(ctx, kinesissrc.MaxRead, 300*time.Millisecond)
			if errors.Is(err, source.ErrShardEnded) {
				l.ended = true
				break
			}
			if err != nil {
				return nil, fmt.Errorf("reading %s: %w", id, err)
			}
			l.evs = append(l.evs, b.Events...)
			if len(b.Events) == 0 && b.MillisBehind == 0 {
				break
			}
		}
		out[id] = l.evs
	}
	return out, nil
}

// contents reads every shard from its start to its end or, open, to its head.
func (s *journalStream) contents(ctx context.Context, shards []string) (map[string][]source.Event, error) {
	out := map[string][]source.Event{}
	for _, id := range shards {
		r, err := s.source().Open(ctx, id, "")
		if err != nil {
			return nil, fmt.Errorf("opening %s: %w", id, err)
		}
		for {
			b, err := r.Read(ctx, 1000, 0)
			if errors.Is(err, source.ErrShardEnded) {
				break
			}
			if err != nil {
				r.Close()
				return nil, fmt.Errorf("reading %s: %w", id, err)
			}
			if len(b.Events) == 0 {
				break
			}
			out[id] = append(out[id], b.Events...)
		}
		r.Close()
	}
	return out, nil
}

// RunOn runs the cases s supports against b, each with its own stream and store.
func RunOn(t *testing.T, bin string, b Backend, s Stream) {
	t.Helper()
	var cs []Case
	for _, c := range Cases() {
		if s.Cases == nil || slices.Contains(s.Cases, c.Name) {
			cs = append(cs, c)
		}
	}
	if len(cs) != max(len(s.Cases), len(cs)) {
		t.Fatalf("stream %s names cases the suite does not have: %v", s.Name, s.Cases)
	}
	runCases(t, bin, b, s, cs)
}
