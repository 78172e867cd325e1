package samtemplate_test

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/lambda"
)

// TestSampleEvent: the event file of `sam local invoke ProjectionFunction -e
// lambda/testdata/kinesis-event.json` (README) is one shard's batch as the event source mapping
// delivers it, which package lambda accepts, and its records are flights partitioned by origin.
func TestSampleEvent(t *testing.T) {
	b, err := os.ReadFile("../../lambda/testdata/kinesis-event.json")
	require.NoError(t, err)
	var in events.KinesisEvent
	require.NoError(t, json.Unmarshal(b, &in))
	shard, evs, err := lambda.Records(in)
	require.NoError(t, err)
	require.Equal(t, "shardId-000000000000", shard)
	require.Len(t, evs, 4)
	for i, e := range evs {
		var f struct {
			Date, Origin, Destination string
			Delay, Distance           *float64
		}
		require.NoError(t, json.Unmarshal(e.Data, &f), "record %d", i)
		require.Equal(t, e.PartitionKey, f.Origin, "record %d: partition key origin", i)
		require.NotEmpty(t, f.Destination)
		require.NotNil(t, f.Delay)
		require.NotNil(t, f.Distance)
		require.Equal(t, in.Records[i].Kinesis.SequenceNumber, e.Seq)
	}
}
