// Command projhost runs event-stream projections written as WebAssembly handlers. See
// `projhost --help`.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strings"
)

func main() {
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
		fmt.Fprintln(stderr, "projhost: "+oneLine(err.Error()))
		return 1
	}
	return 0
}

// oneLine joins the lines of a multi-line error message with " | " (wazero errors, for
// example, carry a wasm stack trace), so every error is a single line on stderr.
func oneLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	out := lines[:0]
	for _, l := range lines {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return strings.Join(out, " | ")
}
