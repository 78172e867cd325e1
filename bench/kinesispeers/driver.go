package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// Consumers are the consumers the driver compares, in table order.
var Consumers = []string{"projhost", "kcl", "harlow"}

// noopConsumer is projhost with the handler that writes nothing (--noop-handler).
const noopConsumer = "projhost-noop"

// driver runs the benchmark: see runDriver.
type driver struct {
	root, projhost, handler, data string
	noop                          string // the handler of the no-op projhost row ("" for none)
	kinesisURL, dynamoURL         string
	consumers                     []string
	shards, putRate               int
	consumeTimeout, holdTimeout   time.Duration
	failoverTimeout               time.Duration
	work                          string // directory for worker outputs and logs
	self                          string // this executable (the peers' workers)
	kc                            *kinesis.Client
	ddb                           *dynamodb.Client
	log                           io.Writer
	seq                           int
}

// runDriver is the `run` subcommand: for each consumer, the throughput phase and the failover
// phase (README "Kinesis consumers side by side"), then one table on stdout. Progress goes to
// stderr.
func runDriver(args []string) error {
	d := &driver{log: os.Stderr}
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.StringVar(&d.root, "root", "", "projhost repository root (default: found upwards from the working directory)")
	fs.StringVar(&d.projhost, "projhost", "", "projhost binary (default ROOT/bin/projhost)")
	fs.StringVar(&d.handler, "handler", "", "projhost handler (default ROOT/build/wasm/count-go.wasm)")
	fs.StringVar(&d.noop, "noop-handler", "default", "a projhost handler that writes nothing, for a throughput row of projhost without a read model (default ROOT/build/wasm/noop.wasm when it exists; \"\" for no such row)")
	fs.StringVar(&d.data, "data", "", "records to put, a JSON array (default ROOT/plugins/examples/flightdelays/data/flights-20k.json)")
	only := fs.String("consumers", strings.Join(Consumers, ","), "consumers to run, comma-separated: projhost, kcl, harlow")
	fs.IntVar(&d.shards, "shards", 4, "shards of each stream")
	fs.IntVar(&d.putRate, "put-rate", 100, "failover phase: records put per second while the workers run")
	fs.DurationVar(&d.consumeTimeout, "consume-timeout", 12*time.Minute, "throughput phase: give up on a worker that has not handled every record after this long")
	fs.DurationVar(&d.holdTimeout, "hold-timeout", 8*time.Minute, "failover phase: give up when the two workers do not both hold shards after this long")
	fs.DurationVar(&d.failoverTimeout, "failover-timeout", 8*time.Minute, "failover phase: give up waiting for the survivor to read the killed worker's shards after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	for _, c := range strings.Split(*only, ",") {
		if !contains(Consumers, c) {
			return fmt.Errorf("unknown consumer %q in --consumers: want projhost, kcl or harlow", c)
		}
		d.consumers = append(d.consumers, c)
	}
	if d.putRate < 10 {
		return fmt.Errorf("--put-rate %d: want at least 10 records/s", d.putRate)
	}
	if err := d.setup(); err != nil {
		return err
	}
	stop, err := d.servers()
	defer stop()
	if err != nil {
		return err
	}
	entries, err := loadEntries(d.data)
	if err != nil {
		return err
	}
	d.logf("== kinesis-local %s, DynamoDB stand-in %s, %d records of %s, work dir %s", d.kinesisURL, d.dynamoURL, len(entries), d.data, d.work)

	var results []Result
	raws := map[string]float64{}
	for _, c := range d.consumers {
		r, raw := d.throughput(c, len(entries))
		if raw > 0 {
			raws[c] = raw
		}
		if c == "harlow" {
			r.FailoverNote = "n/a: harlow/kinesis-consumer v0.3.5 has no lease coordination (its one Group, AllGroup, gives every process every shard: two workers each read every record), so there is nothing to fail over"
		} else {
			r.Failover, r.FailoverNote = d.failover(c, entries)
		}
		results = append(results, r)
		d.logf("== %s done: %+v", c, r)
		if c == "projhost" && d.noop != "" {
			r, raw := d.throughput(noopConsumer, len(entries))
			if raw > 0 {
				raws[noopConsumer] = raw
			}
			r.Consumer = "projhost, no-op handler"
			r.FailoverNote = "as above: the same workers (failover does not depend on the handler; not measured again)"
			results = append(results, r)
			d.logf("== %s done: %+v", noopConsumer, r)
		}
	}
	fmt.Printf("Kinesis consumers side by side: %d-shard streams on kinesis-local, %d records of %s (partition key origin), DynamoDB stand-in through a counting proxy, %d cores, %s\n",
		d.shards, len(entries), filepath.Base(d.data), runtime.NumCPU(), time.Now().UTC().Format(time.RFC3339))
	if err := WriteTable(os.Stdout, results, median(values(raws))); err != nil {
		return err
	}
	if len(raws) > 1 {
		fmt.Printf("  (per stream: %s)\n", rawString(raws, append([]string{noopConsumer}, d.consumers...)))
	}
	for _, r := range results {
		if r.Ops != nil {
			fmt.Printf("  %s DynamoDB requests: %s\n", r.Consumer, OpsString(r.Ops))
		}
	}
	return nil
}

func (d *driver) logf(format string, a ...any) {
	fmt.Fprintf(d.log, "%s "+format+"\n", append([]any{time.Now().UTC().Format("15:04:05")}, a...)...)
}

// setup finds the repository and the binaries and makes the work directory.
func (d *driver) setup() error {
	if d.root == "" {
		wd, err := os.Getwd()
		if err != nil {
			return err
		}
		if d.root, err = findRoot(wd); err != nil {
			return err
		}
	}
	def := func(p *string, rel string) {
		if *p == "" {
			*p = filepath.Join(d.root, rel)
		}
	}
	def(&d.projhost, "bin/projhost")
	def(&d.handler, "build/wasm/count-go.wasm")
	def(&d.data, "plugins/examples/flightdelays/data/flights-20k.json")
	if d.noop == "default" {
		d.noop = filepath.Join(d.root, "build/wasm/noop.wasm")
		if _, err := os.Stat(d.noop); err != nil {
			d.noop = ""
		}
	}
	for _, p := range []string{d.projhost, d.handler, d.data} {
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("%w (run `make build build/wasm/count-go.wasm`, or `make bench-kinesis`, which does)", err)
		}
	}
	var err error
	if d.self, err = os.Executable(); err != nil {
		return err
	}
	d.work, err = os.MkdirTemp("", "kbench-")
	return err
}

// findRoot walks up from dir to the directory holding tools/kinesis-local/start.sh.
func findRoot(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for d := abs; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "tools/kinesis-local/start.sh")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no projhost repository (tools/kinesis-local/start.sh) at or above %s: pass --root", dir)
		}
	}
}

// servers takes the endpoints from $PROJHOST_KINESIS_ENDPOINT and $PROJHOST_DYNAMODB_ENDPOINT or
// starts kinesis-local and dynalite on free loopback ports; stop stops what it started.
func (d *driver) servers() (stop func(), err error) {
	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	start := func(env, tool string) (string, error) {
		if u := os.Getenv(env); u != "" {
			return u, nil
		}
		port, err := freePort()
		if err != nil {
			return "", err
		}
		out, err := exec.Command(filepath.Join(d.root, "tools", tool, "start.sh"), strconv.Itoa(port)).Output()
		if err != nil {
			return "", fmt.Errorf("tools/%s/start.sh %d: %w", tool, port, err)
		}
		stops = append(stops, func() { _ = exec.Command(filepath.Join(d.root, "tools", tool, "stop.sh"), strconv.Itoa(port)).Run() })
		return strings.TrimSpace(string(out)), nil
	}
	if d.kinesisURL, err = start("PROJHOST_KINESIS_ENDPOINT", "kinesis-local"); err != nil {
		return stop, err
	}
	if d.dynamoURL, err = start("PROJHOST_DYNAMODB_ENDPOINT", "dynalite"); err != nil {
		return stop, err
	}
	cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("dummy", "dummy", "")}
	d.kc = kinesis.NewFromConfig(cfg, func(o *kinesis.Options) { o.BaseEndpoint = aws.String(d.kinesisURL) })
	d.ddb = dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(d.dynamoURL) })
	return stop, nil
}

// names returns a fresh stream name and table prefix / application name for consumer c.
func (d *driver) names(c, phase string) (stream, app string) {
	d.seq++
	id := fmt.Sprintf("kb-%s-%s-%d-%d", c, phase, time.Now().Unix(), d.seq)
	return id, id
}

// stream creates a stream of d.shards shards (projhost kinesis create waits until it is ACTIVE).
func (d *driver) stream(name string) error {
	return d.projhostCmd("kinesis", "create", "--stream", name, "--shards", strconv.Itoa(d.shards), "--kinesis-endpoint", d.kinesisURL)
}

func (d *driver) projhostCmd(args ...string) error {
	cmd := exec.Command(d.projhost, args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("projhost %s: %w: %s", strings.Join(args[:2], " "), err, strings.TrimSpace(string(out)))
	}
	d.logf("   projhost %s: %s", strings.Join(args[:2], " "), lastLine(out))
	return nil
}

// tables creates consumer c's fresh DynamoDB tables (KCL creates its own lease table).
func (d *driver) tables(c, app string) error {
	switch c {
	case "projhost", noopConsumer:
		return d.projhostCmd("tables", "create", "--dynamodb-endpoint", d.dynamoURL, "--table-prefix", app+"-")
	case "harlow":
		// The table harlow's store/ddb reads and writes: hash key namespace, range key shard_id.
		ctx := context.Background()
		_, err := d.ddb.CreateTable(ctx, &dynamodb.CreateTableInput{
			TableName: aws.String(app),
			AttributeDefinitions: []dtypes.AttributeDefinition{
				{AttributeName: aws.String("namespace"), AttributeType: dtypes.ScalarAttributeTypeS},
				{AttributeName: aws.String("shard_id"), AttributeType: dtypes.ScalarAttributeTypeS}},
			KeySchema: []dtypes.KeySchemaElement{
				{AttributeName: aws.String("namespace"), KeyType: dtypes.KeyTypeHash},
				{AttributeName: aws.String("shard_id"), KeyType: dtypes.KeyTypeRange}},
			BillingMode: dtypes.BillingModePayPerRequest,
		})
		if err != nil {
			return fmt.Errorf("create harlow's table %s: %w", app, err)
		}
		return dynamodb.NewTableExistsWaiter(d.ddb).Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(app)}, time.Minute)
	}
	return nil
}

// worker is one started worker process and what it handled.
type worker struct {
	id, out string
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
}

// startWorker starts one worker of consumer c on stream with its state under app, DynamoDB at
// dynamo; its records handled go to w.out (projhost: --trace; peers: stdout), its log to
// w.out + ".log".
func (d *driver) startWorker(c, id, stream, app, dynamo string, untilCaughtUp bool) (*worker, error) {
	w := &worker{id: id, out: filepath.Join(d.work, id+".jsonl"), exited: make(chan struct{})}
	logf, err := os.Create(w.out + ".log")
	if err != nil {
		return nil, err
	}
	switch c {
	case "projhost", noopConsumer:
		handler := d.handler
		if c == noopConsumer {
			handler = d.noop
		}
		args := []string{"run", "--source", "kinesis", "--stream", stream, "--kinesis-endpoint", d.kinesisURL,
			"--store", "dynamodb", "--dynamodb-endpoint", dynamo, "--table-prefix", app + "-",
			"--name", "kbench", "--handler", handler, "--trace", w.out, "--worker-id", id,
			// run --handler deploys the handler to the registry first: its bytes go here.
			"--module-store", filepath.Join(d.work, "modules")}
		if untilCaughtUp {
			args = append(args, "--until-caught-up")
		}
		w.cmd = exec.Command(d.projhost, args...)
		w.cmd.Stdout = logf
	default:
		args := []string{c, "--stream", stream, "--app", app, "--table", app, "--worker", id,
			"--kinesis-endpoint", d.kinesisURL, "--dynamodb-endpoint", dynamo}
		w.cmd = exec.Command(d.self, args...)
		out, err := os.Create(w.out)
		if err != nil {
			return nil, err
		}
		w.cmd.Stdout = out
	}
	w.cmd.Stderr = logf
	if err := w.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { w.waitErr = w.cmd.Wait(); close(w.exited) }()
	return w, nil
}

// stopWorker stops w gracefully (SIGTERM), or kills it after 30 s, and waits for it.
func stopWorker(w *worker) {
	select {
	case <-w.exited:
		return
	default:
	}
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-w.exited:
	case <-time.After(30 * time.Second):
		_ = w.cmd.Process.Kill()
		<-w.exited
	}
}

// tails follows the outputs of ws, merged on the returned channel, until stop is called.
func tails(ws ...*worker) (<-chan Handled, func() int) {
	ch := make(chan Handled, 1024)
	done := make(chan struct{})
	var wg sync.WaitGroup
	bad := make([]int, len(ws))
	for i, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = Tail(w.out, w.id, ch, done, &bad[i])
		}()
	}
	var once sync.Once
	stop := func() int {
		once.Do(func() { close(done); go func() { wg.Wait(); close(ch) }() })
		n := 0
		for _, b := range bad {
			n += b
		}
		return n
	}
	return ch, stop
}

// throughput runs consumer c's throughput phase: records are put into a fresh stream, then
// one worker reads them all from TRIM_HORIZON. It returns the row (without the failover) and
// the raw GetRecords ceiling measured on the same stream afterwards.
func (d *driver) throughput(c string, n int) (Result, float64) {
	r := Result{Consumer: c}
	fail := func(err error) (Result, float64) {
		r.Err = err.Error()
		d.logf("   %s throughput: %v", c, err)
		return r, 0
	}
	stream, app := d.names(c, "tp")
	d.logf("== %s throughput: stream %s", c, stream)
	if err := d.stream(stream); err != nil {
		return fail(err)
	}
	if err := d.projhostCmd("kinesis", "put", "--stream", stream, "--key-field", "origin", "--kinesis-endpoint", d.kinesisURL, d.data); err != nil {
		return fail(err)
	}
	if err := d.tables(c, app); err != nil {
		return fail(err)
	}
	proxy, err := StartProxy(d.dynamoURL)
	if err != nil {
		return fail(err)
	}
	defer proxy.Close()

	start := time.Now()
	w, err := d.startWorker(c, c+"-tp", stream, app, proxy.URL, true)
	if err != nil {
		return fail(err)
	}
	ch, stopTail := tails(w)
	total := 0
	var first, last time.Time
	cpuBefore := time.Duration(-1) // the process's CPU at its first record
	stopping := false
	deadline := time.After(d.consumeTimeout)
	exited := w.exited
wait:
	for {
		select {
		case h, ok := <-ch:
			if !ok {
				break wait
			}
			if first.IsZero() || h.First.Before(first) {
				first = h.First
			}
			if cpuBefore < 0 {
				if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", w.cmd.Process.Pid)); err == nil {
					if cpuBefore, err = ParseProcStat(string(b)); err != nil {
						cpuBefore = -1
					}
				}
			}
			if total < n && h.Last.After(last) {
				last = h.Last
			}
			total += h.Count
			if total >= n && !isProjhost(c) && !stopping {
				stopping = true
				go stopWorker(w) // peers run until stopped; projhost --until-caught-up exits by itself
			}
		case <-exited:
			exited = nil
			stopTail() // read the output to its end, then ch closes
		case <-deadline:
			_ = w.cmd.Process.Kill()
			<-w.exited
			stopTail()
			for h := range ch {
				total += h.Count
			}
			return fail(fmt.Errorf("%d of %d records handled after %s (log: %s.log)", total, n, d.consumeTimeout, w.out))
		}
	}
	if bad := stopTail(); bad > 0 {
		d.logf("   %s: %d output lines did not parse", c, bad)
	}
	if total < n {
		return fail(fmt.Errorf("worker exited (%v) after %d of %d records (log: %s.log)", w.waitErr, total, n, w.out))
	}
	if w.waitErr != nil && isProjhost(c) {
		return fail(fmt.Errorf("projhost run exited with %v (log: %s.log)", w.waitErr, w.out))
	}
	r.Records = n
	r.Elapsed = last.Sub(start)
	r.CPU = RusageCPU(rusage(w.cmd.ProcessState))
	if cpuBefore >= 0 {
		r.CPUReading = r.CPU - cpuBefore
	}
	r.Ops = proxy.Ops()
	r.Writes = Writes(r.Ops)
	tw := proxy.TableWrites()
	r.ReadModelWrites = tw[app+"-readmodel"]
	d.logf("   %s: %d records handled (%d duplicates), first at +%s, last at +%s, CPU %s (%s before the first record), DynamoDB %s, writes per table %s", c, total, total-n,
		first.Sub(start).Round(time.Millisecond), r.Elapsed.Round(time.Millisecond), r.CPU, r.CPU-r.CPUReading, OpsString(r.Ops), OpsString(tw))
	raw, err := d.rawCeiling(stream, n)
	if err != nil {
		d.logf("   raw GetRecords on %s: %v", stream, err)
		return r, 0
	}
	d.logf("   raw GetRecords ceiling on %s: %.0f records/s", stream, raw)
	r.Raw = raw
	return r, raw
}

func rusage(ps *os.ProcessState) *syscall.Rusage {
	if ps == nil {
		return nil
	}
	ru, _ := ps.SysUsage().(*syscall.Rusage)
	return ru
}

// rawCeiling reads stream from TRIM_HORIZON with a GetRecords loop per shard (Limit 10,000,
// no pacing) until each shard is empty at its tip, and returns records/s (the server's own
// ceiling, as source/kinesis/measure_test.go measures it).
func (d *driver) rawCeiling(stream string, want int) (float64, error) {
	ctx := context.Background()
	ls, err := d.kc.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String(stream)})
	if err != nil {
		return 0, err
	}
	start := time.Now()
	var mu sync.Mutex
	total := 0
	var firstErr error
	var wg sync.WaitGroup
	for _, s := range ls.Shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := readShard(ctx, d.kc, stream, aws.ToString(s.ShardId))
			mu.Lock()
			total += n
			if err != nil && firstErr == nil {
				firstErr = err
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	el := time.Since(start)
	if firstErr != nil {
		return 0, firstErr
	}
	if total < want {
		return 0, fmt.Errorf("read %d records, want %d", total, want)
	}
	return float64(total) / el.Seconds(), nil
}

func readShard(ctx context.Context, kc *kinesis.Client, stream, shard string) (int, error) {
	it, err := kc.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String(stream), ShardId: aws.String(shard),
		ShardIteratorType: ktypes.ShardIteratorTypeTrimHorizon})
	if err != nil {
		return 0, err
	}
	iter, n := it.ShardIterator, 0
	for iter != nil {
		out, err := kc.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(10000)})
		if err != nil {
			return n, err
		}
		n += len(out.Records)
		if len(out.Records) == 0 && aws.ToInt64(out.MillisBehindLatest) == 0 {
			break
		}
		iter = out.NextShardIterator
	}
	return n, nil
}

// failover runs consumer c's failover phase: two workers on a fresh stream fed at d.putRate;
// once both hold shards (every shard read, each worker reading some, and no change for 5 s),
// the one holding more is killed with SIGKILL; it returns the time until the survivor has
// handled a record on every shard the killed worker held, or why there is no figure.
func (d *driver) failover(c string, entries []entry) (time.Duration, string) {
	stream, app := d.names(c, "fo")
	d.logf("== %s failover: stream %s, %d records/s put while two workers run", c, stream, d.putRate)
	if err := d.stream(stream); err != nil {
		return 0, "error: " + err.Error()
	}
	if err := d.tables(c, app); err != nil {
		return 0, "error: " + err.Error()
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	feedDone := make(chan error, 1)
	go func() { feedDone <- feed(ctx, d.kc, stream, entries, d.putRate) }()

	a, err := d.startWorker(c, c+"-foA", stream, app, d.dynamoURL, false)
	if err != nil {
		return 0, "error: " + err.Error()
	}
	if c == "kcl" {
		// Each KCL worker creates its lease table at start-up if it does not exist yet
		// (checkpoint.DynamoCheckpoint.Init: DescribeTable, then CreateTable); two started at
		// once both create it and the loser exits with ResourceInUseException. So B starts once
		// A's table exists, as a second worker deployed later would.
		if err := dynamodb.NewTableExistsWaiter(d.ddb).Wait(context.Background(), &dynamodb.DescribeTableInput{TableName: aws.String(app)}, 2*time.Minute); err != nil {
			stopWorker(a)
			return 0, fmt.Sprintf("error: KCL's lease table %s: %v (log: %s.log)", app, err, a.out)
		}
	}
	b, err := d.startWorker(c, c+"-foB", stream, app, d.dynamoURL, false)
	if err != nil {
		stopWorker(a)
		return 0, "error: " + err.Error()
	}
	defer stopWorker(a)
	defer stopWorker(b)
	ch, stopTail := tails(a, b)
	defer func() {
		stopTail()
		go func() {
			for range ch { // let the tails finish
			}
		}()
	}()

	o := NewOwnership(d.shards)
	held := time.After(d.holdTimeout)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	started := time.Now()
	var victim *worker
	for victim == nil {
		select {
		case h := <-ch:
			o.Add(h)
		case <-tick.C:
			if v := o.Victim(time.Now(), 5*time.Second, a.id, b.id); v != "" {
				victim = map[string]*worker{a.id: a, b.id: b}[v]
			}
		case <-a.exited:
			return 0, fmt.Sprintf("error: worker %s exited (%v) before the kill (log: %s.log)", a.id, a.waitErr, a.out)
		case <-b.exited:
			return 0, fmt.Sprintf("error: worker %s exited (%v) before the kill (log: %s.log)", b.id, b.waitErr, b.out)
		case <-held:
			return 0, fmt.Sprintf("n/a: after %s the two workers did not both hold shards (%s)", d.holdTimeout, o)
		case err := <-feedDone:
			return 0, fmt.Sprintf("error: putting records: %v", err)
		}
	}
	survivor := a
	if victim == a {
		survivor = b
	}
	lost := o.Held(victim.id)
	d.logf("   both hold shards after %s (%s): kill -9 %s, holding %s", time.Since(started).Round(time.Second), o, victim.id, strings.Join(lost, ","))
	_ = victim.cmd.Process.Kill()
	killed := time.Now()
	<-victim.exited

	again := NewTakeover(killed, survivor.id, lost)
	deadline := time.After(d.failoverTimeout)
	for !again.Done() {
		select {
		case h := <-ch:
			again.Add(h)
		case <-survivor.exited:
			return 0, fmt.Sprintf("error: the survivor %s exited (%v) (log: %s.log)", survivor.id, survivor.waitErr, survivor.out)
		case <-deadline:
			return 0, fmt.Sprintf(">%.0f s: %s", d.failoverTimeout.Seconds(), again)
		case err := <-feedDone:
			return 0, fmt.Sprintf("error: putting records: %v", err)
		}
	}
	d.logf("   %s read again by %s: %s", strings.Join(lost, ","), survivor.id, again)
	return again.Time(), ""
}

// Ownership tracks which worker last handled records of each shard, to tell when two workers
// both hold shards and which to kill.
type Ownership struct {
	shards  int
	owner   map[string]string
	changed time.Time
}

// NewOwnership returns an Ownership over a stream of shards shards.
func NewOwnership(shards int) *Ownership {
	return &Ownership{shards: shards, owner: map[string]string{}}
}

// Add records h: its worker now reads its shard.
func (o *Ownership) Add(h Handled) {
	if o.owner[h.Shard] != h.Worker {
		o.owner[h.Shard] = h.Worker
		o.changed = h.Last
	}
}

// Held returns the shards w holds, sorted.
func (o *Ownership) Held(w string) []string {
	var s []string
	for sh, ow := range o.owner {
		if ow == w {
			s = append(s, sh)
		}
	}
	sort.Strings(s)
	return s
}

// Victim returns the worker to kill once every shard has an owner, both a and b own some and
// nothing changed for stable before now: the one holding more shards (a on a tie). "" until then.
func (o *Ownership) Victim(now time.Time, stable time.Duration, a, b string) string {
	if len(o.owner) < o.shards || now.Sub(o.changed) < stable {
		return ""
	}
	na, nb := len(o.Held(a)), len(o.Held(b))
	switch {
	case na == 0 || nb == 0:
		return ""
	case nb > na:
		return b
	}
	return a
}

func (o *Ownership) String() string {
	shards := sortedKeys(o.owner)
	parts := make([]string, len(shards))
	for i, s := range shards {
		parts[i] = s + "=" + o.owner[s]
	}
	return strings.Join(parts, " ")
}

// Takeover waits for a survivor to handle records on each of the shards a killed worker held.
type Takeover struct {
	killed   time.Time
	survivor string
	first    map[string]time.Time // shard -> first record handled by the survivor after the kill
}

// NewTakeover starts waiting for survivor on shards, from killed.
func NewTakeover(killed time.Time, survivor string, shards []string) *Takeover {
	t := &Takeover{killed: killed, survivor: survivor, first: map[string]time.Time{}}
	for _, s := range shards {
		t.first[s] = time.Time{}
	}
	return t
}

// Add records h if the survivor handled it on a waited-for shard after the kill.
func (t *Takeover) Add(h Handled) {
	f, ok := t.first[h.Shard]
	if !ok || h.Worker != t.survivor || !f.IsZero() || !h.First.After(t.killed) {
		return
	}
	t.first[h.Shard] = h.First
}

// Done tells whether every shard has been read again.
func (t *Takeover) Done() bool {
	for _, f := range t.first {
		if f.IsZero() {
			return false
		}
	}
	return true
}

// Time is the time from the kill to the last shard read again (Done must hold).
func (t *Takeover) Time() time.Duration {
	var m time.Duration
	for _, f := range t.first {
		if d := f.Sub(t.killed); d > m {
			m = d
		}
	}
	return m
}

func (t *Takeover) String() string {
	shards := sortedKeys(t.first)
	parts := make([]string, len(shards))
	again := 0
	for i, s := range shards {
		if f := t.first[s]; f.IsZero() {
			parts[i] = s + " not yet"
		} else {
			again++
			parts[i] = fmt.Sprintf("%s after %.1f s", s, f.Sub(t.killed).Seconds())
		}
	}
	return fmt.Sprintf("%d of %d shards read again (%s)", again, len(shards), strings.Join(parts, ", "))
}

// entry is one record to put: its data and partition key.
type entry struct {
	data []byte
	key  string
}

// loadEntries reads a JSON array of objects, each keyed by its "origin" field.
func loadEntries(path string) ([]entry, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("%s: want a JSON array of records: %w", path, err)
	}
	es := make([]entry, 0, len(raw))
	for i, r := range raw {
		var k struct {
			Origin string `json:"origin"`
		}
		if err := json.Unmarshal(r, &k); err != nil || k.Origin == "" {
			return nil, fmt.Errorf("%s: record %d has no string field origin", path, i)
		}
		es = append(es, entry{data: r, key: k.Origin})
	}
	if len(es) == 0 {
		return nil, errors.New(path + ": no records")
	}
	return es, nil
}

// feed puts entries (cycling) into stream at rate records/s, in a PutRecords call every
// 100 ms, until ctx ends; refused entries are not resent (the rate is what matters here).
func feed(ctx context.Context, kc *kinesis.Client, stream string, entries []entry, rate int) error {
	per := rate / 10
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		in := &kinesis.PutRecordsInput{StreamName: aws.String(stream)}
		for j := 0; j < per; j++ {
			e := entries[i%len(entries)]
			i++
			in.Records = append(in.Records, ktypes.PutRecordsRequestEntry{Data: e.data, PartitionKey: aws.String(e.key)})
		}
		if _, err := kc.PutRecords(ctx, in); err != nil && ctx.Err() == nil {
			return err
		}
	}
}

// freePort returns a TCP port nothing listens on at 127.0.0.1 right now.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func isProjhost(c string) bool { return c == "projhost" || c == noopConsumer }

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func lastLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}

func values(m map[string]float64) []float64 {
	v := make([]float64, 0, len(m))
	for _, x := range m {
		v = append(v, x)
	}
	return v
}

// median of v (0 for none; the mean of the middle two for an even count).
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func rawString(raws map[string]float64, order []string) string {
	var parts []string
	for _, c := range order {
		if v, ok := raws[c]; ok {
			parts = append(parts, fmt.Sprintf("%s's stream %s records/s", c, group(int64(v+0.5))))
		}
	}
	return strings.Join(parts, ", ")
}
