package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/projhost/projhost/internal/dynamotables"
	"github.com/projhost/projhost/local"
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
	busy     time.Duration
}

const defaultDataDir = "./.projhost"

func (f *storeFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.data, "data", defaultDataDir, "data directory of the local journal and embedded store")
	cmd.Flags().StringVar(&f.store, "store", "sqlite", "where leases, cursors and read models live: sqlite (embedded, in --data) or dynamodb")
	cmd.Flags().StringVar(&f.endpoint, "dynamodb-endpoint", "", "DynamoDB endpoint URL, e.g. http://127.0.0.1:8000 for DynamoDB Local (default: the AWS default chain)")
	cmd.Flags().StringVar(&f.prefix, "table-prefix", dynamotables.DefaultPrefix, "prefix of the DynamoDB table names")
	cmd.Flags().StringVar(&f.region, "region", "", "AWS region (default: from the AWS config; us-east-1 with a local endpoint)")
	busyFlag(cmd, &f.busy)
}

// args are the store flags as a command line would repeat them (shell-quoted where needed),
// for hints that name another command: "--data DIR", or "--store dynamodb --table-prefix P"
// with the region and endpoint when given.
func (f *storeFlags) args() string {
	if f.embedded() {
		return "--data " + shellQuote(f.data)
	}
	a := "--store dynamodb --table-prefix " + shellQuote(f.prefix)
	if f.region != "" {
		a += " --region " + shellQuote(f.region)
	}
	if f.endpoint != "" {
		a += " --dynamodb-endpoint " + shellQuote(f.endpoint)
	}
	return a
}

// shellQuote returns s as one POSIX shell word: as it is when it holds only safe characters,
// else single-quoted.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=@+,", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// busyFlag registers --busy-timeout, which every command opening the embedded store or the
// journal takes.
func busyFlag(cmd *cobra.Command, d *time.Duration) {
	cmd.Flags().DurationVar(d, "busy-timeout", local.DefaultBusyTimeout,
		fmt.Sprintf("embedded store and journal: how long a write waits for another process's lock of a file before failing, 1ms to %s (a worker paused inside a write holds the lock)", local.MaxBusyTimeout))
}

// checkBusy checks --busy-timeout with local.ValidateBusyTimeout, which local.Open and
// journal.Open apply to the same value.
func checkBusy(d time.Duration) error {
	if err := local.ValidateBusyTimeout(d); err != nil {
		return fmt.Errorf("--busy-timeout: %w", err)
	}
	return nil
}

// localOptions are the embedded store's options from the flags.
func (f *storeFlags) localOptions() ([]local.Option, error) {
	if err := checkBusy(f.busy); err != nil {
		return nil, err
	}
	return []local.Option{local.WithBusyTimeout(f.busy)}, nil
}

// journalOptions are the local journal's options from --busy-timeout.
func journalOptions(busy time.Duration) ([]journal.Option, error) {
	if err := checkBusy(busy); err != nil {
		return nil, err
	}
	return []journal.Option{journal.WithBusyTimeout(busy)}, nil
}

// journalOptions are the local journal's options from the flags (the store's busy timeout).
func (f *storeFlags) journalOptions() ([]journal.Option, error) { return journalOptions(f.busy) }

func (f *storeFlags) embedded() bool {
	return f.store == "sqlite" || f.store == "embedded" || f.store == ""
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
	if f.embedded() {
		return f.openEmbedded(sqlite.Open)
	}
	switch f.store {
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

// openEmbedded opens the embedded store in --data with open (one of store/sqlite's openers).
func (f *storeFlags) openEmbedded(open func(string, ...local.Option) (*store.Stores, error)) (*stores, error) {
	opts, err := f.localOptions()
	if err != nil {
		return nil, err
	}
	st, err := open(f.data, opts...)
	if err != nil {
		return nil, err
	}
	return &stores{st}, nil
}

// openExisting is open for commands that change an existing store (resume, deadletters
// replay|drop): with the embedded store it refuses to create a new, empty store where none is.
func (f *storeFlags) openExisting(ctx context.Context) (*stores, error) {
	if f.embedded() {
		return f.openEmbedded(sqlite.OpenExisting)
	}
	return f.open(ctx)
}

// openReadOnly is open for commands that only read (status, query, deadletters list|show):
// the embedded store is opened read-only (no write lock: they answer while a paused worker
// holds it, and work in a read-only directory), and never created.
func (f *storeFlags) openReadOnly(ctx context.Context) (*stores, error) {
	if f.embedded() {
		return f.openEmbedded(sqlite.OpenReadOnly)
	}
	return f.open(ctx)
}

// openJournal opens the local journal in dir with a message that tells what to do when it is
// missing; open is journal.Open or journal.OpenReadOnly.
func openJournal(dir string, open func(string, ...journal.Option) (*journal.Journal, error), opts ...journal.Option) (*journal.Journal, error) {
	if _, err := os.Stat(filepath.Join(dir, journal.FileName)); err != nil {
		return nil, fmt.Errorf("no journal in %s: create one with `projhost journal create --data %s --shards N`", dir, dir)
	}
	j, err := open(dir, opts...)
	if err != nil {
		return nil, fmt.Errorf("opening the journal in %s: %w", dir, err)
	}
	return j, nil
}
