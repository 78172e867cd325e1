package container_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/projhost/projhost/container"
	"github.com/projhost/projhost/host"
	"github.com/projhost/projhost/projection"
	"github.com/projhost/projhost/source/journal"
	"github.com/projhost/projhost/store/sqlite"
)

// A worker of the flightdelays projection from Go code: a local journal, the embedded store
// (store/dynamo.Open gives the DynamoDB stores the same way), the example handler, the
// dead-letter policy. Run returns once every shard is caught up.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "projhost-example-")
	defer os.RemoveAll(dir)

	j, err := journal.Create(dir, 2)
	if err != nil {
		panic(err)
	}
	defer j.Close()
	_, err = j.Append(ctx, []journal.AppendEvent{
		{PartitionKey: "ORD", Data: []byte(`{"date":"2001/01/01 00:47","delay":66,"distance":1750,"origin":"ORD","destination":"LAS"}`)},
		{PartitionKey: "ORD", Data: []byte(`{"date":"2001/01/01 01:10","delay":-4,"distance":802,"origin":"ORD","destination":"ATL"}`)},
		{PartitionKey: "ORD", Data: []byte(`{"date":"2001/01/01 01:12","delay":"late","distance":802,"origin":"ORD","destination":"ATL"}`)},
	})
	if err != nil {
		panic(err)
	}

	st, err := sqlite.Open(dir)
	if err != nil {
		panic(err)
	}
	defer st.Close()
	rt, err := host.NewRuntime(ctx, host.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		panic(err)
	}
	defer rt.Close(ctx)
	wasm, err := os.ReadFile(filepath.Join("..", "build", "wasm", "flightdelays-as.wasm")) // make wasm
	if err != nil {
		panic(err)
	}
	mod, err := rt.Load(ctx, "flightdelays", wasm)
	if err != nil {
		panic(err)
	}

	r, err := container.New(container.Config{
		Config: projection.Config{
			Projection: "flights",
			Stores:     st,
			Modules:    projection.Fixed(mod),
			Policy:     projection.Policy{OnError: projection.DeadLetter, MaxAttempts: 1},
			Logger:     slog.New(slog.DiscardHandler),
		},
		WorkerID:      "worker-1",
		Source:        j,
		UntilCaughtUp: true,
	})
	if err != nil {
		panic(err)
	}
	if err := r.Run(ctx); err != nil {
		panic(err)
	}
	doc, _, _ := st.ReadModel.Get(ctx, "flights", "airports", "ORD")
	fmt.Println(string(doc))
	fmt.Println("dead letters:", r.Stats().DeadLetters)
	// Output:
	// {"flights":2,"delayed":1,"total_delay":62,"max_delay":66}
	// dead letters: 1
}
