package journal

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Child processes: the test binary re-runs itself with JOURNAL_TEST_CHILD set.
//
//	append <dir> <proc> <count>  appends count events in calls of 50: key p<proc>-k<i%5>, data "<proc>:<i>"
//	loop <dir>                    appends calls of loopCall events forever: key k<i%10>, data "<i>"
//	reshard <dir>                 forever: splits the lowest open shard, appends 100 events, merges
//	                              the two children back (reshardLoop)
func TestMain(m *testing.M) {
	if args := os.Getenv("JOURNAL_TEST_CHILD"); args != "" {
		if err := child(strings.Fields(args)); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(2)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func child(args []string) error {
	ctx := context.Background()
	j, err := Open(args[1])
	if err != nil {
		return err
	}
	defer j.Close()
	switch args[0] {
	case "append":
		count, _ := strconv.Atoi(args[3])
		for i := 0; i < count; i += 50 {
			var evs []AppendEvent
			for k := i; k < i+50 && k < count; k++ {
				evs = append(evs, AppendEvent{PartitionKey: fmt.Sprintf("p%s-k%d", args[2], k%5), Data: fmt.Appendf(nil, "%s:%d", args[2], k)})
			}
			if _, err := j.Append(ctx, evs); err != nil {
				return err
			}
		}
		return nil
	case "reshard":
		return reshardLoop(ctx, j)
	case "loop":
		for i := 0; ; {
			evs := make([]AppendEvent, loopCall)
			for k := range evs {
				evs[k] = AppendEvent{PartitionKey: fmt.Sprintf("k%d", i%10), Data: []byte(strconv.Itoa(i))}
				i++
			}
			if _, err := j.Append(ctx, evs); err != nil {
				return err
			}
		}
	}
	return fmt.Errorf("unknown child command %q", args)
}

// loopCall is the size of the "loop" child's Append calls: two and a half transactions.
const loopCall = TxEvents * 5 / 2

func startChild(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "JOURNAL_TEST_CHILD="+strings.Join(args, " "))
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd
}

// readShards reads every shard to its head and checks sequence numbers are 1..head.
func readShards(t *testing.T, j *Journal) map[string][]string {
	t.Helper()
	ctx := context.Background()
	perKey := map[string][]string{}
	for s := 0; s < j.ShardCount(); s++ {
		head, err := j.Head(ctx, ShardID(s))
		if err != nil {
			t.Fatal(err)
		}
		r, err := j.Open(ctx, ShardID(s), "")
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		for {
			b, err := r.Read(ctx, 1000, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(b.Events) == 0 {
				break
			}
			for _, e := range b.Events {
				n++
				if e.Seq != strconv.FormatInt(n, 10) {
					t.Fatalf("shard %d: event %d has seq %s", s, n, e.Seq)
				}
				perKey[e.PartitionKey] = append(perKey[e.PartitionKey], string(e.Data))
			}
		}
		if strconv.FormatInt(n, 10) != head && !(n == 0 && head == "") {
			t.Fatalf("shard %d: read %d events, head %q", s, n, head)
		}
	}
	return perKey
}

// TestMultiProcessAppend: three processes append while this one reads.
func TestMultiProcessAppend(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dir := t.TempDir()
	j := create(t, dir, 4, WithPollInterval(5*time.Millisecond))
	const procs, count = 3, 400
	var cmds []*exec.Cmd
	for p := 0; p < procs; p++ {
		cmds = append(cmds, startChild(t, "append", dir, strconv.Itoa(p), strconv.Itoa(count)))
	}
	// Read concurrently while they append.
	ctx := context.Background()
	total := 0
	deadline := time.Now().Add(60 * time.Second)
	rs := make([]*reader, 4)
	for s := range rs {
		r, err := j.Open(ctx, ShardID(s), "")
		if err != nil {
			t.Fatal(err)
		}
		rs[s] = r.(*reader)
	}
	for total < procs*count && time.Now().Before(deadline) {
		for _, r := range rs {
			b, err := r.Read(ctx, 100, 10*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			total += len(b.Events)
		}
	}
	for _, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("child: %v", err)
		}
	}
	if total != procs*count {
		t.Fatalf("live readers saw %d events, want %d", total, procs*count)
	}
	checkAppended(t, readShards(t, j), procs, count)
}

// checkAppended checks that perKey (key -> data in read order) holds what procs "append"
// children of count events each appended, each key's events in order.
func checkAppended(t *testing.T, perKey map[string][]string, procs, count int) {
	t.Helper()
	for p := 0; p < procs; p++ {
		for k := 0; k < 5; k++ {
			key := fmt.Sprintf("p%d-k%d", p, k)
			got := perKey[key]
			if len(got) != count/5 {
				t.Fatalf("key %s: %d events, want %d", key, len(got), count/5)
			}
			for n, d := range got {
				if want := fmt.Sprintf("%d:%d", p, n*5+k); d != want {
					t.Fatalf("key %s event %d = %s, want %s (order per key)", key, n, d, want)
				}
			}
		}
	}
}

// TestKillDuringAppend: kill -9 a process in the middle of big appends; what is visible is a
// prefix of whole transactions (TxEvents each), heads agree with the events.
func TestKillDuringAppend(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dir := t.TempDir()
	j := create(t, dir, 3)
	cmd := startChild(t, "loop", dir)
	deadline := time.Now().Add(30 * time.Second)
	for {
		h, err := j.Head(context.Background(), ShardID(0))
		if err != nil {
			t.Fatal(err)
		}
		if n, _ := strconv.Atoi(h); n > 3000 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(37 * time.Millisecond) // land somewhere inside a call
	j2 := killAndReopen(t, cmd, dir)
	perKey := readShards(t, j2)
	seen := map[int]bool{}
	for k := 0; k < 10; k++ {
		prev := -1
		for _, d := range perKey[fmt.Sprintf("k%d", k)] {
			i, err := strconv.Atoi(d)
			if err != nil || i%10 != k || i <= prev || seen[i] {
				t.Fatalf("key k%d: bad or out-of-order event %q after %d", k, d, prev)
			}
			prev = i
			seen[i] = true
		}
	}
	m := len(seen)
	for i := 0; i < m; i++ {
		if !seen[i] {
			t.Fatalf("%d events visible but event %d is missing: not a prefix", m, i)
		}
	}
	if r := m % loopCall; r != 0 && r != TxEvents && r != 2*TxEvents {
		t.Fatalf("%d events visible: not a whole number of transactions (calls of %d in transactions of %d)", m, loopCall, TxEvents)
	}
	t.Logf("%d events visible after kill -9", m)
}

// killAndReopen kills cmd with SIGKILL, waits for it, and opens dir's journal again (closed when
// t ends).
func killAndReopen(t *testing.T, cmd *exec.Cmd, dir string) *Journal {
	t.Helper()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	j, err := Open(dir)
	if err != nil {
		t.Fatalf("reopening after kill -9: %v", err)
	}
	t.Cleanup(func() { j.Close() })
	return j
}
