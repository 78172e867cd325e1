package dynamotables_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/logging"
	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/internal/dynamotables"
	"github.com/projhost/projhost/internal/dynamotest"
)

// records is a slog.Handler keeping every record.
type records struct {
	mu sync.Mutex
	rs []slog.Record
}

func (h *records) Enabled(context.Context, slog.Level) bool { return true }
func (h *records) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rs = append(h.rs, r.Clone())
	return nil
}
func (h *records) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *records) WithGroup(string) slog.Handler      { return h }

func (h *records) all() []slog.Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]slog.Record(nil), h.rs...)
}

func attr(r slog.Record, key string) string {
	v := ""
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v = a.Value.String()
			return false
		}
		return true
	})
	return v
}

// TestSDKLogsThroughSlog: the SDK's log lines reach the given slog logger as records
// (source=aws-sdk, warn level for warnings), and the CRC32 response validation is off with an
// endpoint, on without.
func TestSDKLogsThroughSlog(t *testing.T) {
	h := &records{}
	ctx := context.Background()
	c, err := dynamotables.NewClient(ctx, dynamotables.WithEndpoint("http://127.0.0.1:1"), dynamotables.WithLogger(slog.New(h)))
	require.NoError(t, err)
	o := c.Options()
	o.Logger.Logf(logging.Warn, "response did not match expected checksum, %d, %d", 1, 2)
	o.Logger.Logf(logging.Debug, "retrying")
	rs := h.all()
	require.Len(t, rs, 2)
	require.Equal(t, slog.LevelWarn, rs[0].Level)
	require.Equal(t, "response did not match expected checksum, 1, 2", rs[0].Message)
	require.Equal(t, "aws-sdk", attr(rs[0], "source"))
	require.Equal(t, slog.LevelDebug, rs[1].Level)
	require.True(t, o.DisableValidateResponseChecksum, "no CRC32 validation against a local endpoint")

	t.Setenv("AWS_REGION", "us-east-1")
	c, err = dynamotables.NewClient(ctx, dynamotables.WithStaticCredentials("a", "b"))
	require.NoError(t, err)
	require.False(t, c.Options().DisableValidateResponseChecksum, "CRC32 validation on AWS's endpoint")
}

// TestNoSDKWarningsAgainstLocalServer: a few hundred requests to the test server, a third of
// them refused conditional writes, make the SDK log no warning (dynalite; and DynamoDB Local
// under tools/dynamodb-local/with.sh, which answers refused conditional writes with
// x-amz-crc32: 0: validated, each made the SDK warn "response did not match expected checksum").
func TestNoSDKWarningsAgainstLocalServer(t *testing.T) {
	h := &records{}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := dynamotables.NewClient(ctx, dynamotables.WithEndpoint(dynamotest.Endpoint(t)), dynamotables.WithLogger(slog.New(h)))
	require.NoError(t, err)
	_, prefix := dynamotest.Tables(t)
	n, err := dynamotables.NamesFor(prefix)
	require.NoError(t, err)
	for i := range 100 {
		key := map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: fmt.Sprintf("p#%d", i%7)},
			"sk": &types.AttributeValueMemberS{Value: fmt.Sprintf("s#%03d", i)},
		}
		item := map[string]types.AttributeValue{"doc": &types.AttributeValueMemberS{Value: fmt.Sprintf(`{"n":%d,"s":"ünï"}`, i)}}
		for k, v := range key {
			item[k] = v
		}
		_, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(n.ReadModel), Item: item})
		require.NoError(t, err)
		_, err = c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(n.ReadModel), Key: key, ConsistentRead: aws.Bool(true)})
		require.NoError(t, err)
		// A conditional write refused (as lease, cursor and fenced writes are every time
		// another worker won): DynamoDB Local answers these with x-amz-crc32: 0.
		_, err = c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(n.ReadModel), Item: item,
			ConditionExpression: aws.String("attribute_not_exists(pk)")})
		require.True(t, dynamotables.IsConditionalCheckFailed(err), "conditional put of an existing item: %v", err)
	}
	_, err = c.Query(ctx, &dynamodb.QueryInput{TableName: aws.String(n.ReadModel),
		KeyConditionExpression:    aws.String("pk = :p"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: "p#1"}}})
	require.NoError(t, err)
	for _, r := range h.all() {
		require.Less(t, r.Level, slog.LevelWarn, "SDK warning: %s", r.Message)
	}
}
