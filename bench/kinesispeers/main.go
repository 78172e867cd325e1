// Command kinesispeers compares projhost's Kinesis source with the Go Kinesis consumers users
// pick today, github.com/vmware/vmware-go-kcl-v2 v1.0.0 and github.com/harlow/kinesis-consumer
// v0.3.5, on one kinesis-local and one DynamoDB stand-in (README, "Kinesis consumers side by
// side"). It is a module of its own so that the peers stay out of projhost's go.mod.
//
//	kinesispeers run [flags]     the driver: both phases for every consumer, then one table
//	kinesispeers kcl [flags]     one vmware-go-kcl-v2 worker (used by run)
//	kinesispeers harlow [flags]  one harlow/kinesis-consumer worker (used by run)
//
// kcl and harlow write the records they handle as JSON lines on stdout (Line) and their logs on
// stderr; SIGTERM stops them gracefully.
package main

import (
	_ "aaa.kbench/protoconflict" // first: see its doc

	"errors"
	"flag"
	"fmt"
	"os"
)

const usage = `usage: kinesispeers run|kcl|harlow [flags]   (kinesispeers CMD -h for the flags)
  run     the benchmark driver (make bench-kinesis): table of records/s, CPU s per 100k records,
          DynamoDB writes per 100 records and failover after kill -9, for projhost, kcl, harlow
  kcl     one github.com/vmware/vmware-go-kcl-v2 v1.0.0 worker with its default settings
  harlow  one github.com/harlow/kinesis-consumer v0.3.5 consumer with its default settings
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "run":
		err = runDriver(os.Args[2:])
	case "kcl":
		err = runKCL(os.Args[2:])
	case "harlow":
		err = runHarlow(os.Args[2:])
	case "-h", "--help", "help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "unknown command %q\n%s", os.Args[1], usage)
		os.Exit(2)
	}
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "kinesispeers %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}
