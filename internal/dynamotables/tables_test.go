package dynamotables_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/projhost/projhost/internal/dynamotables"
	"github.com/projhost/projhost/internal/dynamotest"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

// uniquePrefix returns a table prefix no other run uses (the server may be shared).
func uniquePrefix(t *testing.T, name string) string {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return name + "-" + hex.EncodeToString(b[:]) + "-"
}

func TestNamesFor(t *testing.T) {
	tests := []struct {
		prefix string
		want   dynamotables.Names
		bad    bool
	}{
		{prefix: "projhost-", want: dynamotables.Names{Leases: "projhost-leases", Cursors: "projhost-cursors",
			ReadModel: "projhost-readmodel", DeadLetters: "projhost-deadletters", Modules: "projhost-modules"}},
		{prefix: "", want: dynamotables.Names{Leases: "leases", Cursors: "cursors", ReadModel: "readmodel", DeadLetters: "deadletters",
			Modules: "modules"}},
		{prefix: "a.b_C-1.", want: dynamotables.Names{Leases: "a.b_C-1.leases", Cursors: "a.b_C-1.cursors",
			ReadModel: "a.b_C-1.readmodel", DeadLetters: "a.b_C-1.deadletters", Modules: "a.b_C-1.modules"}},
		{prefix: strings.Repeat("x", 244), want: dynamotables.Names{Leases: strings.Repeat("x", 244) + "leases",
			Cursors: strings.Repeat("x", 244) + "cursors", ReadModel: strings.Repeat("x", 244) + "readmodel",
			DeadLetters: strings.Repeat("x", 244) + "deadletters", Modules: strings.Repeat("x", 244) + "modules"}},
		{prefix: strings.Repeat("x", 245), bad: true}, // "deadletters" would make 256 characters
		{prefix: "has space", bad: true},
		{prefix: "slash/", bad: true},
	}
	for _, tt := range tests {
		got, err := dynamotables.NamesFor(tt.prefix)
		if tt.bad {
			if !errors.Is(err, dynamotables.ErrBadPrefix) {
				t.Errorf("NamesFor(%q) error = %v, want ErrBadPrefix", tt.prefix, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("NamesFor(%q) = %+v, %v; want %+v", tt.prefix, got, err, tt.want)
		}
	}
}

func TestDefinitions(t *testing.T) {
	defs, err := dynamotables.Definitions("x-")
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ name, pk, sk string }{{"x-leases", "projection", "shard"}, {"x-cursors", "projection", "shard"},
		{"x-readmodel", "pk", "sk"}, {"x-deadletters", "projection", "sk"}, {"x-modules", "projection", "sk"}}
	if len(defs) != len(want) {
		t.Fatalf("%d definitions, want %d", len(defs), len(want))
	}
	for i, w := range want {
		d := defs[i]
		if *d.TableName != w.name || d.BillingMode != types.BillingModePayPerRequest ||
			*d.KeySchema[0].AttributeName != w.pk || d.KeySchema[0].KeyType != types.KeyTypeHash ||
			*d.KeySchema[1].AttributeName != w.sk || d.KeySchema[1].KeyType != types.KeyTypeRange {
			t.Errorf("definition %d = %+v, want %+v on-demand", i, d, w)
		}
	}
}

func TestCreateTablesIdempotent(t *testing.T) {
	c := dynamotest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	prefix := uniquePrefix(t, "idem")
	t.Cleanup(func() { _ = dynamotables.DeleteTables(context.Background(), c, prefix) })
	for i := range 2 {
		if err := dynamotables.CreateTables(ctx, c, prefix); err != nil {
			t.Fatalf("CreateTables #%d: %v", i+1, err)
		}
	}
	for _, suffix := range []string{"leases", "cursors", "readmodel", "deadletters", "modules"} {
		out, err := c.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(prefix + suffix)})
		if err != nil {
			t.Fatal(err)
		}
		if out.Table.TableStatus != types.TableStatusActive {
			t.Fatalf("%s: status %s, want ACTIVE", suffix, out.Table.TableStatus)
		}
	}
	if err := dynamotables.DeleteTables(ctx, c, prefix); err != nil {
		t.Fatal(err)
	}
	if err := dynamotables.DeleteTables(ctx, c, prefix); err != nil {
		t.Fatalf("DeleteTables of missing tables: %v", err)
	}
}

func TestCreateTablesWrongSchema(t *testing.T) {
	c := dynamotest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	prefix := uniquePrefix(t, "wrongschema")
	t.Cleanup(func() { _ = dynamotables.DeleteTables(context.Background(), c, prefix) })
	_, err := c.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(prefix + "cursors"),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
	})
	if err != nil {
		t.Fatal(err)
	}
	err = dynamotables.CreateTables(ctx, c, prefix)
	if err == nil || !strings.Contains(err.Error(), "key schema") {
		t.Fatalf("CreateTables over a table with another key schema: err = %v, want a key schema error", err)
	}
}

func TestNewClientLocalDefaults(t *testing.T) {
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/none")
	ep := dynamotest.Endpoint(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := dynamotables.NewClient(ctx, dynamotables.WithEndpoint(ep))
	if err != nil {
		t.Fatal(err)
	}
	o := c.Options()
	if o.Region != dynamotables.LocalRegion {
		t.Errorf("region %q, want %q", o.Region, dynamotables.LocalRegion)
	}
	if aws.ToString(o.BaseEndpoint) != ep {
		t.Errorf("endpoint %q, want %q", aws.ToString(o.BaseEndpoint), ep)
	}
	if got := o.Retryer.MaxAttempts(); got != dynamotables.DefaultMaxAttempts {
		t.Errorf("max attempts %d, want %d", got, dynamotables.DefaultMaxAttempts)
	}
	creds, err := o.Credentials.Retrieve(ctx)
	if err != nil || creds.AccessKeyID != "local" {
		t.Errorf("credentials %+v, %v; want the static dummy ones", creds, err)
	}
	// The client works against the local server.
	if _, err := c.ListTables(ctx, &dynamodb.ListTablesInput{}); err != nil {
		t.Fatalf("ListTables: %v", err)
	}
	// Explicit settings win.
	c, err = dynamotables.NewClient(ctx, dynamotables.WithEndpoint(ep), dynamotables.WithRegion("eu-west-1"),
		dynamotables.WithStaticCredentials("AK", "SK"), dynamotables.WithMaxAttempts(4))
	if err != nil {
		t.Fatal(err)
	}
	o = c.Options()
	creds, _ = o.Credentials.Retrieve(ctx)
	if o.Region != "eu-west-1" || creds.AccessKeyID != "AK" || o.Retryer.MaxAttempts() != 4 {
		t.Errorf("explicit options not applied: region %q key %q attempts %d", o.Region, creds.AccessKeyID, o.Retryer.MaxAttempts())
	}
}

func TestCheckTables(t *testing.T) {
	c := dynamotest.Client(t)
	ctx := context.Background()
	err := dynamotables.CheckTables(ctx, c, "never-created-")
	if !errors.Is(err, dynamotables.ErrNoTables) || !strings.Contains(err.Error(), "never-created-leases") {
		t.Fatalf("CheckTables of missing tables = %v, want ErrNoTables naming them", err)
	}
	err = dynamotables.CheckTables(ctx, c, "never-created-", dynamotables.LeasesSuffix)
	if !errors.Is(err, dynamotables.ErrNoTables) || strings.Contains(err.Error(), "never-created-leases") ||
		!strings.Contains(err.Error(), "never-created-cursors, never-created-readmodel, never-created-deadletters, never-created-modules") {
		t.Fatalf("CheckTables of missing tables but the leases = %v, want ErrNoTables naming the four others", err)
	}
	_, prefix := dynamotest.Tables(t)
	if err := dynamotables.CheckTables(ctx, c, prefix); err != nil {
		t.Fatalf("CheckTables of created tables = %v", err)
	}
}
