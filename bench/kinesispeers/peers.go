package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	awsv2 "github.com/aws/aws-sdk-go-v2/aws"
	credsv2 "github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go/aws"
	"github.com/aws/aws-sdk-go/aws/credentials"
	"github.com/aws/aws-sdk-go/aws/session"
	"github.com/aws/aws-sdk-go/service/dynamodb"
	"github.com/aws/aws-sdk-go/service/kinesis"
	consumer "github.com/harlow/kinesis-consumer"
	"github.com/harlow/kinesis-consumer/store/ddb"
	"github.com/vmware/vmware-go-kcl-v2/clientlibrary/config"
	kcl "github.com/vmware/vmware-go-kcl-v2/clientlibrary/interfaces"
	kclworker "github.com/vmware/vmware-go-kcl-v2/clientlibrary/worker"
)

// peerFlags are the settings every peer worker takes: what the benchmark must set to reach the
// local servers, and nothing the peers' defaults would otherwise decide.
type peerFlags struct {
	stream, app, table, worker     string
	kinesisEndpoint, dynamoEndpont string
	region                         string
}

func parsePeerFlags(name string, args []string) (peerFlags, error) {
	var p peerFlags
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.StringVar(&p.stream, "stream", "", "stream name (required)")
	fs.StringVar(&p.app, "app", "kbench", "application name (KCL: also its lease table; harlow: the checkpoint namespace)")
	fs.StringVar(&p.table, "table", "", "harlow: the checkpoint table (hash key namespace, range key shard_id; created by the driver)")
	fs.StringVar(&p.worker, "worker", "", "worker id written in every output line (default kcl-PID or harlow-PID)")
	fs.StringVar(&p.kinesisEndpoint, "kinesis-endpoint", "", "Kinesis endpoint URL (required)")
	fs.StringVar(&p.dynamoEndpont, "dynamodb-endpoint", "", "DynamoDB endpoint URL (required)")
	fs.StringVar(&p.region, "region", "us-east-1", "AWS region")
	if err := fs.Parse(args); err != nil {
		return p, err
	}
	if p.stream == "" || p.kinesisEndpoint == "" || p.dynamoEndpont == "" {
		return p, fmt.Errorf("%s needs --stream, --kinesis-endpoint and --dynamodb-endpoint", name)
	}
	if name == "harlow" && p.table == "" {
		return p, fmt.Errorf("harlow needs --table (its checkpoint table)")
	}
	if p.worker == "" {
		p.worker = fmt.Sprintf("%s-%d", name, os.Getpid())
	}
	return p, nil
}

// startPeer parses a peer's flags and starts its Reporter on stdout; finish flushes it a last
// time and stops it.
func startPeer(name string, args []string) (p peerFlags, rep *Reporter, finish func(), err error) {
	if p, err = parsePeerFlags(name, args); err != nil {
		return p, nil, nil, err
	}
	rep = NewReporter(os.Stdout, p.worker)
	stop := make(chan struct{})
	flushed := make(chan struct{})
	go func() { rep.Run(stop); close(flushed) }()
	return p, rep, func() { close(stop); <-flushed }, nil
}

// runKCL is one vmware-go-kcl-v2 worker with the library's defaults (config.NewKinesisClientLibConfig*)
// except the endpoints, dummy credentials and TRIM_HORIZON as the initial position (its
// default is LATEST, which would skip the records put before it started). The record processor
// counts records and checkpoints after every ProcessRecords call with records (the pattern of
// the library's own tests; KCL never checkpoints by itself), and at a shard's end (TERMINATE),
// as KCL requires. SIGTERM/SIGINT shut the worker down (its shard consumers checkpoint-free
// REQUESTED shutdown), flush the output and exit 0.
func runKCL(args []string) error {
	p, rep, finish, err := startPeer("kcl", args)
	if err != nil {
		return err
	}
	defer finish()

	creds := credsv2.NewStaticCredentialsProvider("dummy", "dummy", "")
	cfg := config.NewKinesisClientLibConfigWithCredential(p.app, p.stream, p.region, p.worker, creds).
		WithKinesisEndpoint(p.kinesisEndpoint).
		WithDynamoDBEndpoint(p.dynamoEndpont).
		WithInitialPositionInStream(config.TRIM_HORIZON)
	w := kclworker.NewWorker(kclFactory{rep}, cfg)
	if err := w.Start(); err != nil {
		return fmt.Errorf("start KCL worker: %w", err)
	}
	waitSignal()
	w.Shutdown()
	return nil
}

type kclFactory struct{ rep *Reporter }

func (f kclFactory) CreateProcessor() kcl.IRecordProcessor { return &kclProcessor{rep: f.rep} }

type kclProcessor struct {
	rep   *Reporter
	shard string
}

func (p *kclProcessor) Initialize(in *kcl.InitializationInput) { p.shard = in.ShardId }

func (p *kclProcessor) ProcessRecords(in *kcl.ProcessRecordsInput) {
	if len(in.Records) == 0 {
		return
	}
	last := in.Records[len(in.Records)-1].SequenceNumber
	p.rep.Handle(p.shard, len(in.Records), awsv2.ToString(last))
	if err := in.Checkpointer.Checkpoint(last); err != nil {
		fmt.Fprintf(os.Stderr, "kcl: checkpoint %s: %v\n", p.shard, err)
	}
}

func (p *kclProcessor) Shutdown(in *kcl.ShutdownInput) {
	if in.ShutdownReason == kcl.TERMINATE {
		if err := in.Checkpointer.Checkpoint(nil); err != nil {
			fmt.Fprintf(os.Stderr, "kcl: checkpoint the end of %s: %v\n", p.shard, err)
		}
	}
}

// runHarlow is one harlow/kinesis-consumer consumer with its defaults (consumer.New: scan
// interval 250 ms, 10,000 records a call, the AllGroup that reads every shard of the stream)
// and its DynamoDB checkpoint store (store/ddb.New: saved every minute and at Shutdown), except
// the endpoints, dummy credentials and TRIM_HORIZON as the initial position (its default is
// LATEST). The ScanFunc counts records. SIGTERM/SIGINT cancel the scan, save the checkpoints
// (ddb Shutdown), flush the output and exit 0.
func runHarlow(args []string) error {
	p, rep, finish, err := startPeer("harlow", args)
	if err != nil {
		return err
	}
	defer finish()

	creds := credentials.NewStaticCredentials("dummy", "dummy", "")
	ksess, err := session.NewSession(aws.NewConfig().WithEndpoint(p.kinesisEndpoint).WithRegion(p.region).WithCredentials(creds))
	if err != nil {
		return err
	}
	dsess, err := session.NewSession(aws.NewConfig().WithEndpoint(p.dynamoEndpont).WithRegion(p.region).WithCredentials(creds))
	if err != nil {
		return err
	}
	store, err := ddb.New(p.app, p.table, ddb.WithDynamoClient(dynamodb.New(dsess)))
	if err != nil {
		return fmt.Errorf("harlow ddb store: %w", err)
	}
	c, err := consumer.New(p.stream,
		consumer.WithClient(kinesis.New(ksess)),
		consumer.WithStore(store),
		consumer.WithShardIteratorType(kinesis.ShardIteratorTypeTrimHorizon))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { waitSignal(); cancel() }()
	scanErr := c.Scan(ctx, func(r *consumer.Record) error {
		rep.Handle(r.ShardID, 1, aws.StringValue(r.SequenceNumber))
		return nil
	})
	if err := store.Shutdown(); err != nil {
		fmt.Fprintf(os.Stderr, "harlow: save checkpoints: %v\n", err)
	}
	if scanErr != nil && ctx.Err() == nil {
		return fmt.Errorf("harlow scan: %w", scanErr)
	}
	return nil
}

// waitSignal returns at the first SIGTERM or SIGINT.
func waitSignal() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT)
	<-ch
	signal.Stop(ch)
}
