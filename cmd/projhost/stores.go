package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/projhost/projhost/cursorstore"
	"github.com/projhost/projhost/internal/dynamotables"
	"github.com/projhost/projhost/local"
	"github.com/projhost/projhost/readmodel"
	"github.com/projhost/projhost/shardmap"
	"github.com/projhost/projhost/source/journal"
)

// storeFlags are the flags that choose where leases, cursors and read models live.
type storeFlags struct {
	data     string
	store    string
	endpoint string
	prefix   string
	region   string
}

const defaultDataDir = "./.projhost"

func (f *storeFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.data, "data", defaultDataDir, "data directory of the local journal and embedded store")
	cmd.Flags().StringVar(&f.store, "store", "sqlite", "where leases, cursors and read models live: sqlite (embedded, in --data) or dynamodb")
	cmd.Flags().StringVar(&f.endpoint, "dynamodb-endpoint", "", "DynamoDB endpoint URL, e.g. http://127.0.0.1:8000 for DynamoDB Local (default: the AWS default chain)")
	cmd.Flags().StringVar(&f.prefix, "table-prefix", dynamotables.DefaultPrefix, "prefix of the DynamoDB table names")
	cmd.Flags().StringVar(&f.region, "region", "", "AWS region (default: from the AWS config; us-east-1 with a local endpoint)")
}

// stores are the three stores a worker uses.
type stores struct {
	Leases    shardmap.LeaseStore
	Cursors   cursorstore.Store
	ReadModel readmodel.Store
	close     func() error
}

func (s *stores) Close() error {
	if s.close == nil {
		return nil
	}
	return s.close()
}

func (f *storeFlags) open(ctx context.Context) (*stores, error) {
	switch f.store {
	case "sqlite", "embedded", "":
		if err := os.MkdirAll(f.data, 0o755); err != nil {
			return nil, fmt.Errorf("creating data directory: %w", err)
		}
		st, err := local.Open(f.data)
		if err != nil {
			return nil, fmt.Errorf("opening the embedded store in %s: %w", f.data, err)
		}
		return &stores{Leases: st.Leases(), Cursors: st.Cursors(), ReadModel: st.ReadModels(), close: st.Close}, nil
	case "dynamodb":
		return openDynamo(ctx, f)
	default:
		return nil, fmt.Errorf("unknown --store %q: use sqlite or dynamodb", f.store)
	}
}

// openExisting is open for commands that only read (query, status): with the embedded store it
// refuses to create a new, empty store where none is.
func (f *storeFlags) openExisting(ctx context.Context) (*stores, error) {
	if f.store == "sqlite" || f.store == "embedded" || f.store == "" {
		if _, err := os.Stat(filepath.Join(f.data, local.FileName)); err != nil {
			return nil, fmt.Errorf("no embedded store in %s: run a projection there first (projhost run --data %s ...)", f.data, f.data)
		}
	}
	return f.open(ctx)
}

// openJournal opens the local journal in dir with a message that tells what to do when it is missing.
func openJournal(dir string) (*journal.Journal, error) {
	if _, err := os.Stat(filepath.Join(dir, journal.FileName)); err != nil {
		return nil, fmt.Errorf("no journal in %s: create one with `projhost journal create --data %s --shards N`", dir, dir)
	}
	j, err := journal.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("opening the journal in %s: %w", dir, err)
	}
	return j, nil
}
