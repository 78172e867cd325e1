package lambda_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/internal/testwasm"
	"github.com/projhost/projhost/lambda"
	"github.com/projhost/projhost/readmodel"
)

// TestLongestPartitionKey: records whose partition key is the longest Kinesis accepts in bytes
// (256 characters of 4 UTF-8 bytes: 1024 bytes), as the event source mapping's JSON delivers
// them, are carried intact by Records and projected by Handle, with no record failed.
func TestLongestPartitionKey(t *testing.T) {
	long := strings.Repeat("😀", 256)
	require.Len(t, long, 1024)
	sid := shardID(0)
	b, err := json.Marshal(events.KinesisEvent{Records: []events.KinesisEventRecord{
		record(sid, 0, long, []byte("{}")), record(sid, 1, "a", []byte("{}")), record(sid, 2, long, []byte("{}")),
	}})
	require.NoError(t, err)
	var in events.KinesisEvent
	require.NoError(t, json.Unmarshal(b, &in))
	_, evs, err := lambda.Records(in)
	require.NoError(t, err)
	require.Len(t, evs, 3)
	require.Equal(t, long, evs[0].PartitionKey)

	e := newEnv(t, testwasm.CountAS)
	resp, err := e.handler(t, nil).Handle(context.Background(), in)
	require.NoError(t, err)
	require.Empty(t, resp.BatchItemFailures)
	require.ElementsMatch(t, []readmodel.Doc{
		{Collection: "counts", Key: "a", Doc: []byte(`{"count":1}`)},
		{Collection: "counts", Key: long, Doc: []byte(`{"count":2}`)},
	}, e.docs(t))
	seq, _ := e.cursorOf(t, sid)
	require.Equal(t, seqOf(2), seq)
}
