package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/projhost/projhost/host"
)

func init() {
	var handler, events, keyField, logLevel string
	var batchSize int
	var trusted bool
	var memLimit string
	cmd := &cobra.Command{
		Use:   "test --handler H.wasm --events FILE",
		Short: "Run a WASM handler over an events file against an in-memory read model and print the result",
		Long: `Test runs the handler over the events of FILE (a JSON array of objects or JSON lines, gzip
accepted) as one shard ("shard-0"), in batches, against an empty in-memory read model, and prints
the final read model as JSON lines ordered by collection then key:

  {"collection":"airports","key":"ORD","doc":{...}}

Each element is one event: its JSON is the event data, its --key-field the partition key, its
1-based position the sequence number. Guest log output goes to stderr. Nothing is stored.

When a batch fails (the handler's error, a trap, a bad output), test prints no read model,
names the failing batch's events (their sequence numbers) on stderr and exits 1. Unlike run, it
does not narrow a failing batch down to its event: run again with --batch-size 1 for that.

Compiled modules are cached under the user cache directory (projhost/wazero; on Linux
~/.cache/projhost/wazero), so a module's first run compiles it (about 1.5 s for a standard-Go
module) and later runs load it.`,
		Example: `  projhost test --handler build/wasm/flightdelays-go.wasm --events plugins/examples/flightdelays/data/flights-2k.json`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if handler == "" || events == "" {
				return fmt.Errorf("--handler and --events are required")
			}
			if batchSize < 1 {
				return fmt.Errorf("--batch-size must be at least 1")
			}
			memPages, err := host.ParseMemoryLimit(memLimit)
			if err != nil {
				return fmt.Errorf("--memory-limit: %w", err)
			}
			lvl := slog.LevelInfo
			if err := lvl.UnmarshalText([]byte(logLevel)); err != nil {
				return fmt.Errorf("--log-level %q: use debug, info, warn or error", logLevel)
			}
			logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
			docs, err := host.RunFile(cmd.Context(), handler, events, host.TestOptions{
				KeyField:       keyField,
				BatchSize:      batchSize,
				Trusted:        trusted,
				RuntimeOptions: []host.RuntimeOption{host.WithLogger(logger), host.WithMemoryLimitPages(memPages)},
			})
			if err != nil {
				return err
			}
			// Keys and documents are the handler's: control characters are escaped (escapeJSON)
			// so that the lines are safe on a terminal and mean the same JSON.
			w := bufio.NewWriter(cmd.OutOrStdout())
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			for _, d := range docs {
				line := struct {
					Collection string          `json:"collection"`
					Key        string          `json:"key"`
					Doc        json.RawMessage `json:"doc"`
				}{d.Collection, d.Key, d.Doc}
				buf.Reset()
				if err := enc.Encode(line); err != nil {
					return fmt.Errorf("writing %s/%s: %w", escapeText(d.Collection), escapeText(d.Key), err)
				}
				if _, err := w.Write(escapeJSON(buf.Bytes())); err != nil {
					return err
				}
			}
			return w.Flush()
		},
	}
	f := cmd.Flags()
	f.StringVar(&handler, "handler", "", "handler module (.wasm, ABI v1)")
	f.StringVar(&events, "events", "", "events file: JSON array or JSON lines, optionally gzip-compressed")
	f.StringVar(&keyField, "key-field", "origin", "top-level event field used as the partition key")
	f.IntVar(&batchSize, "batch-size", 100, "events per handler call")
	f.BoolVar(&trusted, "trusted", false, "run without the per-batch deadline (a runaway loop then runs until interrupted with SIGINT)")
	f.StringVar(&memLimit, "memory-limit", host.DefaultMemoryLimit, "cap on the handler instance's memory, in binary units, a multiple of 64KiB (e.g. 64MiB, 1GiB; at most 4GiB)")
	f.StringVar(&logLevel, "log-level", "info", "guest and host log level on stderr: debug, info, warn, error")
	rootCmd.AddCommand(cmd)
}
