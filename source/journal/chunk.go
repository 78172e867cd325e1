package journal

import (
	"encoding/binary"
	"fmt"
)

// A chunk is consecutive events of one shard appended in one transaction, stored as one row of
// the chunks table: first_seq and last_seq, the shared arrival time, and the events as
// uvarint(len(partition key)) partition key uvarint(len(data)) data, one after the other, in
// sequence order. One row for many events is what makes appends cheap: SQLite's cost is per
// row and per page written, not per byte.

// ChunkBytes is the size an append transaction fills a shard's chunk to before it starts the
// next one (an event is never split: a larger one makes a chunk of its own). Readers load whole
// chunks, so this bounds what a read of a few events loads.
const ChunkBytes = 64 << 10

// appendEncoded appends the encoding of e to b.
func appendEncoded(b []byte, e *AppendEvent) []byte {
	b = binary.AppendUvarint(b, uint64(len(e.PartitionKey)))
	b = append(b, e.PartitionKey...)
	b = binary.AppendUvarint(b, uint64(len(e.Data)))
	return append(b, e.Data...)
}

// encodedLen is len(appendEncoded(nil, e)).
func encodedLen(e *AppendEvent) int {
	k, d := len(e.PartitionKey), len(e.Data)
	return uvarintLen(uint64(k)) + k + uvarintLen(uint64(d)) + d
}

func uvarintLen(v uint64) int {
	n := 1
	for ; v >= 0x80; v >>= 7 {
		n++
	}
	return n
}

// chunkReader decodes a chunk's events in order. Event data are sub-slices of the chunk (their
// capacity ends with them); partition keys are strings shared by consecutive equal keys.
type chunkReader struct {
	b       []byte // the events not decoded yet
	next    int64  // their first sequence number
	last    int64  // the chunk's last sequence number
	arrival int64
	key     string // the last partition key decoded
}

// skip drops the events up to and including seq.
func (c *chunkReader) skip(seq int64) error {
	for c.next <= seq && c.next <= c.last {
		if _, _, err := c.decode(); err != nil {
			return err
		}
	}
	return nil
}

// empty reports whether every event is decoded.
func (c *chunkReader) empty() bool { return c.next > c.last }

// peekLen returns the data length of the next event (c not empty).
func (c *chunkReader) peekLen() (int, error) {
	k, n := binary.Uvarint(c.b)
	if n <= 0 || k > uint64(len(c.b)-n) {
		return 0, c.corrupt()
	}
	d, m := binary.Uvarint(c.b[n+int(k):])
	if m <= 0 || d > uint64(len(c.b)-n-int(k)-m) {
		return 0, c.corrupt()
	}
	return int(d), nil
}

// decode returns the next event's partition key and data (c not empty).
func (c *chunkReader) decode() (string, []byte, error) {
	k, n := binary.Uvarint(c.b)
	if n <= 0 || k > uint64(len(c.b)-n) {
		return "", nil, c.corrupt()
	}
	key := c.b[n : n+int(k)]
	c.b = c.b[n+int(k):]
	d, m := binary.Uvarint(c.b)
	if m <= 0 || d > uint64(len(c.b)-m) {
		return "", nil, c.corrupt()
	}
	data := c.b[m : m+int(d) : m+int(d)]
	c.b = c.b[m+int(d):]
	if string(key) != c.key {
		c.key = string(key)
	}
	c.next++
	if c.empty() && len(c.b) != 0 {
		return "", nil, c.corrupt()
	}
	return c.key, data, nil
}

func (c *chunkReader) corrupt() error {
	return fmt.Errorf("corrupt journal: the chunk of events up to %d does not decode at event %d", c.last, c.next)
}
