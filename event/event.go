// Package event holds the domain types every layer of projhost shares: the Event a shard
// delivers, the Mutation a handler returns, and the sequence-number helpers. It imports nothing
// of projhost, so the WASM sandbox (host/), the per-shard core (projection/) and the stores can
// all use it without depending on each other.
package event

import "strings"

// Event is one record of a shard.
type Event struct {
	ShardID      string
	Seq          string // decimal sequence number, strictly increasing within a shard
	PartitionKey string
	ArrivalMs    int64 // approximate arrival time, ms since the Unix epoch (0 = unknown)
	Data         []byte
}

// Mutation is one read-model write a handler returns. Doc is a JSON object; nil means delete.
type Mutation struct {
	Collection string
	Key        string
	Doc        []byte
}

// SeqWidth is the width sequence numbers are zero-padded to for string comparison: the Kinesis
// API pattern for sequence numbers is 0|([1-9]\d{0,128}), at most 129 digits.
const SeqWidth = 129

// PadSeq left-pads a decimal sequence number with zeros to SeqWidth so that padded numbers
// compare as strings in numeric order. "" stays "" (no sequence: before everything).
func PadSeq(seq string) string {
	if seq == "" || len(seq) >= SeqWidth {
		return seq
	}
	return strings.Repeat("0", SeqWidth-len(seq)) + seq
}

// CompareSeq compares two decimal sequence numbers numerically: -1, 0 or +1. "" sorts first.
func CompareSeq(a, b string) int {
	a, b = strings.TrimLeft(a, "0"), strings.TrimLeft(b, "0")
	if len(a) != len(b) {
		if len(a) < len(b) {
			return -1
		}
		return 1
	}
	return strings.Compare(a, b)
}

// Doc is one read-model document: a JSON object addressed by collection and key.
type Doc struct {
	Collection string
	Key        string
	Doc        []byte
}
