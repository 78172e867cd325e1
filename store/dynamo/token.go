package dynamo

import (
	"crypto/rand"
	"encoding/hex"
)

// requestToken returns a new request token: 16 random hex digits, written into an item by a
// conditional write so that, when the write's outcome was unknown (the request applied, its
// answer lost, the SDK's retry then failing the condition), reading the item tells whether this
// call's write is the one stored (RATIONALE.md, "Writes of unknown outcome").
func requestToken() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}
