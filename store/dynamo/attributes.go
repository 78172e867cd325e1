package dynamo

import (
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Attribute value helpers shared by the four stores.

// str returns s as an S attribute value.
func str(s string) *types.AttributeValueMemberS { return &types.AttributeValueMemberS{Value: s} }

// num returns n as an N attribute value (decimal).
func num(n int64) *types.AttributeValueMemberN {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

// intAttr returns the attribute name of item it as an int64; ok is false (and n 0) when it is
// absent. Errors: the attribute is not an N, or not an integer that fits 64 bits.
func intAttr(it map[string]types.AttributeValue, name string) (n int64, ok bool, err error) {
	switch v := it[name].(type) {
	case nil:
		return 0, false, nil
	case *types.AttributeValueMemberN:
		n, err := strconv.ParseInt(v.Value, 10, 64)
		if err != nil {
			return 0, false, fmt.Errorf("attribute %s: %w", name, err)
		}
		return n, true, nil
	default:
		return 0, false, fmt.Errorf("attribute %s is %T, want N", name, v)
	}
}

// nowMs is the wall-clock time in ms since the Unix epoch.
func nowMs() int64 { return time.Now().UnixMilli() }
