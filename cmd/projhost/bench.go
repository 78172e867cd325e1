package main

import (
	"github.com/projhost/projhost/internal/bench"
	"github.com/projhost/projhost/plugins/examples/count"
	"github.com/projhost/projhost/plugins/examples/flightdelays"
	"github.com/projhost/projhost/wasmabi/guest"
)

// bench: the benchmark commands (internal/bench). The example handlers are compiled in as the
// native baselines of `bench native` and `bench handler --native`.
func init() {
	rootCmd.AddCommand(bench.Command(map[string]guest.Handler{
		"count":        count.Handler,
		"flightdelays": flightdelays.Handler,
	}))
}
