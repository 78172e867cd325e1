package main

import (
	"github.com/projhost/projhost/internal/bench"
	tuned "github.com/projhost/projhost/internal/bench/tuned/flightdelays"
	"github.com/projhost/projhost/plugins/examples/count"
	"github.com/projhost/projhost/plugins/examples/flightdelays"
	"github.com/projhost/projhost/sdk/go/guest"
)

// bench: the benchmark commands (internal/bench). The example handlers are compiled in as the
// native baselines of `bench native`, `bench handler --native` and `bench compare --native`;
// flightdelays-tuned is the hand-tuned flightdelays that `bench compare` measures the example
// against (internal/bench/tuned/flightdelays).
func init() {
	rootCmd.AddCommand(bench.Command(map[string]guest.Handler{
		"count":              count.Handler,
		"flightdelays":       flightdelays.Handler,
		"flightdelays-tuned": tuned.Handler,
	}))
}
