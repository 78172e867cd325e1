package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

// rootCmd is the projhost command. Each subcommand lives in its own file cmd/projhost/<name>.go
// and registers itself from an init function with rootCmd.AddCommand.
var rootCmd = &cobra.Command{
	Use:   "projhost",
	Short: "Run event-stream projections written as WebAssembly handlers",
	Long: `projhost runs projection handlers compiled to WebAssembly (ABI v1, see wasmabi/ABI.md) over
sharded event streams (Amazon Kinesis or a local journal) and keeps their read models (embedded
SQLite or DynamoDB), with leases, batched cursors and fenced writes.

Try a handler on a file of events (after "make wasm" in the repository):

  projhost test --handler build/wasm/flightdelays-go.wasm --events plugins/examples/flightdelays/data/flights-2k.json`,
	// main prints errors itself, on one line, and cobra must not print usage on runtime errors.
	SilenceUsage:  true,
	SilenceErrors: true,
}

func init() {
	rootCmd.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return fmt.Errorf("%w (see %s --help)", err, cmd.CommandPath())
	})
}
