package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/projhost/projhost/internal/dynamotables"
	"github.com/projhost/projhost/source/journal"
	"github.com/projhost/projhost/store"
	"github.com/projhost/projhost/store/dynamo"
	"github.com/projhost/projhost/store/sqlite"
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

// stores are what a worker uses (store.Stores with a Close that tolerates nil).
type stores struct{ *store.Stores }

func (s *stores) Close() error {
	if s.Stores == nil || s.Stores.Close == nil {
		return nil
	}
	return s.Stores.Close()
}

func (f *storeFlags) open(ctx context.Context) (*stores, error) {
	switch f.store {
	case "sqlite", "embedded", "":
		st, err := sqlite.Open(f.data)
		if err != nil {
			return nil, err
		}
		return &stores{st}, nil
	case "dynamodb":
		if err := dynamo.CheckTables(ctx, f.dynamoConfig()); err != nil {
			return nil, err
		}
		st, err := dynamo.Open(ctx, f.dynamoConfig())
		if err != nil {
			return nil, err
		}
		return &stores{st}, nil
	default:
		return nil, fmt.Errorf("unknown --store %q: use sqlite or dynamodb", f.store)
	}
}

func (f *storeFlags) dynamoConfig() dynamo.Config {
	return dynamo.Config{Endpoint: f.endpoint, Region: f.region, Prefix: f.prefix}
}

// openExisting is open for commands that only read (query, status): with the embedded store it
// refuses to create a new, empty store where none is.
func (f *storeFlags) openExisting(ctx context.Context) (*stores, error) {
	if f.store == "sqlite" || f.store == "embedded" || f.store == "" {
		st, err := sqlite.OpenExisting(f.data)
		if err != nil {
			return nil, err
		}
		return &stores{st}, nil
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
