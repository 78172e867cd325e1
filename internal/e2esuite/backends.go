package e2esuite

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	_ "modernc.org/sqlite" // database/sql driver "sqlite", as local/ uses

	"github.com/projhost/projhost/cursorstore"
	"github.com/projhost/projhost/internal/dynamotables"
	"github.com/projhost/projhost/store"
	"github.com/projhost/projhost/store/dynamo"
	"github.com/projhost/projhost/store/sqlite"
)

// Embedded is the embedded SQLite store in the journal's data directory (--store sqlite).
func Embedded() Backend {
	return Backend{
		Name:      "embedded",
		Features:  Features{ClockSkew: true},
		InDataDir: true,
		NewStore:  func(t *testing.T, dir string, _ func(args ...string) string) Store { return &embedded{dir: dir} },
	}
}

type embedded struct{ dir string }

func (s *embedded) Flags() []string { return []string{"--store", "sqlite"} }

func (s *embedded) ModuleFlags() []string { return nil }

func (s *embedded) Open(t *testing.T) *store.Stores {
	t.Helper()
	st, err := sqlite.Open(s.dir)
	if err != nil {
		t.Fatalf("opening the embedded store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func (s *embedded) Cursors(_ *testing.T, st *store.Stores, projection string, shards []string) (map[string]cursorstore.Cursor, error) {
	out := map[string]cursorstore.Cursor{}
	for _, id := range shards {
		c, err := st.Cursors.Get(context.Background(), projection, id)
		if err != nil {
			return nil, err
		}
		out[id] = c
	}
	return out, nil
}

// LeaseFields are the columns of the leases table.
func (s *embedded) LeaseFields(t *testing.T, _ string) []string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(s.dir, sqlite.FileName)+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT name FROM pragma_table_info('leases')`)
	if err != nil {
		t.Fatalf("reading the leases table's columns: %v", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// DynamoDB is DynamoDB at endpoint (--store dynamodb), fresh tables per case made with
// `projhost tables create` and deleted afterwards. It is reached over TCP: ProxyFaults.
func DynamoDB(endpoint string) Backend {
	return Backend{
		Name:     "dynamodb",
		Features: Features{ProxyFaults: true, ClockSkew: true},
		NewStore: func(t *testing.T, _ string, projhost func(args ...string) string) Store {
			t.Helper()
			var b [4]byte
			_, _ = rand.Read(b[:])
			prefix := "e2e" + hex.EncodeToString(b[:]) + "-"
			out := projhost("tables", "create", "--dynamodb-endpoint", endpoint, "--table-prefix", prefix)
			names, err := dynamotables.NamesFor(prefix)
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range []string{names.Leases, names.Cursors, names.ReadModel, names.DeadLetters, names.Modules} {
				if !strings.Contains(out, n) {
					t.Fatalf("tables create did not report table %s: %q", n, out)
				}
			}
			c, err := dynamotables.NewClient(context.Background(), dynamotables.WithEndpoint(endpoint))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				if err := dynamotables.DeleteTables(ctx, c, prefix); err != nil {
					t.Logf("deleting tables %s*: %v", prefix, err)
				}
			})
			return &dynamoStore{endpoint: endpoint, prefix: prefix, names: names, client: c, modules: t.TempDir()}
		},
	}
}

type dynamoStore struct {
	endpoint, prefix string
	modules          string // --module-store: a directory of the case's
	names            dynamotables.Names
	client           *dynamodb.Client
}

func (s *dynamoStore) Flags() []string { return s.FlagsVia(strings.TrimPrefix(s.endpoint, "http://")) }

func (s *dynamoStore) FlagsVia(addr string) []string {
	return []string{"--store", "dynamodb", "--dynamodb-endpoint", "http://" + addr, "--table-prefix", s.prefix}
}

func (s *dynamoStore) ModuleFlags() []string { return []string{"--module-store", s.modules} }

func (s *dynamoStore) Target() string { return strings.TrimPrefix(s.endpoint, "http://") }

func (s *dynamoStore) Open(t *testing.T) *store.Stores {
	t.Helper()
	st, err := dynamo.Open(context.Background(), dynamo.Config{Client: s.client, Prefix: s.prefix})
	if err != nil {
		t.Fatalf("opening the DynamoDB stores: %v", err)
	}
	if st.Close != nil {
		t.Cleanup(func() { st.Close() })
	}
	return st
}

// Cursors reads every cursor of projection with one strongly consistent Query.
func (s *dynamoStore) Cursors(_ *testing.T, _ *store.Stores, projection string, _ []string) (map[string]cursorstore.Cursor, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out := map[string]cursorstore.Cursor{}
	p := dynamodb.NewQueryPaginator(s.client, &dynamodb.QueryInput{
		TableName:                 aws.String(s.names.Cursors),
		KeyConditionExpression:    aws.String("#p = :p"),
		ExpressionAttributeNames:  map[string]string{"#p": dynamotables.CursorsPK},
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: projection}},
		ConsistentRead:            aws.Bool(true),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, it := range page.Items {
			var c cursorstore.Cursor
			if v, ok := it[dynamotables.CursorsSK].(*types.AttributeValueMemberS); ok {
				c.ShardID = v.Value
			}
			if v, ok := it["seq"].(*types.AttributeValueMemberS); ok {
				c.Seq = v.Value
			}
			if v, ok := it["epoch"].(*types.AttributeValueMemberN); ok {
				c.Epoch, _ = strconv.ParseInt(v.Value, 10, 64)
			}
			out[c.ShardID] = c
		}
	}
	return out, nil
}

// LeaseFields are the attributes of every lease item.
func (s *dynamoStore) LeaseFields(t *testing.T, _ string) []string {
	t.Helper()
	out, err := s.client.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(s.names.Leases), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatalf("scanning the lease table: %v", err)
	}
	if len(out.Items) == 0 {
		t.Fatal("no lease items")
	}
	seen := map[string]bool{}
	var fields []string
	for _, it := range out.Items {
		for a := range it {
			if !seen[a] {
				seen[a] = true
				fields = append(fields, a)
			}
		}
	}
	return fields
}

func (s *dynamoStore) IsWrite(kind WriteKind, chunk []byte) bool {
	table, update := s.names.ReadModel, "#d = :d" // an item write (readmodel/dynamo: SET #m = :m, #e = :e, #d = :d)
	if kind == CursorSave {
		table, update = s.names.Cursors, "#sp = :sp" // cursorstore/dynamo Save
	}
	return bytes.Contains(chunk, []byte(`"TableName":"`+table+`"`)) && bytes.Contains(chunk, []byte(update))
}

// CheckRejected reads the item the frozen UpdateItem targets and requires its epoch attribute
// to be newer than the request's :e.
func (s *dynamoStore) CheckRejected(t *testing.T, request []byte) {
	t.Helper()
	body := request[bytes.IndexByte(request, '{'):]
	var req struct {
		TableName string
		Key       map[string]map[string]string
		Names     map[string]string          `json:"ExpressionAttributeNames"`
		Values    map[string]json.RawMessage `json:"ExpressionAttributeValues"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatalf("the frozen request is not one JSON body: %v: %s", err, body)
	}
	key := map[string]types.AttributeValue{}
	for k, v := range req.Key {
		key[k] = &types.AttributeValueMemberS{Value: v["S"]}
	}
	item, err := s.client.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(req.TableName), Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	var e struct{ N string }
	if err := json.Unmarshal(req.Values[":e"], &e); err != nil {
		t.Fatalf("the frozen request has no epoch :e: %s", body)
	}
	frozen, _ := strconv.ParseInt(e.N, 10, 64)
	stored, ok := item.Item[req.Names["#e"]].(*types.AttributeValueMemberN)
	if !ok {
		t.Fatalf("item %v of %s has no %s", req.Key, req.TableName, req.Names["#e"])
	}
	got, _ := strconv.ParseInt(stored.Value, 10, 64)
	if frozen <= 0 || got <= frozen {
		t.Fatalf("the late write of epoch %d to %v landed: the item has epoch %d", frozen, req.Key, got)
	}
	t.Logf("the late write of epoch %d to %s %v was rejected: the item keeps epoch %d", frozen, req.TableName, req.Key, got)
}
