// Command projhost runs event-stream projections written as WebAssembly handlers. See
// `projhost --help`.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strings"

	kinesistypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/projhost/projhost/local"
	"github.com/projhost/projhost/registry/s3blobs"
	"github.com/projhost/projhost/source/journal"
	kinesissrc "github.com/projhost/projhost/source/kinesis"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "run" {
		catchStopSignals()
	}
	// PROJHOST_CPUPROFILE=FILE writes a Go CPU profile of the whole command (for `go tool pprof`).
	if path := os.Getenv("PROJHOST_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err == nil && pprof.StartCPUProfile(f) == nil {
			code := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr)
			pprof.StopCPUProfile()
			f.Close()
			os.Exit(code)
		}
		fmt.Fprintf(os.Stderr, "projhost: PROJHOST_CPUPROFILE=%s: cannot write the profile\n", path)
	}
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the command line args and returns the process exit code: 0, or 1 after printing
// the error to stderr as one line prefixed "projhost: ".
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	rootCmd.SetArgs(args)
	rootCmd.SetOut(stdout)
	rootCmd.SetErr(stderr)
	if err := rootCmd.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(stderr, "projhost: "+oneLine(err.Error())+hint(err))
		return 1
	}
	return 0
}

// hint is what the CLI adds to an error the library cannot phrase in terms of flags.
func hint(err error) string {
	if errors.Is(err, local.ErrBusy) || errors.Is(err, journal.ErrBusy) {
		return " | continue (kill -CONT) or stop the process holding the lock, or wait longer with --busy-timeout"
	}
	if errors.Is(err, s3blobs.ErrNoBucket) {
		return " | check --module-store s3://BUCKET[/PREFIX], --region and --s3-endpoint"
	}
	var nf *kinesistypes.ResourceNotFoundException
	if errors.Is(err, kinesissrc.ErrStreamNotFound) || errors.As(err, &nf) {
		return " | check --stream, --region and --kinesis-endpoint, or create the stream: projhost kinesis create --stream NAME --shards N"
	}
	return ""
}

// oneLine joins the lines of a multi-line error message with " | " (wazero errors, for
// example, carry a wasm stack trace), so every error is a single line on stderr, and escapes
// the control characters of the rest (a handler's failure message is guest text: escapeText).
func oneLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	out := lines[:0]
	for _, l := range lines {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return escapeText(strings.Join(out, " | "))
}
