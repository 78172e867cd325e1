// Package dynamotables is the one definition of projhost's DynamoDB tables (names, key schemas,
// billing) and the DynamoDB client setup shared by the stores of store/dynamo,
// internal/dynamotest, the `tables create` command and the SAM template.
//
// Tables (names are prefix + fixed suffix, e.g. "projhost-leases"); every key attribute is a
// string, billing is PAY_PER_REQUEST, there are no secondary indexes:
//
//	prefix+"leases"     HASH "projection"  RANGE "shard"  one item per (projection, shard) lease
//	prefix+"cursors"    HASH "projection"  RANGE "shard"  one item per (projection, shard) cursor
//	prefix+"readmodel"  HASH "pk"          RANGE "sk"     documents, tombstones, fences
//	prefix+"deadletters" HASH "projection" RANGE "sk"     dead letters and their data chunks
//	prefix+"modules"    HASH "projection"  RANGE "sk"     module registry: versions and the active pointer
//
// store/dynamo's package documentation describes the items of each table.
package dynamotables

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// DefaultPrefix is the table name prefix used when none is configured.
const DefaultPrefix = "projhost-"

// Table name suffixes.
const (
	LeasesSuffix    = "leases"
	CursorsSuffix   = "cursors"
	ReadModelSuffix = "readmodel"
	ModulesSuffix   = "modules"
	// DeadLettersSuffix is the longest suffix: it bounds the prefix (see NamesFor).
	DeadLettersSuffix = "deadletters"
)

// Key attribute names.
const (
	LeasesPK      = "projection" // S: projection name
	LeasesSK      = "shard"      // S: shard id
	CursorsPK     = "projection" // S: projection name
	CursorsSK     = "shard"      // S: shard id
	ReadModelPK   = "pk"         // S: projection + "#" + collection (see store/dynamo)
	ReadModelSK   = "sk"         // S: document key
	DeadLettersPK = "projection" // S: projection name
	DeadLettersSK = "sk"         // S: shard id + "#" + padded sequence number (see store/dynamo)
	ModulesPK     = "projection" // S: projection name
	ModulesSK     = "sk"         // S: "v#" + padded version number, or "active" (see store/dynamo)
)

// ErrBadPrefix is returned for a prefix that cannot form valid DynamoDB table names.
var ErrBadPrefix = errors.New("dynamotables: invalid table name prefix")

// Names holds the full table names for one prefix.
type Names struct {
	Leases, Cursors, ReadModel, DeadLetters, Modules string
}

// all returns the table names in the order of Definitions.
func (n Names) all() []string {
	return []string{n.Leases, n.Cursors, n.ReadModel, n.DeadLetters, n.Modules}
}

// tableName is DynamoDB's rule for table names: 3..255 characters of [a-zA-Z0-9_.-]
// (Amazon DynamoDB Developer Guide, "Service, account, and table quotas").
var tableName = regexp.MustCompile(`^[a-zA-Z0-9_.-]{3,255}$`)

// NamesFor returns the table names for prefix ("" is allowed and yields "leases", ...).
// ErrBadPrefix when prefix has characters outside [a-zA-Z0-9_.-] or is longer than 244 bytes
// (255, DynamoDB's limit, minus the longest suffix).
func NamesFor(prefix string) (Names, error) {
	n := Names{
		Leases:      prefix + LeasesSuffix,
		Cursors:     prefix + CursorsSuffix,
		ReadModel:   prefix + ReadModelSuffix,
		DeadLetters: prefix + DeadLettersSuffix,
		Modules:     prefix + ModulesSuffix,
	}
	for _, t := range n.all() {
		if !tableName.MatchString(t) {
			return Names{}, fmt.Errorf("%w %q: use 0..%d characters of [a-zA-Z0-9_.-]", ErrBadPrefix, prefix, 255-len(DeadLettersSuffix))
		}
	}
	return n, nil
}

// Definitions returns the CreateTable inputs of the five tables for prefix, in the order
// leases, cursors, read model, dead letters, modules. Callers may render them (e.g. into a SAM template) or pass them
// to CreateTable.
func Definitions(prefix string) ([]*dynamodb.CreateTableInput, error) {
	n, err := NamesFor(prefix)
	if err != nil {
		return nil, err
	}
	return []*dynamodb.CreateTableInput{
		definition(n.Leases, LeasesPK, LeasesSK),
		definition(n.Cursors, CursorsPK, CursorsSK),
		definition(n.ReadModel, ReadModelPK, ReadModelSK),
		definition(n.DeadLetters, DeadLettersPK, DeadLettersSK),
		definition(n.Modules, ModulesPK, ModulesSK),
	}, nil
}

func definition(name, pk, sk string) *dynamodb.CreateTableInput {
	return &dynamodb.CreateTableInput{
		TableName:   aws.String(name),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(pk), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(sk), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(pk), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(sk), KeyType: types.KeyTypeRange},
		},
	}
}

// TableAPI is the part of the DynamoDB client that CreateTables and DeleteTables use.
type TableAPI interface {
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	DeleteTable(ctx context.Context, in *dynamodb.DeleteTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteTableOutput, error)
}

// pollDelays are the DescribeTable polling intervals: short first (local servers create tables
// at once), then every 2 s (AWS takes seconds). The SDK waiters' 10 s minimum delay is too slow
// for tests, hence the own polling.
var pollDelays = []time.Duration{20 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond,
	250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second}

// CreateTables creates the five tables of prefix and waits until each is ACTIVE. It is
// idempotent: tables that already exist are left as they are (their key schema is checked).
// Bound the wait with ctx. Errors: ErrBadPrefix; a table existing with another key schema; any
// DynamoDB error (wrapped); ctx's error while waiting.
func CreateTables(ctx context.Context, client TableAPI, prefix string) error {
	defs, err := Definitions(prefix)
	if err != nil {
		return err
	}
	for _, d := range defs {
		if _, err := client.CreateTable(ctx, d); err != nil {
			var inUse *types.ResourceInUseException
			if !errors.As(err, &inUse) {
				return fmt.Errorf("dynamotables: create table %s: %w", *d.TableName, err)
			}
		}
	}
	for _, d := range defs {
		if err := waitActive(ctx, client, d); err != nil {
			return err
		}
	}
	return nil
}

func waitActive(ctx context.Context, client TableAPI, d *dynamodb.CreateTableInput) error {
	for i := 0; ; i++ {
		out, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: d.TableName})
		if err != nil {
			var nf *types.ResourceNotFoundException
			if !errors.As(err, &nf) { // just created tables may not be visible yet
				return fmt.Errorf("dynamotables: describe table %s: %w", *d.TableName, err)
			}
		} else {
			if err := sameKeys(out.Table, d); err != nil {
				return err
			}
			if out.Table.TableStatus == types.TableStatusActive {
				return nil
			}
		}
		t := time.NewTimer(pollDelays[min(i, len(pollDelays)-1)])
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("dynamotables: waiting for table %s to become ACTIVE: %w", *d.TableName, ctx.Err())
		case <-t.C:
		}
	}
}

func sameKeys(t *types.TableDescription, d *dynamodb.CreateTableInput) error {
	if t == nil {
		return fmt.Errorf("dynamotables: table %s: DescribeTable returned no description", *d.TableName)
	}
	want := fmt.Sprint(keyString(d.KeySchema))
	got := fmt.Sprint(keyString(t.KeySchema))
	if want != got {
		return fmt.Errorf("dynamotables: table %s exists with key schema %s, projhost needs %s: use another table prefix or delete the table",
			*d.TableName, got, want)
	}
	return nil
}

func keyString(ks []types.KeySchemaElement) []string {
	s := make([]string, 0, len(ks))
	for _, k := range ks {
		s = append(s, aws.ToString(k.AttributeName)+":"+string(k.KeyType))
	}
	return s
}

// DeleteTables deletes the five tables of prefix; missing tables are not an error. It does not
// wait for the deletion to finish.
func DeleteTables(ctx context.Context, client TableAPI, prefix string) error {
	n, err := NamesFor(prefix)
	if err != nil {
		return err
	}
	var errs []error
	for _, t := range n.all() {
		if _, err := client.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(t)}); err != nil {
			var nf *types.ResourceNotFoundException
			if !errors.As(err, &nf) {
				errs = append(errs, fmt.Errorf("dynamotables: delete table %s: %w", t, err))
			}
		}
	}
	return errors.Join(errs...)
}

// ErrNoTables is wrapped by CheckTables' error when a table of the prefix does not exist.
var ErrNoTables = errors.New("dynamotables: projhost's DynamoDB tables do not exist: create them once with `projhost tables create` (the same --dynamodb-endpoint, --region and --table-prefix)")

// Describer is the part of the DynamoDB client CheckTables uses.
type Describer interface {
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
}

// CheckTables reports whether the five tables of prefix, but those of the suffixes in skip,
// exist with projhost's key schema (one DescribeTable each). Errors: ErrBadPrefix; ErrNoTables
// (wrapped, naming the missing tables); a table with another key schema; any other DynamoDB
// error (wrapped).
func CheckTables(ctx context.Context, client Describer, prefix string, skip ...string) error {
	defs, err := Definitions(prefix)
	if err != nil {
		return err
	}
	var missing []string
	for _, d := range defs {
		if slices.ContainsFunc(skip, func(suffix string) bool { return *d.TableName == prefix+suffix }) {
			continue
		}
		out, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: d.TableName})
		var nf *types.ResourceNotFoundException
		switch {
		case errors.As(err, &nf):
			missing = append(missing, *d.TableName)
		case err != nil:
			return fmt.Errorf("dynamotables: describe table %s: %w", *d.TableName, err)
		default:
			if err := sameKeys(out.Table, d); err != nil {
				return err
			}
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w (missing: %s)", ErrNoTables, strings.Join(missing, ", "))
	}
	return nil
}
