package deadletter

import (
	"encoding/base64"
	"encoding/json"
	"time"
)

// LetterJSON is a letter's JSON shape, as `projhost deadletters list|show --json` print it and
// the admin API returns it. Times are RFC 3339 in UTC; ArrivalMs is ms since the Unix epoch (0
// unknown).
type LetterJSON struct {
	Projection   string          `json:"projection"`
	Shard        string          `json:"shard"`
	Seq          string          `json:"seq"`
	PartitionKey string          `json:"partition_key"`
	ArrivalMs    int64           `json:"arrival_ms"`
	State        string          `json:"state"`
	ErrorKind    string          `json:"error_kind"`
	Error        string          `json:"error"`
	Attempts     int             `json:"attempts"`
	FirstFailure time.Time       `json:"first_failure"`
	LastFailure  time.Time       `json:"last_failure"`
	ReplayedSeq  string          `json:"replayed_seq,omitempty"`
	Data         json.RawMessage `json:"data,omitempty"`        // the event when it is JSON
	DataBase64   string          `json:"data_base64,omitempty"` // otherwise
}

// ToJSON returns l's JSON shape; the event data is included when withData.
func ToJSON(l Letter, withData bool) LetterJSON {
	j := LetterJSON{Projection: l.Projection, Shard: l.ShardID, Seq: l.Seq, PartitionKey: l.PartitionKey,
		ArrivalMs: l.ArrivalMs, State: string(l.State), ErrorKind: l.ErrorKind, Error: l.Error, Attempts: l.Attempts,
		FirstFailure: l.FirstFailure.UTC(), LastFailure: l.LastFailure.UTC(), ReplayedSeq: l.ReplayedSeq}
	if withData {
		if json.Valid(l.Data) {
			j.Data = l.Data
		} else {
			j.DataBase64 = base64.StdEncoding.EncodeToString(l.Data)
		}
	}
	return j
}
