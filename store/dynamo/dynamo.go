package dynamo

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/projhost/projhost/internal/dynamotables"
	"github.com/projhost/projhost/store"
)

// DefaultPrefix is the default table name prefix ("projhost-").
const DefaultPrefix = dynamotables.DefaultPrefix

// ErrBadPrefix is returned by Open, CreateTables and the store constructors for a table name
// prefix that cannot form DynamoDB table names: characters outside [a-zA-Z0-9_.-], or longer
// than 244 bytes (DynamoDB's 255 less the longest suffix, "deadletters").
var ErrBadPrefix = dynamotables.ErrBadPrefix

// Config says where the tables are. The zero value uses the AWS default credential and region
// chain and DefaultPrefix.
type Config struct {
	// Endpoint is the DynamoDB endpoint URL, e.g. http://127.0.0.1:8000 for DynamoDB Local
	// ("" = AWS's endpoint for the region). With an endpoint and no credentials configured,
	// static dummy credentials are used (local servers accept any).
	Endpoint string
	// Region is the AWS region ("" = from the AWS config; us-east-1 with an Endpoint).
	Region string
	// Prefix is the table name prefix ("" = DefaultPrefix); the tables are Prefix+"leases",
	// Prefix+"cursors", Prefix+"readmodel", Prefix+"deadletters" and Prefix+"modules". See
	// ErrBadPrefix.
	Prefix string
	// Client, when set, is used instead of making one from Endpoint and Region.
	Client *dynamodb.Client
}

func (c Config) client(ctx context.Context) (*dynamodb.Client, error) {
	if c.Client != nil {
		return c.Client, nil
	}
	var opts []dynamotables.ClientOption
	if c.Endpoint != "" {
		opts = append(opts, dynamotables.WithEndpoint(c.Endpoint))
	}
	if c.Region != "" {
		opts = append(opts, dynamotables.WithRegion(c.Region))
	}
	cl, err := dynamotables.NewClient(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("DynamoDB client: %w", err)
	}
	return cl, nil
}

func (c Config) prefix() string {
	if c.Prefix == "" {
		return DefaultPrefix
	}
	return c.Prefix
}

// Open returns the stores on the tables of cfg. It does not create or check the tables (the
// first request to a missing table fails with the server's ResourceNotFoundException); use
// CreateTables once. Errors: ErrBadPrefix, the AWS config cannot be loaded.
func Open(ctx context.Context, cfg Config) (*store.Stores, error) {
	c, err := cfg.client(ctx)
	if err != nil {
		return nil, err
	}
	p := cfg.prefix()
	leases, err := NewLeaseStore(c, p)
	if err != nil {
		return nil, err
	}
	cursors, err := NewCursorStore(c, p)
	if err != nil {
		return nil, err
	}
	rm, err := NewReadModel(c, p)
	if err != nil {
		return nil, err
	}
	dl, err := NewDeadLetters(c, p)
	if err != nil {
		return nil, err
	}
	reg, err := NewRegistry(c, p)
	if err != nil {
		return nil, err
	}
	return &store.Stores{Leases: leases, Cursors: cursors, ReadModel: rm, DeadLetters: dl, Registry: reg,
		Mode: store.Fenced, WriteClaimer: rm, Resetter: rm, CheckMutation: CheckMutation}, nil
}

// CreateTables creates the tables of cfg (on-demand billing) and waits until they are active;
// existing tables are kept (their key schema is checked). Bound the wait with ctx. Errors:
// ErrBadPrefix, the AWS config cannot be loaded, a table existing with another key schema,
// DynamoDB errors, ctx's error while waiting.
func CreateTables(ctx context.Context, cfg Config) error {
	c, err := cfg.client(ctx)
	if err != nil {
		return err
	}
	return dynamotables.CreateTables(ctx, c, cfg.prefix())
}

// ErrNoTables is wrapped by CheckTables when a table of cfg does not exist (create them with
// CreateTables or `projhost tables create`).
var ErrNoTables = dynamotables.ErrNoTables

// CheckTables reports whether the tables of cfg exist with the key schema projhost needs (one
// DescribeTable each): errors wrap ErrNoTables, naming the missing tables, so a wrong
// --table-prefix or endpoint is reported as such and not as the first request's
// ResourceNotFoundException.
func CheckTables(ctx context.Context, cfg Config) error {
	c, err := cfg.client(ctx)
	if err != nil {
		return err
	}
	return dynamotables.CheckTables(ctx, c, cfg.prefix())
}

// CheckTablesWithoutLeases is CheckTables for Lambda mode, which holds no leases: the leases
// table is not described (the function's role has no access to it).
func CheckTablesWithoutLeases(ctx context.Context, cfg Config) error {
	c, err := cfg.client(ctx)
	if err != nil {
		return err
	}
	return dynamotables.CheckTables(ctx, c, cfg.prefix(), dynamotables.LeasesSuffix)
}
