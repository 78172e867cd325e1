// Package registry is the module registry of projections: every handler module uploaded for a
// projection is a numbered Version (1, 2, 3, ...) with its SHA-256, size, ABI version, upload
// time and an optional note, and each projection has one Active pointer saying which version
// its workers run. The module bytes live content-addressed in a Blobs store (a directory next
// to the embedded store, DirBlobs; an S3 bucket in AWS, package registry/s3blobs); the metadata
// in the projection's store (the embedded SQLite store, DynamoDB), behind Store.
//
// Writes are conditional so that concurrent deploys cannot both win: two Adds get two
// different numbers, and of two Activates that read the same pointer only one succeeds (the
// other gets a *ConflictError with the pointer stored). The conformance suite for Store and
// Blobs implementations is registry/registrytest.
package registry

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
)

// Version is one uploaded module version of a projection.
type Version struct {
	Projection string
	// Number is the version's number: 1 for the first upload of a projection, then 2, 3, ...
	// Store.Add assigns it.
	Number int64
	// SHA256 is the lowercase hex SHA-256 of the module bytes: their key in the Blobs store.
	SHA256 string
	Size   int64 // bytes
	// ABI is the projhost ABI version the module declares (its projhost_abi_vN export).
	ABI        int
	UploadedMs int64  // upload time, ms since the Unix epoch
	Note       string // free text given at upload ("" = none); at most MaxNoteBytes
}

// ModuleID is the version's module identity as leases record it: "sha256:" and its SHA256
// (the same as container.ModuleID of its bytes).
func (v Version) ModuleID() string { return "sha256:" + v.SHA256 }

// Active is a projection's active-version pointer.
type Active struct {
	Projection string
	// Version is the number of the version the projection's workers run; 0 when no version
	// was ever activated.
	Version int64
	// Previous is the version that was active before the last change (0 = none): what
	// Rollback returns to. A rollback sets Previous to the version it left, so a second
	// rollback undoes the first.
	Previous int64
	// Counter counts the changes of the pointer (0 before the first): Activate's expect.
	Counter   int64
	ChangedMs int64 // time of the last change, ms since the Unix epoch (0 before the first)
}

// Store keeps the versions and the active pointer of every projection. Implementations are
// safe for concurrent use by several processes sharing the same backing store.
type Store interface {
	// Add records v (its Projection, SHA256, Size, ABI, UploadedMs and Note) as the
	// projection's next version and returns it with its Number: one more than the highest
	// number stored. Concurrent Adds get different numbers. The same bytes uploaded twice are
	// two versions (with the same SHA256).
	Add(ctx context.Context, v Version) (Version, error)
	// Versions lists the projection's versions by Number, oldest first (none: empty, no error).
	Versions(ctx context.Context, projection string) ([]Version, error)
	// Active returns the projection's pointer (Version 0, Counter 0 when never activated).
	Active(ctx context.Context, projection string) (Active, error)
	// Activate points the projection at version n, provided the pointer's Counter is still
	// expect (as read with Active), and returns the pointer written: Version n, Previous the
	// version it replaced, Counter expect+1. Errors: *ConflictError (wrapping ErrConflict,
	// with the pointer stored) when the Counter is not expect; ErrNoVersion (wrapped) when
	// the projection has no version n.
	Activate(ctx context.Context, projection string, n, expect int64) (Active, error)
	// SetShard records which version a shard runs since which sequence number (what a
	// worker's switch wrote; `status` shows it), unless a record of a newer lease epoch is
	// stored (then nothing changes and no error: a zombie's record is dropped). A record of
	// the same epoch replaces the stored one, so a retried write changes nothing.
	SetShard(ctx context.Context, r ShardVersion) error
	// Shards returns the projection's shard records by shard id (none: empty, no error).
	Shards(ctx context.Context, projection string) ([]ShardVersion, error)
}

// ShardVersion is the module version a shard runs, as its owner recorded it at a switch.
type ShardVersion struct {
	Projection string
	ShardID    string
	Epoch      int64 // the owner's lease epoch
	Version    int64 // the version running (registry number)
	// Seq is the switch point: the last sequence number handled by the version before
	// ("" when the shard had handled nothing yet).
	Seq       string
	ChangedMs int64 // when the owner switched, ms since the Unix epoch
}

// Blobs stores module bytes under their SHA-256 (lowercase hex). Implementations are safe for
// concurrent use by several processes.
type Blobs interface {
	// Put stores wasm under sum, its SHA-256. Storing the same bytes again is a no-op.
	// Errors: ErrCorrupt when sum is not the SHA-256 of wasm.
	Put(ctx context.Context, sum string, wasm []byte) error
	// Get returns the bytes stored under sum. Errors: ErrNoModule (wrapped) when none are;
	// ErrCorrupt (wrapped) when the bytes stored do not hash to sum.
	Get(ctx context.Context, sum string) ([]byte, error)
}

// Limits.
const (
	// DefaultMaxModuleSize is the largest module accepted by default: 64 MiB (a standard Go
	// build of an example handler is about 3 MB, a TinyGo one about 150 KB).
	DefaultMaxModuleSize = 64 << 20
	// MaxNoteBytes bounds Version.Note.
	MaxNoteBytes = 1024
)

// Errors.
var (
	// ErrConflict: the active pointer changed since it was read (another deploy, activate or
	// rollback came first). *ConflictError wraps it.
	ErrConflict = errors.New("registry: the active version changed meanwhile")
	// ErrNoVersion: the projection has no such version.
	ErrNoVersion = errors.New("registry: no such version")
	// ErrNoModule: the module store holds no bytes under that SHA-256.
	ErrNoModule = errors.New("registry: module bytes not found")
	// ErrCorrupt: bytes and SHA-256 do not match (a bad Put, or bytes damaged in the store).
	ErrCorrupt = errors.New("registry: module bytes do not match their SHA-256")
	// ErrInvalid: a bad argument (an empty projection name, a malformed SHA-256, a note too
	// long, a negative size).
	ErrInvalid = errors.New("registry: invalid argument")
)

// ConflictError is Activate's error when the pointer's Counter was not the one expected.
type ConflictError struct {
	Stored Active // the pointer as stored
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("registry: the active version of %s changed meanwhile (now version %d, change %d): list the versions and activate again",
		e.Stored.Projection, e.Stored.Version, e.Stored.Counter)
}

// Unwrap returns ErrConflict.
func (e *ConflictError) Unwrap() error { return ErrConflict }

var sumRE = regexp.MustCompile(`^[0-9a-f]{64}$`)

// Sum returns the lowercase hex SHA-256 of wasm.
func Sum(wasm []byte) string {
	s := sha256.Sum256(wasm)
	return hex.EncodeToString(s[:])
}

// CheckSum returns ErrInvalid (wrapped) unless sum is 64 lowercase hex digits.
func CheckSum(sum string) error {
	if !sumRE.MatchString(sum) {
		return fmt.Errorf("%w: SHA-256 %q: want 64 lowercase hex digits", ErrInvalid, sum)
	}
	return nil
}

// CheckVersion returns ErrInvalid (wrapped) unless v can be added: a projection name, a
// well-formed SHA256, a size of 1 byte or more, an ABI version of 1 or more and a note of at
// most MaxNoteBytes. Store implementations call it in Add.
func CheckVersion(v Version) error {
	switch {
	case v.Projection == "":
		return fmt.Errorf("%w: no projection name", ErrInvalid)
	case v.Size < 1:
		return fmt.Errorf("%w: module size %d", ErrInvalid, v.Size)
	case v.ABI < 1:
		return fmt.Errorf("%w: ABI version %d", ErrInvalid, v.ABI)
	case len(v.Note) > MaxNoteBytes:
		return fmt.Errorf("%w: a note of %d bytes: at most %d", ErrInvalid, len(v.Note), MaxNoteBytes)
	}
	return CheckSum(v.SHA256)
}
