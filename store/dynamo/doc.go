// Package dynamo is projhost's DynamoDB backend: the lease, cursor, read-model and dead-letter
// stores on the tables <prefix>leases, <prefix>cursors, <prefix>readmodel and
// <prefix>deadletters (internal/dynamotables defines them; CreateTables or `projhost tables
// create` creates them). Open returns the four as a store.Stores in Fenced mode: exactly-once
// without transactions, through per-item markers and a per-shard write fence (RATIONALE.md). No
// request uses a transaction, so the stores run on dynalite and DynamoDB Local as on AWS.
//
// Each store can also be made on its own from a client and a table prefix: NewLeaseStore
// (shardmap.LeaseStore), NewCursorStore (cursorstore.Store), NewReadModel (readmodel.Store and
// readmodel.WriteClaimer), NewDeadLetters (deadletter.Store), NewRegistry (registry.Store). Every store is safe for concurrent
// use. Reads are strongly consistent. DynamoDB errors are returned after the client's retries
// (for Open's own client: the SDK's standard retryer with 10 attempts), wrapped with what was
// being done.
//
// # Writes of unknown outcome
//
// A write can be applied while its answer is lost (a 500 after the write, a timeout, a
// connection reset after the request was sent); the SDK then sends it again, and a conditional
// write's retry may fail its own condition because the first attempt moved the item. Every
// conditional write here is either idempotent as retried (its condition still holds once it
// was applied), or, when the condition fails, reads the item and treats the write as done when
// the item holds what this write meant to write, as the Kinesis Client Library does for its
// lease writes (awslabs/amazon-kinesis-client PR #247, release 1.8.8; its issue #325); only
// otherwise is the conflict reported. Where the item alone cannot tell whose write it holds, a
// request token is written into it (leases and dead letters: token). The rule of each write is given with
// its store below.
//
// # Leases
//
// LeaseStore (DESIGN §4) keeps one item per (projection, shard) in the leases table:
//
//	projection S (HASH), shard S (RANGE), owner S (absent when free), counter N, epoch N,
//	parents L of S, state S ("active" | "finished"), module S (the owner's module identity,
//	shardmap.Lease.Module; absent when ""), token S (the request token of the write that
//	stored the item: 16 random hex digits, new for every write)
//
// Every write is a single conditional PutItem: Create with attribute_not_exists(projection),
// Update with counter = <expected>. When the condition fails the lease is read back
// (strongly consistent): when it holds exactly what this call wrote, token included, an
// attempt of this call was applied without its answer reaching us (a 5xx, a timeout or a
// connection reset after the request was sent; the SDK's retry then met the moved counter),
// and the write succeeds; otherwise Update returns a *shardmap.ConflictError with the stored
// lease, Create shardmap.ErrExists (also when its read-back fails: the lease exists, whoever
// wrote it, and EnsureShards needs no more). The token is what proves "this call": the same lease
// written by an earlier call of this worker whose outcome it did not learn started no validity
// period and is left to shardmap.Manager, which writes again on top of it.
//
// # Cursors
//
// CursorStore (DESIGN §3) keeps one item per (projection, shard) in the cursors table:
//
//	projection S (HASH), shard S (RANGE), epoch N, seq S (as saved), seqp S (seq zero-padded to
//	source.SeqWidth so that a string comparison in a condition is a numeric one), stopped S and
//	stopped_ms N (only while the shard is stopped: Cursor.Stopped, Cursor.StoppedMs)
//
// and per projection one pause item (SetPaused, Pauses), sort key PauseSK ("#pause", which no
// shard can be): all BOOL (present while the projection as a whole is paused) and shards SS
// (the shards paused one by one). SetPaused is one unconditional UpdateItem (SET/REMOVE all,
// ADD/DELETE shards), Pauses one GetItem. Reset is one UpdateItem conditional on epoch <= new
// that sets the epoch and the sequence number (or removes it) in either direction.
//
// Claim is one UpdateItem conditional on epoch <= new; Save is one UpdateItem conditional on
// epoch = mine and seqp <= new. When a Save's condition fails the item is read (dynalite returns
// no item with ReturnValuesOnConditionCheckFailure) to tell ErrFenced from ErrBackwards. Stop is
// one UpdateItem conditional on epoch = mine; Resume one UpdateItem removing the stopped
// attributes, conditional on them existing (so it never creates an item). Claim and Save do not
// name the stopped attributes, so they keep them.
//
// Writes of unknown outcome: every cursor write is idempotent as retried. Claim's epoch <= new
// and Save's epoch = mine AND seqp <= new hold again after their own write; Stop's epoch = mine
// too (its stopped_ms is taken once per call, so a retry writes the same item); Resume treats a
// failed condition (not stopped) as done.
//
// # Read models
//
// ReadModel (DESIGN §3) gives an exactly-once effect for per-key aggregates without
// transactions. Its items, in the read model table (keys pk S / sk S):
//
//	document   pk = projection+"#"+collection   sk = document key
//	           doc        M   the JSON document as native attributes (absent: tombstone)
//	           "seq:"+S   S   per shard S that wrote the item: last applied sequence number,
//	                          zero-padded (source.PadSeq) so that strings compare numerically;
//	                          after resets "g"+20-digit generation+":"+padded (ResetWrites)
//	           "epoch:"+S N   per shard S: the lease epoch of that write
//	           "r:"+S+":"+P N per dead-letter replay of event P (padded) of shard S that wrote the
//	                          item: the replaying epoch (ReplayAttr)
//	fence      pk = projection+"#"                sk = "fence#"+shard id
//	           epoch N (highest epoch seen), hi S (highest padded seq an Apply began), seq S,
//	           gen N (reset generation of the shard's markers; absent = 0)
//	registry   pk = projection+"#"                sk = "collections"
//	           cols SS        every collection the projection has written
//
// Collections are [A-Za-z0-9_.-]{1,255} (wasmabi), so projection+"#"+collection is never
// projection+"#" and the split at the last '#' is unique. Any DynamoDB client reads a document
// with GetItem(pk, sk) and its "doc" attribute. The document is one map attribute rather than
// top-level attributes so that its fields can never collide with the markers, and so that a
// delete can keep the markers (REMOVE doc) without reading the item first.
//
// # Read models: Apply
//
//  1. Fence: one UpdateItem raising the fence's epoch to w.Epoch and hi to w.Seq, conditional on
//     the stored epoch <= w.Epoch (else readmodel.ErrFenced).
//  2. Registry: ADD of collections this process has not registered yet (once per process).
//  3. One UpdateItem per distinct key (the last mutation of a key wins), up to MaxInFlight
//     (WithMaxInFlight) at a time: SET doc (put) or REMOVE doc (delete, leaving a tombstone),
//     SET seq:S and epoch:S, conditional on seq:S absent or < w.Seq and epoch:S absent or <=
//     w.Epoch. The item a condition failed on is examined — as returned with the failure
//     (ReturnValuesOnConditionCheckFailure ALL_OLD: DynamoDB and DynamoDB Local return it), or
//     read back (dynalite returns none): a newer epoch there is ErrFenced (a zombie that passed
//     step 1 before the new owner raised the fence), a marker at w.Seq or later means the key
//     already holds this shard's effects and is skipped, anything else is an error (apply
//     again).
//
// So a replayed Apply changes nothing it already changed, a partially applied Apply completes on
// replay, and a zombie cannot overwrite a newer owner's work.
//
// Writes of unknown outcome: the fence raise (epoch <= mine AND hi <= mine), the epoch raise
// of ClaimWrites and replays (epoch <= mine) and the registry ADD (unconditional, a set) are
// idempotent as retried. An item write's retry fails its marker condition once its first
// attempt was applied; the read-back of step 3 then finds this write's marker: done only when
// the item's marker covers this write (seq:S >= w.Seq padded; for a replay, r:S:P present) and
// its epoch:S is not newer (newer: ErrFenced). A failed condition with neither is an error
// (nothing to skip: Apply again). The document is not compared: the markers say which batch or
// replay of which epoch the item holds, and the first write of a batch is the one kept.
//
// # Read models: dead-letter replays
//
// An Apply with w.Replay set re-applies the effect of one dead-lettered event P, whose sequence
// number is below the shard's markers. It is made idempotent by its own per-item marker instead
// of the sequence-number marker: step 1 raises only the fence's epoch (not hi or seq, so HighWater
// and ClaimWrites are unchanged), step 3 writes each item conditional on "r:S:P" absent and
// epoch:S <= w.Epoch, setting "r:S:P" to w.Epoch and leaving seq:S as it is. A replay Apply
// repeated after a crash half-way writes only the items it had not written; a stale epoch is
// fenced as for any Apply. The markers stay on the items (one per replayed event that touched
// them, about 140 bytes each). Writes per Apply: 1 + distinct keys (+1 the first time a process
// sees a collection).
//
// # Read models: limit of the exactly-once effect
//
// It holds for handlers whose write to an item depends only on that item's state and the events
// (per-key aggregates). It also needs a replay to end at the same sequence number as the
// original Apply for every key that Apply touched: an item whose marker says "applied up to 25"
// must not be rewritten by a replayed batch 21..30 computed from the item's current state (it
// would count 21..25 twice). HighWater returns the highest sequence number any Apply of a shard
// began with, so a runner resuming below it can end its first replayed batch exactly there.
// Tombstones are kept forever (no TTL: dynalite lacks UpdateTimeToLive).
//
// # Dead letters
//
// DeadLetters keeps a letter's head item, and its data in chunk items when it is large, in the
// dead-letter table (keys projection S / sk S):
//
//	head   sk = shard id + "#" + sequence number zero-padded to event.SeqWidth (129) digits
//	       shard S, seq S (as given), state S, attempts N, arrival_ms N, and when not empty:
//	       partition_key S, error_kind S, error S, first_failure_ms N, last_failure_ms N
//	       (ms since the Unix epoch), replayed_seq S; the data either inline (data B) or in
//	       chunks (chunks N, chunk_gen S, data_len N); token S (16 hex digits: the request token
//	       of the Put or Transition that wrote the head last; not part of the Letter)
//	chunk  sk = head sk + "#chunk#" + chunk_gen + "#" + 4-digit index
//	       chunk N (the index), data B (at most ChunkBytes)
//
// The padded sequence number makes a shard's letters sort numerically in a Query; List also
// sorts what it read by shard id then sequence number, because shard id + "#" alone does not
// order shard ids that contain bytes below '#' (it is still a unique key: the padded part has a
// fixed width of digits). Any DynamoDB client reads a letter with GetItem(projection, sk).
//
// # Dead letters: data larger than an item
//
// An item holds at most 400 KB (MaxItemBytes), events up to 1 MiB (the host's limit; Kinesis
// allows more). Data that does not fit inline next to the other fields is stored in chunk items
// of ChunkBytes, written before the head, under a generation id that is new for every Put (16
// random hex digits); the head names the generation, count and length. The head write switches
// a letter to its new data atomically; the chunks of the generation it replaced are deleted
// afterwards. A Put that crashes between its chunk writes and its head write leaves unreferenced
// chunks behind (garbage, never read). Fields other than Data that do not fit one item (an
// error message of hundreds of KB) fail Put with ErrTooLarge.
//
// # Dead letters: writes
//
// Put: the chunk PutItems (large data only), then one UpdateItem of the head that sets every
// field, removes the fields now empty, and sets first_failure_ms only if_not_exists; when the
// stored first failure was later than the new one, a second conditional UpdateItem lowers it.
// Transition: one UpdateItem conditional on the state (state IN from); when the condition
// fails, a GetItem tells deadletter.ErrNotFound from deadletter.ErrState (dynalite returns no
// item with ReturnValuesOnConditionCheckFailure).
//
// Writes of unknown outcome: the chunk PutItems, the head write (unconditional) and the chunk
// DeleteItems are idempotent as retried; the lowering of first_failure_ms is conditional on
// the stored one being later, so its retry fails and is taken as done, as for a concurrent Put.
// Each Put writes a new token into token (the same random value names its chunk generation), and
// each Transition its own. When the head write was retried after an applied attempt, the item
// it returns as replaced is this Put's own head (its token is this Put's): Put then deletes no
// chunks, since the generation its first attempt replaced is unknown; those chunks stay
// unreferenced (garbage, never read, as after a crash between chunk and head writes). The
// first failure is still the earliest: the retry's "old" item holds if_not_exists's result,
// the stored first failure when there was one. A Transition whose condition failed is done
// when the item read back carries its token (its own applied attempt); otherwise ErrState or
// ErrNotFound as before.
//
// # Modules
//
// Registry (registry.Store) keeps, in the modules table, per projection (the hash key), one item
// per uploaded version, sort key "v#" and its number in 20 digits (attributes sha256, size, abi,
// uploaded_ms, note, token), and the active pointer, sort key "active" (version, previous,
// counter, changed_ms, token). Add reads the highest number (a Query of one item, newest
// first) and puts the next one on attribute_not_exists, moving on to the next number when
// another Add took it; Activate reads the version item (it must exist) and the pointer, and
// puts the pointer on its counter (attribute_not_exists for the first). Both write a request
// token; after a failed condition the item read back holding this call's token is this call's
// own write (its answer lost), anything else another deploy's (the number taken; a
// *registry.ConflictError with the pointer stored).
package dynamo
