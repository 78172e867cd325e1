// @projhost/sdk: projhost's library for handlers written in AssemblyScript 0.28 (ABI v1, see
// ABI.md in the projhost repository). README.md shows a handler; in short:
//
//   import { Batch, Doc, JsonReader, JsonWriter, State, handle } from "@projhost/sdk";
//   export * from "@projhost/sdk/exports"; // the functions the host calls
//
//   class Total extends Doc {
//     total: i64 = 0;
//     reset(): void { this.total = 0; }
//     decode(d: JsonReader): bool { this.total = d.getInt("total"); return d.ok; }
//     encode(w: JsonWriter): void { w.int("total", this.total); }
//   }
//   const totals = new State<Total>("totals");
//
//   handle((b: Batch): string | null => {
//     while (b.next()) {
//       const j = b.event.json();
//       const amount = j.getInt("amount");
//       if (!j.found) return "event seq " + b.event.seq() + ": no integer amount"; // fails the batch
//       totals.get(b.event.key).total += amount;
//     }
//     return null;
//   });
//
//   asc handler.ts -o handler.wasm --runtime minimal -O3
//
// Semantics match the Go SDK: put/delete go into a per-batch cache keyed by collection/key and
// only the final value of each key is emitted, in first-touch order; read consults that cache
// first (read-your-writes, ABI.md §5) and asks the host once per key and batch. A State's
// documents are decoded at their first touch in a batch, unless the State kept the document it
// wrote last and the host reports it unchanged (read_known, ABI.md §5.1), and encoded once, when
// the handler returns. A handler returning a message fails the batch through the host's fail
// import; the host keeps the instance. A trap or abort (e.g. an assertion) poisons the instance.
// Event.json() reads the fields it is asked for by literal name where the host's field index
// points (ABI.md §2.1).
//
// Strings: collection names and keys are AssemblyScript strings, sent to the host as UTF-8 (unpaired
// surrogates become U+FFFD), or UTF-8 bytes (Bytes, Key, ArrayBuffer). Documents are JSON objects.

import {
  Bytes, BytesIndex, JsonReader, JsonWriter, MAX_INDEXED_FIELDS, Scratch, grownBuffer, openFields, prefixHash, utf8Into, validIndex, validUTF8,
} from "./json";
export { Bytes, BytesIndex, JsonFields, JsonReader, JsonWriter, Key } from "./json";

// ---- host imports (ABI.md §1) ----

// @ts-ignore: decorator
@external("projhost", "log")
declare function host_log(level: i32, ptr: usize, len: i32): void;

// @ts-ignore: decorator
@external("projhost", "fail")
declare function host_fail(ptr: usize, len: i32): void;

// @ts-ignore: decorator
@external("projhost", "read")
declare function host_read(collPtr: usize, collLen: i32, keyPtr: usize, keyLen: i32, bufPtr: usize, bufCap: i32): i32;

// @ts-ignore: decorator
@external("projhost", "read_known")
declare function host_read_known(collPtr: usize, collLen: i32, keyPtr: usize, keyLen: i32, knownPtr: usize, knownLen: i32, bufPtr: usize, bufCap: i32): i32;

/** read_known's answer when the stored document is byte-for-byte the known one (ABI.md §5.1). */
const READ_UNCHANGED: i32 = -2;

// ---- limits (ABI.md §2, §4) ----

const ABI_VERSION: u32 = 1;
const FLAG_FIELD_INDEX: u32 = 1; // batch flag bit 0: the events carry a field index (§2.1)
const MAX_SEQ_LEN: i32 = 129; // the Kinesis pattern 0|([1-9]\d{0,128})
const MAX_SHARD_ID_LEN: i32 = 256;
// In bytes: 256 Unicode characters (the Kinesis limit) of up to 4 UTF-8 bytes each.
const MAX_PARTITION_KEY_LEN: i32 = 1024;
const MAX_DATA_LEN: u32 = 1 << 20;
const MAX_COLLECTION_LEN: i32 = 255;
const MAX_DOC_KEY_LEN: i32 = 1024;
const MAX_DOC_LEN: i32 = 256 << 10;
const MAX_MESSAGE_LEN: i32 = 4096;
const MAX_KEPT_COLLECTIONS: i32 = 64;
const OP_PUT: u8 = 1;
const OP_DELETE: u8 = 2;

/** Log levels of Batch.log (ABI.md §1). */
export const LEVEL_DEBUG: i32 = 0;
export const LEVEL_INFO: i32 = 1;
export const LEVEL_WARN: i32 = 2;
export const LEVEL_ERROR: i32 = 3;

const keyScratch = new Scratch();
const msgScratch = new Scratch();

// kPtr/kLen: the UTF-8 bytes of the key keyOf was given last (keyScratch for a string).
let kPtr: usize = 0;
let kLen: i32 = 0;

/** Sets kPtr/kLen to the UTF-8 bytes of key: a string, Bytes (Key too) or ArrayBuffer. */
// @ts-ignore: decorator
@inline function keyOf<K>(key: K): void {
  if (isString<K>()) {
    const s = changetype<string>(key);
    kLen = utf8Into(keyScratch, s);
    kPtr = changetype<usize>(keyScratch.buf);
  } else if (key instanceof Bytes) {
    const b = changetype<Bytes>(key);
    kPtr = b.ptr;
    kLen = b.len;
  } else if (key instanceof ArrayBuffer) {
    const b = changetype<ArrayBuffer>(key);
    kPtr = changetype<usize>(b);
    kLen = b.byteLength;
  } else {
    ERROR("a key must be a string, Bytes (or Key) or ArrayBuffer");
  }
}

// ---- events and batches ----

/** One stream record. Pointers point into the batch buffer, valid during the handler call only. */
export class Event {
  seqPtr: usize = 0;
  seqLen: i32 = 0;
  keyPtr: usize = 0;
  keyLen: i32 = 0;
  /** Approximate arrival time, ms since the Unix epoch (0 = unknown). */
  arrivalMs: i64 = 0;
  dataPtr: usize = 0;
  dataLen: i32 = 0;
  /** The event's field index (ABI.md §2.1): indexFields entries of 8 bytes at indexPtr; 0 when none. */
  indexPtr: usize = 0;
  /** The number of fields the batch indexes (f; 0 when it has no index). */
  indexFields: u32 = 0;
  /** The partition key's bytes (a view, valid until the next event): a key without a string. */
  readonly key: Bytes = new Bytes();
  private reader: JsonReader = new JsonReader().forEvents();

  /** The decimal sequence number. Allocates. */
  seq(): string { return String.UTF8.decodeUnsafe(this.seqPtr, this.seqLen); }
  /** The partition key as a string. Allocates (key does not). */
  partitionKey(): string { return String.UTF8.decodeUnsafe(this.keyPtr, this.keyLen); }
  /** A copy of the data bytes. */
  data(): ArrayBuffer {
    const b = new ArrayBuffer(this.dataLen);
    memory.copy(changetype<usize>(b), this.dataPtr, this.dataLen);
    return b;
  }
  /**
   * A JSON field reader over the data (one reader per event object, reused by every call). It
   * reads the fields the host indexed where the index points (see JsonReader).
   */
  json(): JsonReader { return this.reader.resetEvent(this.dataPtr, this.dataLen, this.indexPtr, this.indexFields); }
}

function validCollection(c: string): bool {
  const n = c.length;
  if (n == 0 || n > MAX_COLLECTION_LEN) return false;
  for (let i = 0; i < n; i++) {
    const x = c.charCodeAt(i);
    if (!((x >= 0x61 && x <= 0x7A) || (x >= 0x41 && x <= 0x5A) || (x >= 0x30 && x <= 0x39) || x == 0x5F || x == 0x2E || x == 0x2D)) return false;
  }
  return true;
}

/** A handler: returns null on success, or a message that fails the batch. */
export type Handler = (b: Batch) => string | null;

/** One call's worth of events and the handler's view of the read model. */
export class Batch {
  /** The current event (after next() returned true); reused by every next(). */
  readonly event: Event = new Event();
  private ptr: usize = 0;
  private end: usize = 0;
  private left: u32 = 0;
  private count: u32 = 0;
  private shardPtr: usize = 0;
  private shardLen: i32 = 0;
  decodeError: string | null = null;
  usageError: string | null = null;
  /** Counts handler calls: States reset themselves when it changes. */
  gen: u32 = 0;
  /** Whether a handler call is under way (State.get is refused outside one). */
  active: bool = false;
  // The per-batch cache. Collections: few per handler, so a linear scan (pointer equality first:
  // names are usually the same string constant) beats hashing; each is validated and encoded
  // once, and kept across batches (up to MAX_KEPT_COLLECTIONS: a handler with more names starts
  // each batch with none).
  // Entries are keyed by (collection index u32, key UTF-8 bytes) in one BytesIndex, whose dense
  // indexes are first-touch order, the output order. Documents live in one arena reset per
  // batch, or as typed documents of a State (docs): the cache allocates nothing per key once
  // warmed up.
  private collNames: Array<string> = [];
  private collBytes: Array<ArrayBuffer> = [];
  keys: BytesIndex = new BytesIndex();
  // Per entry (index e of keys, below keys.size), in arrays grown by hand, all as long (an entry
  // is then stores, not pushes; slots past keys.size keep an earlier batch's values, unread):
  // its document in arena (docOff -1: absent or deleted), whether the batch changed it, and its
  // typed document if a State holds it.
  docOff: StaticArray<i32> = new StaticArray<i32>(64);
  docLen: StaticArray<i32> = new StaticArray<i32>(64);
  dirty: StaticArray<bool> = new StaticArray<bool>(64);
  typed: StaticArray<Doc | null> = new StaticArray<Doc | null>(64);
  arena: ArrayBuffer = new ArrayBuffer(4096);
  arenaLen: i32 = 0;
  readBuf: ArrayBuffer = new ArrayBuffer(4096);
  readLen: i32 = -1; // after entry(ci, kp, kl, true) of a new key or ask: the host's answer (-1 none, -2 unchanged)
  fresh: bool = false; // whether the last entry or entryFor created its entry
  // Set by State.get around its entryFor: the kept keys of the State (keys with the same hash
  // as the batch's, without the prefix), looked up by entry when it creates an entry; keptSlot
  // is then the key's slot there, or -1.
  keptIndex: BytesIndex | null = null;
  keptSlot: i32 = -1;
  private reader: JsonReader = new JsonReader(); // readDoc's
  private lastKey: string | null = null; // entryFor's last string key, its collection and entry
  private lastCi: i32 = -1;
  private lastEntry: i32 = -1;
  /** After readRaw() returned true: the document's bytes, valid until the next put/delete/read. */
  docPtr: usize = 0;
  docSize: i32 = 0;

  /** The shard all events of the batch came from. */
  shardId(): string { return String.UTF8.decodeUnsafe(this.shardPtr, this.shardLen); }

  /** The number of events in the batch. */
  get length(): i32 { return <i32>this.count; }

  /** Advances to the next event; false at the end or on a malformed batch (which then fails). */
  next(): bool {
    if (this.left == 0 || this.decodeError !== null) {
      if (this.left == 0 && this.ptr != this.end && this.decodeError === null) {
        this.decodeError = "trailing bytes after the last event";
      }
      return false;
    }
    const ev = this.event;
    let p = this.ptr;
    const end = this.end;
    if (end - p < 2) return this.bad("sequence number");
    ev.seqLen = <i32>load<u16>(p);
    ev.seqPtr = p + 2;
    p += 2 + <usize>ev.seqLen;
    if (ev.seqLen == 0 || ev.seqLen > MAX_SEQ_LEN || p > end) return this.bad("sequence number");
    if (end - p < 2) return this.bad("partition key");
    ev.keyLen = <i32>load<u16>(p);
    ev.keyPtr = p + 2;
    p += 2 + <usize>ev.keyLen;
    if (ev.keyLen > MAX_PARTITION_KEY_LEN || p > end) return this.bad("partition key");
    if (end - p < 12) return this.bad("arrival time");
    ev.arrivalMs = load<i64>(p);
    const dl = load<u32>(p, 8);
    p += 12;
    if (dl > MAX_DATA_LEN || <usize>dl > end - p) return this.bad("data");
    ev.dataPtr = p;
    ev.dataLen = <i32>dl;
    const k = ev.key;
    k.ptr = ev.keyPtr;
    k.len = ev.keyLen;
    p += dl;
    ev.indexPtr = 0;
    const f = ev.indexFields;
    if (f != 0) { // u8 indexed, then f × (u32 offset, u32 length) when it is 1
      if (p >= end) return this.bad("field index");
      const x = load<u8>(p++);
      if (x == 1) {
        if (end - p < <usize>f << 3) return this.bad("field index");
        if (!validIndex(p, f, ev.dataPtr, dl)) return this.bad("field index", "out of the data's bounds");
        ev.indexPtr = p;
        p += <usize>f << 3;
      } else if (x != 0) {
        return this.bad("field index", "flag " + x.toString() + ", want 0 or 1");
      }
    }
    this.ptr = p;
    this.left--;
    return true;
  }

  private bad(field: string, what: string = "truncated or too long"): bool {
    this.decodeError = "event " + (this.count - this.left).toString() + ": " + field + " " + what;
    return false;
  }

  /** Writes msg to the host log at level (LEVEL_*; the host truncates it to 4096 bytes). */
  log(level: i32, msg: string): void {
    const n = utf8Into(msgScratch, msg);
    host_log(level, changetype<usize>(msgScratch.buf), min(n, MAX_MESSAGE_LEN));
  }

  /**
   * Sets collection/key to doc, one JSON object of at most 256 KiB: an ArrayBuffer, or a
   * JsonWriter after its last field (put closes the object: no finish() and no copy to make).
   * The document is copied: the caller may reuse doc. Collection names are 1..255 bytes of
   * [A-Za-z0-9_.-]; keys (a string, Bytes or ArrayBuffer) 1..1024 bytes of UTF-8 without NUL.
   * Misuse fails the batch when the handler returns.
   */
  put<K, D>(collection: string, key: K, doc: D): void {
    const e = this.entryFor<K>(this.collIndex(collection), key, false);
    if (doc instanceof JsonWriter) {
      const w = changetype<JsonWriter>(doc);
      const p = w.end();
      this.putAt(e, p, w.byteLength);
    } else if (doc instanceof ArrayBuffer) {
      const d = changetype<ArrayBuffer>(doc);
      this.putAt(e, changetype<usize>(d), d.byteLength);
    } else {
      ERROR("Batch.put: the document must be an ArrayBuffer or a JsonWriter");
    }
  }

  /** put with the key as UTF-8 bytes kp..kp+kl and the object w holds (see JsonWriter.end). */
  putWriter(collection: string, kp: usize, kl: i32, w: JsonWriter): void {
    const p = w.end();
    this.putAt(this.entry(this.collIndex(collection), kp, kl, false), p, w.byteLength);
  }

  /** put with the key as UTF-8 bytes kp..kp+kl and the document as bytes dp..dp+dl (both copied). */
  putRaw(collection: string, kp: usize, kl: i32, dp: usize, dl: i32): void {
    this.putAt(this.entry(this.collIndex(collection), kp, kl, false), dp, dl);
  }

  private putAt(e: i32, dp: usize, dl: i32): void {
    if (e < 0 || this.held(e, "put")) return;
    if (dl > MAX_DOC_LEN) {
      this.misuse("put " + this.name(e) + ": document of " + dl.toString() + " bytes exceeds " + MAX_DOC_LEN.toString());
      return;
    }
    if (dl < 2 || load<u8>(dp) != 0x7B || load<u8>(dp + dl - 1) != 0x7D) {
      this.misuse("put " + this.name(e) + ": document is not a JSON object (want {...})");
      return;
    }
    this.setDoc(e, dp, dl);
    unchecked(this.dirty[e] = true);
  }

  /** Deletes collection/key (key: a string, Bytes or ArrayBuffer). */
  delete<K>(collection: string, key: K): void {
    this.deleteAt(this.entryFor<K>(this.collIndex(collection), key, false));
  }

  /** delete with the key as UTF-8 bytes kp..kp+kl. */
  deleteRaw(collection: string, kp: usize, kl: i32): void {
    this.deleteAt(this.entry(this.collIndex(collection), kp, kl, false));
  }

  private deleteAt(e: i32): void {
    if (e < 0 || this.held(e, "delete")) return;
    unchecked(this.docOff[e] = -1);
    unchecked(this.docLen[e] = 0);
    unchecked(this.dirty[e] = true);
  }

  /**
   * Returns the current document of collection/key, or null when there is none: this batch's own
   * latest put or delete of it if any, otherwise the host's read model (asked once per key and
   * batch). The result is a new copy: readDoc and readRaw avoid the allocation.
   */
  read<K>(collection: string, key: K): ArrayBuffer | null {
    if (!this.readAt(this.entryFor<K>(this.collIndex(collection), key, true))) return null;
    const d = new ArrayBuffer(this.docSize);
    memory.copy(changetype<usize>(d), this.docPtr, this.docSize);
    return d;
  }

  /**
   * read as a JsonReader over the document (the batch's own reader, no copy), or null when there
   * is none. The reader is valid until the next read, readDoc, put or delete.
   */
  readDoc<K>(collection: string, key: K): JsonReader | null {
    if (!this.readAt(this.entryFor<K>(this.collIndex(collection), key, true))) return null;
    return this.reader.reset(this.docPtr, this.docSize);
  }

  /**
   * read with the key as UTF-8 bytes kp..kp+kl, without allocating: returns whether there is a
   * document, whose bytes are then at docPtr..docPtr+docSize until the next put, delete or read.
   */
  readRaw(collection: string, kp: usize, kl: i32): bool {
    return this.readAt(this.entry(this.collIndex(collection), kp, kl, true));
  }

  private readAt(e: i32): bool {
    if (e < 0 || this.held(e, "read")) return false;
    if (this.readLen >= 0) this.setDoc(e, changetype<usize>(this.readBuf), this.readLen);
    const off = unchecked(this.docOff[e]);
    if (off < 0) return false;
    this.docPtr = changetype<usize>(this.arena) + <usize>off;
    this.docSize = unchecked(this.docLen[e]);
    return true;
  }

  /**
   * The entry of collection ci and key (a string, Bytes or ArrayBuffer), as entry does. A string
   * key that is the same string object as the last one's (a read then a put of one key) is not
   * encoded and looked up again.
   */
  entryFor<K>(ci: i32, key: K, ask: bool): i32 {
    if (isString<K>()) {
      const s = changetype<string>(key);
      if (changetype<usize>(s) == changetype<usize>(this.lastKey) && ci == this.lastCi && ci >= 0) {
        this.readLen = -1;
        this.fresh = false;
        return this.lastEntry;
      }
      const kl = utf8Into(keyScratch, s); // first: it may grow the scratch buffer
      const e = this.entry(ci, changetype<usize>(keyScratch.buf), kl, ask);
      if (e >= 0) {
        this.lastKey = s; // held, so that no other string can get its address meanwhile
        this.lastCi = ci;
        this.lastEntry = e;
      }
      return e;
    }
    keyOf<K>(key);
    return this.entry(ci, kPtr, kLen, ask);
  }

  private setDoc(e: i32, p: usize, n: i32): void {
    const off = unchecked(this.docOff[e]);
    if (off >= 0 && n <= unchecked(this.docLen[e])) { // overwrite in place: the slot is the entry's own
      memory.copy(changetype<usize>(this.arena) + <usize>off, p, n);
      unchecked(this.docLen[e] = n);
      return;
    }
    if (this.arenaLen + n > this.arena.byteLength) this.arena = grownBuffer(this.arena, this.arenaLen, this.arenaLen + n);
    memory.copy(changetype<usize>(this.arena) + <usize>this.arenaLen, p, n);
    unchecked(this.docOff[e] = this.arenaLen);
    unchecked(this.docLen[e] = n);
    this.arenaLen += n;
  }

  /** The index of collection among this batch's collections (added if new), or -1 after reporting misuse. */
  collIndex(collection: string): i32 {
    const names = this.collNames;
    const nc = names.length;
    for (let i = 0; i < nc; i++) {
      const c = unchecked(names[i]);
      if (changetype<usize>(c) == changetype<usize>(collection) || c == collection) return i;
    }
    if (!validCollection(collection)) {
      this.misuse("invalid collection name \"" + collection + "\": want 1..255 bytes of [A-Za-z0-9_.-]");
      return -1;
    }
    names.push(collection);
    this.collBytes.push(String.UTF8.encode(collection));
    return nc;
  }

  /**
   * The entry of collection ci, key kp..kp+kl, or -1 after reporting misuse (ci < 0: already
   * reported). A new entry is created absent and clean; with ask, after asking the host for its
   * document: readLen is then what the host returned (the document is in readBuf), else -1.
   */
  entry(ci: i32, kp: usize, kl: i32, ask: bool): i32 {
    this.readLen = -1;
    this.fresh = false;
    if (ci < 0) return -1;
    const keys = this.keys;
    let e = keys.findPrefixed(<u32>ci, kp, kl);
    if (e >= 0) return e;
    // A new key: check it once, unless keptIndex (a State's kept keys) has it, checked then.
    const kx = this.keptIndex;
    const s = kx !== null ? kx.findHashed(keys.lastHash ^ prefixHash(<u32>ci), kp, kl) : -1;
    this.keptSlot = s;
    let ok = true;
    if (s < 0) {
      ok = kl > 0 && kl <= MAX_DOC_KEY_LEN;
      let high = false;
      for (let i = 0; ok && i < kl; i++) {
        const c = load<u8>(kp + <usize>i);
        ok = c != 0;
        high = high || c >= 0x80;
      }
      if (ok && high) ok = validUTF8(kp, kp + <usize>kl);
    }
    if (!ok) {
      this.misuse("collection " + unchecked(this.collNames[ci]) + ": invalid key \"" + String.UTF8.decodeUnsafe(kp, kl) +
        "\": want 1..1024 bytes of UTF-8 without NUL");
      return -1;
    }
    if (keys.size == this.docOff.length) this.growEntries();
    e = keys.addPrefixed(<u32>ci, kp, kl, keys.lastHash);
    unchecked(this.docOff[e] = -1);
    unchecked(this.docLen[e] = 0);
    unchecked(this.dirty[e] = false);
    unchecked(this.typed[e] = null);
    this.fresh = true;
    if (ask) this.ask(e, 0, -1);
    return e;
  }

  /**
   * Asks the host for the document of entry e, just created (ABI.md §5: once per key and batch),
   * with read, or with read_known when the caller holds a copy of it (knownLen >= 0: the bytes
   * known..known+knownLen, ABI.md §5.1). Sets readLen to the answer: -1 none, -2 (only with a
   * copy) byte-for-byte the copy, else the document's length, the document being in readBuf.
   * Returns whether the answer is -2.
   */
  ask(e: i32, known: usize, knownLen: i32): bool {
    const keys = this.keys;
    const cb = this.collectionOf(e);
    const cp = changetype<usize>(cb), cl = cb.byteLength;
    const kpp = keys.keyPtr(e) + 4, kl = keys.keyLen(e) - 4; // the key bytes, stable until the next entry
    let n = knownLen >= 0
      ? host_read_known(cp, cl, kpp, kl, known, knownLen, changetype<usize>(this.readBuf), this.readBuf.byteLength)
      : host_read(cp, cl, kpp, kl, changetype<usize>(this.readBuf), this.readBuf.byteLength);
    if (n > this.readBuf.byteLength) {
      this.readBuf = new ArrayBuffer(n);
      n = knownLen >= 0
        ? host_read_known(cp, cl, kpp, kl, known, knownLen, changetype<usize>(this.readBuf), this.readBuf.byteLength)
        : host_read(cp, cl, kpp, kl, changetype<usize>(this.readBuf), this.readBuf.byteLength);
    }
    if ((n < -1 && !(n == READ_UNCHANGED && knownLen >= 0)) || n > this.readBuf.byteLength) {
      this.misuse("read " + this.name(e) + ": host returned invalid length " + n.toString());
      this.readLen = -1;
      return false;
    }
    this.readLen = n;
    return n == READ_UNCHANGED;
  }

  /** Doubles the room of the per-entry arrays, keeping the entries of this batch. */
  private growEntries(): void {
    const n = this.docOff.length, c = n << 1;
    const off = new StaticArray<i32>(c), len = new StaticArray<i32>(c), dirty = new StaticArray<bool>(c);
    const typed = new StaticArray<Doc | null>(c);
    memory.copy(changetype<usize>(off), changetype<usize>(this.docOff), <usize>n << 2);
    memory.copy(changetype<usize>(len), changetype<usize>(this.docLen), <usize>n << 2);
    memory.copy(changetype<usize>(dirty), changetype<usize>(this.dirty), <usize>n);
    for (let i = 0; i < n; i++) unchecked(typed[i] = unchecked(this.typed[i])); // stores the collector sees
    this.docOff = off;
    this.docLen = len;
    this.dirty = dirty;
    this.typed = typed;
  }

  /** Whether entry e is held by a State (then op, a Batch method, is misuse). */
  private held(e: i32, op: string): bool {
    if (unchecked(this.typed[e]) === null) return false;
    this.misuse(op + " " + this.name(e) + ": the document is held by a State in this batch: use the State");
    return true;
  }

  /** "collection/key" of entry e, for messages. */
  name(e: i32): string {
    const p = this.keys.keyPtr(e);
    return String.UTF8.decodeUnsafe(changetype<usize>(this.collectionOf(e)), this.collectionOf(e).byteLength) + "/" +
      String.UTF8.decodeUnsafe(p + 4, this.keys.keyLen(e) - 4);
  }

  /** The collection name of entry e. */
  collectionOf(e: i32): ArrayBuffer { return unchecked(this.collBytes[<i32>load<u32>(this.keys.keyPtr(e))]); }

  /** Records the first misuse of the batch: it fails when the handler returns. */
  misuse(msg: string): void {
    if (this.usageError === null) this.usageError = msg;
  }

  /** Prepares for a new batch at ptr..ptr+len; returns an error message or null. */
  begin(ptr: usize, len: i32): string | null {
    this.gen++;
    if (this.collNames.length > MAX_KEPT_COLLECTIONS) {
      this.collNames.length = 0;
      this.collBytes.length = 0;
    }
    this.keys.reset();
    this.arenaLen = 0;
    this.lastKey = null;
    this.decodeError = null;
    this.usageError = null;
    this.left = 0;
    this.count = 0;
    this.ptr = ptr;
    this.end = ptr + <usize>len;
    if (len < 14) return "batch of " + len.toString() + " bytes is shorter than its 14-byte header";
    const v = load<u32>(ptr);
    if (v != ABI_VERSION) return "batch ABI version " + v.toString() + ", want 1";
    this.count = load<u32>(ptr, 8);
    this.shardLen = <i32>load<u16>(ptr, 12);
    if (this.shardLen > MAX_SHARD_ID_LEN || 14 + this.shardLen > len) return "shard id length out of range";
    this.shardPtr = ptr + 14;
    this.ptr = ptr + 14 + <usize>this.shardLen;
    let f: u32 = 0;
    if (load<u32>(ptr, 4) & FLAG_FIELD_INDEX) { // u16 f after the shard id (§2.1)
      if (this.end - this.ptr < 2) return "field count truncated";
      f = <u32>load<u16>(this.ptr);
      if (f == 0 || f > <u32>MAX_INDEXED_FIELDS) return "field count " + f.toString() + " out of range (want 1.." + MAX_INDEXED_FIELDS.toString() + ")";
      this.ptr += 2;
    }
    this.event.indexFields = f;
    this.left = this.count;
    return null;
  }
}

// ---- typed state ----

/**
 * A typed document of a State: extend it with the document's fields and three methods. A State
 * binds one object to each key it keeps and reuses it, unchanged, in later batches (see State);
 * other objects are pooled and reset() before reuse.
 *
 *   class Route extends Doc {
 *     flights: i64 = 0;
 *     totalDistance: i64 = 0;
 *     reset(): void { this.flights = 0; this.totalDistance = 0; }
 *     decode(d: JsonReader): bool {
 *       this.flights = d.getInt("flights");
 *       this.totalDistance = d.getInt("total_distance");
 *       return d.ok;
 *     }
 *     encode(w: JsonWriter): void { w.int("flights", this.flights).int("total_distance", this.totalDistance); }
 *   }
 *
 * Contract: decode(encode(d)) gives d back, field for field, and encode writes every field that
 * matters (a field encode does not write survives into the next batch of a kept document
 * unchanged, not reset: use State.decodeEveryBatch for such a class). Values JsonWriter cannot
 * write as they are break it too: a string with an unpaired surrogate is written with U+FFFD,
 * so a kept document keeps the surrogate where a decoded one would not.
 */
export abstract class Doc {
  /** Sets every field to its value for a key without a document (called before decode too). */
  abstract reset(): void;
  /**
   * Sets the fields from the stored document d (a reader over the JSON object, see JsonReader);
   * returns false when the document is not what it should be, which fails the batch.
   */
  abstract decode(d: JsonReader): bool;
  /** Writes the fields into w, an object already begun: w.int("n", this.n)... */
  abstract encode(w: JsonWriter): void;
  /** The State holding this document (its id), for the library. */
  stateId: u32 = 0;
  /** The State's slot this document is bound to (-1: none), for the library. */
  keptSlot: i32 = -1;
}

/**
 * The most documents one State keeps between batches (16384). A State that begins a batch with
 * that many keys drops everything it keeps and refills from that batch on; within a batch, keys
 * past the limit are decoded as if the State kept nothing.
 */
export const STATE_KEEP_LIMIT: i32 = 16384;

/**
 * What one State keeps between batches. Slots are the dense indexes of a BytesIndex of key UTF-8
 * bytes; per slot, the document object bound to the key and the bytes it last wrote for it. The
 * bytes live in one arena, as records of an 8-byte header (the slot, the room) and room bytes, the
 * document's length rounded up to 8: a document rewritten no longer than its room stays in place,
 * a longer one gets a new record at the end, and a full arena is compacted in place (grown when
 * more than half of it is live), so that keeping allocates nothing per document. Not generic, so
 * that Output and projhost_handle reach it by the State's id (keepers).
 */
class Kept {
  /** false after decodeEveryBatch: nothing is kept. */
  on: bool = true;
  /** The Batch.gen of the last batch that used the State. */
  gen: u32 = 0;
  index: BytesIndex = new BytesIndex();
  docs: StaticArray<Doc | null> = new StaticArray<Doc | null>(64);
  // Per slot s, at 3s: the offset of its record's bytes in arena (-1: no record), the length of
  // the kept bytes (-1: none kept) and the record's room (0: no record).
  meta: StaticArray<i32> = new StaticArray<i32>(192);
  arena: ArrayBuffer = new ArrayBuffer(4096);
  arenaLen: i32 = 0;
  /** Document objects bound to no slot (after dropAll), for new slots. */
  spares: Array<Doc> = [];

  /** Whether slot s holds kept bytes. */
  // @ts-ignore: decorator
  @inline has(s: i32): bool { return unchecked(this.meta[s * 3 + 1]) >= 0; }
  // @ts-ignore: decorator
  @inline ptr(s: i32): usize { return changetype<usize>(this.arena) + <usize>unchecked(this.meta[s * 3]); }
  // @ts-ignore: decorator
  @inline len(s: i32): i32 { return unchecked(this.meta[s * 3 + 1]); }

  /**
   * Adds the key kp..kp+kl, which index.find just did not find, as a slot without a document or
   * bytes; returns it, or -1 at STATE_KEEP_LIMIT.
   */
  add(kp: usize, kl: i32): i32 {
    const index = this.index;
    if (index.size >= STATE_KEEP_LIMIT) return -1;
    const s = index.addHashed(kp, kl, index.lastHash);
    if (s == this.docs.length) {
      const docs = new StaticArray<Doc | null>(s << 1);
      for (let i = 0; i < s; i++) unchecked(docs[i] = unchecked(this.docs[i])); // stores the collector sees
      this.docs = docs;
      const meta = new StaticArray<i32>(s * 6);
      memory.copy(changetype<usize>(meta), changetype<usize>(this.meta), <usize>s * 12);
      this.meta = meta;
    }
    const m = s * 3;
    unchecked(this.meta[m] = -1);
    unchecked(this.meta[m + 1] = -1);
    unchecked(this.meta[m + 2] = 0);
    return s;
  }

  /** Forgets slot s's bytes (the document stays bound: it is reset and decoded when used next). */
  // @ts-ignore: decorator
  @inline drop(s: i32): void { unchecked(this.meta[s * 3 + 1] = -1); }

  /** Keeps p..p+n as the bytes slot s's document was written as. */
  keep(s: i32, p: usize, n: i32): void {
    const m = s * 3;
    if (n > unchecked(this.meta[m + 2])) { // a new record (the old one, if any, is dead)
      unchecked(this.meta[m] = -1);
      unchecked(this.meta[m + 1] = -1);
      unchecked(this.meta[m + 2] = 0);
      const room = (n + 7) & ~7;
      if (this.arenaLen + 8 + room > this.arena.byteLength) this.compact(8 + room);
      const o = this.arenaLen;
      const q = changetype<usize>(this.arena) + <usize>o;
      store<i32>(q, s);
      store<i32>(q, room, 4);
      unchecked(this.meta[m] = o + 8);
      unchecked(this.meta[m + 2] = room);
      this.arenaLen = o + 8 + room;
    }
    memory.copy(changetype<usize>(this.arena) + <usize>unchecked(this.meta[m]), p, n);
    unchecked(this.meta[m + 1] = n);
  }

  /**
   * Moves the live records (those their slot points at, with kept bytes) down to the start of the
   * arena, in order; then grows it if need more bytes would leave less than half of it free.
   */
  private compact(need: i32): void {
    const meta = this.meta;
    const base = changetype<usize>(this.arena);
    const end = this.arenaLen;
    let o = 0, at = 0;
    while (o < end) {
      const s = load<i32>(base + <usize>o), room = load<i32>(base + <usize>o, 4);
      const m = s * 3;
      if (unchecked(meta[m]) == o + 8) { // the slot's record
        if (unchecked(meta[m + 1]) >= 0) {
          if (at != o) memory.copy(base + <usize>at, base + <usize>o, 8 + <usize>unchecked(meta[m + 1]));
          unchecked(meta[m] = at + 8);
          at += 8 + room;
        } else { // no bytes kept: the record goes
          unchecked(meta[m] = -1);
          unchecked(meta[m + 2] = 0);
        }
      }
      o += 8 + room;
    }
    this.arenaLen = at;
    const size = this.arena.byteLength;
    if ((at + need) << 1 > size) this.arena = grownBuffer(this.arena, at, max(size << 1, (at + need) << 1));
  }

  /** Drops every slot: their documents become spares. */
  dropAll(): void {
    const docs = this.docs;
    for (let s = 0, n = this.index.size; s < n; s++) {
      const d = unchecked(docs[s]);
      if (d === null) continue;
      d.keptSlot = -1;
      this.spares.push(d);
      unchecked(docs[s] = null);
    }
    this.index.reset();
    this.arenaLen = 0;
  }
}

let stateIds: u32 = 0;
/** The Kept of every State, by State id - 1. */
const keepers: Array<Kept> = [];
const docReader = new JsonReader();

/** Drops everything the States used in the current batch keep (the batch fails). */
function dropKept(): void {
  const g = batch.gen;
  for (let i = 0, n = keepers.length; i < n; i++) {
    const k = unchecked(keepers[i]);
    if (k.gen == g) k.dropAll();
  }
}

/**
 * The documents of one collection as typed values of class T: get(key) returns a key's document
 * at its first touch in the batch and the same object for that key until the batch ends; the
 * handler changes its fields with plain code. When the handler returns null, every document a
 * State touched is encoded once and put, in first-touch order (the order of the batch's cache,
 * shared with Batch.put and delete). A failed batch writes nothing.
 *
 * Between batches a State keeps, per key (up to STATE_KEEP_LIMIT keys, while the instance
 * lives), the document object and a copy of the bytes it last wrote for the key in a batch that
 * succeeded. At a key's first touch in a batch, get asks the host for the stored document: one
 * host call per key and batch, read_known with the kept bytes when there are some (ABI.md §5.1).
 * When the stored document is byte-for-byte those bytes (nobody else wrote the key since), get
 * returns the kept object as it is: no reset(), no decode. Otherwise it resets an object and
 * decodes the stored document, if any (this batch's own Batch.put of the key first, else the read
 * model's). A failed batch (the handler returns a message, misuse, a document that does not
 * decode, an output error) drops everything the States it used keep; so does a State.delete of the
 * key, for that key. This relies on Doc's contract (decode(encode(d)) gives d back): for a class
 * that does not keep it, call decodeEveryBatch(), and get decodes at every first touch, keeping
 * nothing. Either way, a document object is the handler's during the batch it was got in only.
 *
 * Keys are strings, Bytes (a JsonReader.getText view, Event.key, a Key) or ArrayBuffers of
 * UTF-8: 1..1024 bytes without NUL. In steady state get allocates nothing: documents are bound to
 * their keys or pooled, kept bytes live in an arena per State (compacted in place when full, grown
 * when more than half of it is live), keys are copied into the batch's arena. A document a State
 * holds belongs to it for the rest of the batch: Batch.read, put and delete of that key fail the
 * batch.
 */
export class State<T extends Doc> {
  /** The collection name: 1..255 bytes of [A-Za-z0-9_.-]. */
  readonly collection: string;
  /**
   * Whether the document the last get returned exists: stored in the read model (kept or
   * decoded) or created by an earlier get of the same key in this batch. False only at the get
   * that creates a document (its fields are then what reset() set), and after a get that
   * failed the batch. Go's State.Get returns the same as its found result. Read it right after
   * get, with the document in a variable (`const a = airports.get(k); if (!airports.found) ...`):
   * the next get changes it.
   */
  found: bool = false;
  private id: u32;
  private kept: Kept = new Kept();
  private pool: Array<T> = []; // documents of keys the State does not keep, per batch
  private used: i32 = 0;
  private ci: i32 = -1;
  private spare: T | null = null; // returned after misuse, so the handler can go on to fail

  constructor(collection: string) {
    this.collection = collection;
    this.id = ++stateIds;
    keepers.push(this.kept);
  }

  /**
   * Makes this State keep nothing between batches: get decodes the stored document at every
   * key's first touch in every batch. For a Doc class that does not meet Doc's contract; call it
   * where the State is made, before the first batch. Returns this State.
   */
  decodeEveryBatch(): State<T> {
    this.kept.dropAll();
    this.kept.on = false;
    return this;
  }

  /** The document of key in this batch (see the class comment). Only during a handler call. */
  get<K>(key: K): T {
    const b = this.current("get");
    const k = this.kept;
    if (k.on) b.keptIndex = k.index;
    const e = b.entryFor<K>(this.ci, key, !k.on);
    b.keptIndex = null;
    this.found = false;
    if (e < 0) return this.spareDoc();
    const held = unchecked(b.typed[e]);
    if (held !== null) {
      if (held.stateId == this.id) {
        this.found = true;
        return changetype<T>(held);
      }
      b.misuse("State<" + nameof<T>() + ">.get " + b.name(e) + ": the document is held by another State in this batch");
      return this.spareDoc();
    }
    let s = -1;
    if (k.on) {
      const kp = b.keys.keyPtr(e) + 4, kl = b.keys.keyLen(e) - 4;
      // The key's slot: entry looked it up when it created the entry; else with the entry's hash.
      s = b.fresh ? b.keptSlot : k.index.findHashed(b.keys.hashAt(e) ^ prefixHash(<u32>this.ci), kp, kl);
      if (b.fresh) { // the key's first touch in the batch: ask the host, with the kept bytes if any
        if (s >= 0 && k.has(s)) {
          if (b.ask(e, k.ptr(s), k.len(s))) { // unchanged: the kept object as it is
            const d = changetype<T>(unchecked(k.docs[s]));
            unchecked(b.typed[e] = d);
            unchecked(b.dirty[e] = true);
            this.found = true;
            return d;
          }
          k.drop(s);
        } else {
          b.ask(e, 0, -1);
        }
      }
      if (s < 0) s = k.add(kp, kl);
    }
    const d = s >= 0 ? this.bound(s) : this.pooled();
    d.reset();
    // The stored document: from the host if the entry is new, else from this batch's writes.
    let dp: usize = 0, dl = -1;
    if (b.readLen >= 0) {
      dp = changetype<usize>(b.readBuf);
      dl = b.readLen;
    } else if (unchecked(b.docOff[e]) >= 0) {
      dp = changetype<usize>(b.arena) + <usize>unchecked(b.docOff[e]);
      dl = unchecked(b.docLen[e]);
    }
    this.found = dl >= 0;
    if (dl >= 0 && !d.decode(docReader.reset(dp, dl))) {
      b.misuse("stored document " + b.name(e) + " does not decode as " + nameof<T>() + ": " +
        String.UTF8.decodeUnsafe(dp, min(dl, 200)));
    }
    unchecked(b.typed[e] = d);
    unchecked(b.dirty[e] = true);
    return d;
  }

  /** Deletes key's document: written as a delete unless get creates it again in this batch. */
  delete<K>(key: K): void {
    const b = this.current("delete");
    const e = b.entryFor<K>(this.ci, key, false);
    if (e < 0) return;
    const held = unchecked(b.typed[e]);
    if (held !== null && held.stateId != this.id) {
      b.misuse("State<" + nameof<T>() + ">.delete " + b.name(e) + ": the document is held by another State in this batch");
      return;
    }
    const k = this.kept;
    if (k.on) {
      const s = k.index.findHashed(b.keys.hashAt(e) ^ prefixHash(<u32>this.ci), b.keys.keyPtr(e) + 4, b.keys.keyLen(e) - 4);
      if (s >= 0) k.drop(s);
    }
    unchecked(b.typed[e] = null);
    unchecked(b.docOff[e] = -1);
    unchecked(b.docLen[e] = 0);
    unchecked(b.dirty[e] = true);
  }

  /** The current batch, after starting this State's part of it (method: for the abort message). */
  private current(method: string): Batch {
    const b = batch;
    if (!b.active) throw new Error("State." + method + " outside a handler call");
    const k = this.kept;
    if (k.gen != b.gen) { // the first use in this batch
      k.gen = b.gen;
      if (k.index.size >= STATE_KEEP_LIMIT) k.dropAll();
      this.used = 0;
      this.ci = b.collIndex(this.collection);
    }
    return b;
  }

  /** The document bound to slot s (bound now to a spare or a new one if none is). */
  private bound(s: i32): T {
    const k = this.kept;
    const x = unchecked(k.docs[s]);
    if (x !== null) return changetype<T>(x);
    const d = k.spares.length > 0 ? changetype<T>(k.spares.pop()) : this.newDoc();
    d.keptSlot = s;
    unchecked(k.docs[s] = d);
    return d;
  }

  /** A pooled document for a key the State does not keep, for the rest of the batch. */
  private pooled(): T {
    let d: T;
    if (this.used < this.pool.length) {
      d = unchecked(this.pool[this.used]);
    } else {
      d = this.newDoc();
      this.pool.push(d);
    }
    this.used++;
    return d;
  }

  private newDoc(): T {
    const d = instantiate<T>();
    d.stateId = this.id;
    return d;
  }

  private spareDoc(): T {
    let d = this.spare;
    if (d === null) {
      d = instantiate<T>();
      this.spare = d;
    }
    d.reset();
    return d;
  }
}

// ---- output (ABI.md §4) ----

class Output {
  buf: ArrayBuffer = new ArrayBuffer(4096);
  len: i32 = 0;
  private w: JsonWriter = new JsonWriter();

  // @ts-ignore: decorator
  @inline reserve(n: i32): usize {
    if (this.len + n > this.buf.byteLength) this.grow(n);
    return changetype<usize>(this.buf) + <usize>this.len;
  }

  /** Makes room for n more bytes (reserve's rare path, kept out of line). */
  private grow(n: i32): void { this.buf = grownBuffer(this.buf, this.len, this.len + n); }

  write(batch: Batch): void {
    this.len = 0;
    let p = this.reserve(8);
    store<u32>(p, ABI_VERSION);
    this.len = 8;
    let count: u32 = 0;
    const keys = batch.keys;
    const w = this.w;
    for (let e = 0, n = keys.size; e < n; e++) {
      if (!unchecked(batch.dirty[e])) continue;
      let dp: usize = 0, dl = 0;
      const t = unchecked(batch.typed[e]);
      if (t !== null) {
        t.encode(w.begin());
        dp = w.end();
        dl = w.byteLength;
        if (dl > MAX_DOC_LEN) {
          batch.misuse("put " + batch.name(e) + ": document of " + dl.toString() + " bytes exceeds " + MAX_DOC_LEN.toString());
          return;
        }
        // Kept now, dropped (dropKept) if the batch fails after all.
        if (t.keptSlot >= 0) unchecked(keepers[t.stateId - 1]).keep(t.keptSlot, dp, dl);
      } else {
        const off = unchecked(batch.docOff[e]);
        if (off >= 0) {
          dp = changetype<usize>(batch.arena) + <usize>off;
          dl = unchecked(batch.docLen[e]);
        } else {
          dl = -1; // delete
        }
      }
      const coll = batch.collectionOf(e);
      const cl = coll.byteLength;
      const kl = keys.keyLen(e) - 4;
      const docLen = dl < 0 ? 0 : dl;
      p = this.reserve(1 + 2 + cl + 2 + kl + 4 + docLen);
      store<u8>(p, dl < 0 ? OP_DELETE : OP_PUT);
      store<u16>(p + 1, <u16>cl);
      memory.copy(p + 3, changetype<usize>(coll), cl);
      let q = p + 3 + <usize>cl;
      store<u16>(q, <u16>kl);
      memory.copy(q + 2, keys.keyPtr(e) + 4, kl);
      q += 2 + <usize>kl;
      store<u32>(q, <u32>docLen);
      q += 4;
      memory.copy(q, dp, docLen);
      q += docLen;
      this.len += <i32>(q - p);
      count++;
    }
    store<u32>(changetype<usize>(this.buf), count, 4);
    if (count == 0) this.len = 0;
  }
}

// ---- ABI exports ----

let handler: Handler | null = null;
let input: ArrayBuffer = new ArrayBuffer(0);
const batch = new Batch();
const output = new Output();

/** Registers h as the instance's handler (call it once, at the top level of the entry file). */
export function handle(h: Handler): void {
  handler = h;
}

function fail(msg: string): void {
  const n = utf8Into(msgScratch, msg);
  host_fail(changetype<usize>(msgScratch.buf), min(n, MAX_MESSAGE_LEN));
}

// collectGarbage's state: the linear memory's size in pages at the last collection, and the
// events handled since.
let pagesAtCollect: i32 = 0;
let eventsSinceCollect: u32 = 0;

/** Events between two collections at least (collectGarbage). */
const COLLECT_EVENTS: u32 = 64;
/** Events between two collections at most, however many documents are kept (collectGarbage). */
const COLLECT_EVENTS_MAX: u32 = 1024;

/**
 * Under `--runtime minimal` (the documented build; sdk/as/README.md "Why --runtime minimal"),
 * frees what earlier batches left unreachable. It runs at the start of a call into the guest, the
 * one point where no object lives only on the stack (minimal keeps no shadow stack, so it may
 * collect only then), once min(max(COLLECT_EVENTS, K / 2), COLLECT_EVENTS_MAX) events were
 * handled since the last collection, K being the number of documents the States keep (every
 * batch of 64 events or more while they keep at most 128; every 64 batches of one event), or
 * sooner when the memory grew. A collection marks what is live, kept documents included: spacing
 * collections by K / 2 events holds their cost to about 2 marks per event (16 at most, with
 * 16384 documents kept); the cap of 1024 events bounds the garbage between two collections. A
 * handler's heap so stays within what is live plus about twice the garbage of 1024 events (the
 * memory grows by doubling), against 64 events when nothing is kept: a handler that makes much
 * garbage per event and keeps many documents should use `--runtime incremental`, or make less
 * garbage. Other runtimes collect by themselves (incremental) or never (stub), and this does
 * nothing.
 */
function collectGarbage(): void {
  if (ASC_RUNTIME != 1) return; // 1: Runtime.Minimal (std/assembly/shared/runtime.ts)
  const pages = memory.size();
  if (pages <= pagesAtCollect) {
    if (eventsSinceCollect < COLLECT_EVENTS) return;
    let kept: u32 = 0;
    for (let i = 0, n = keepers.length; i < n; i++) kept += <u32>unchecked(keepers[i]).index.size;
    if (eventsSinceCollect < min(kept >> 1, COLLECT_EVENTS_MAX)) return;
  }
  __collect();
  pagesAtCollect = pages;
  eventsSinceCollect = 0;
}

/** ABI v1 marker (ABI.md §1); the host never calls it. */
export function projhost_abi_v1(): void {}

/** Returns a buffer of at least size bytes, valid until the next call into the guest. */
export function projhost_alloc(size: i32): usize {
  if (size < 0) return 0;
  if (input.byteLength < size || input.byteLength == 0) input = new ArrayBuffer(max(size, 1));
  return changetype<usize>(input);
}

/** Handles the batch at ptr..ptr+len (inside the projhost_alloc buffer); returns (out_ptr << 32) | out_len. */
export function projhost_handle(ptr: usize, len: i32): i64 {
  collectGarbage();
  const base = changetype<usize>(input);
  if (len < 0 || ptr < base || ptr - base + <usize>len > <usize>input.byteLength) {
    fail("guest: batch is not inside the buffer projhost_alloc returned");
    return 0;
  }
  const err = batch.begin(ptr, len);
  if (err !== null) {
    fail("guest: cannot decode batch: " + err);
    return 0;
  }
  eventsSinceCollect += <u32>batch.length;
  const h = handler;
  if (h === null) {
    fail("guest: no handler registered: call handle() at the top level of the entry file");
    return 0;
  }
  batch.active = true;
  openFields(true);
  const msg = h(batch);
  openFields(false);
  batch.active = false;
  if (msg !== null) {
    dropKept();
    // An empty message would reach the host as a blank reason.
    fail(msg.length != 0 ? msg : "guest: the handler returned an empty message (return null for success)");
    return 0;
  }
  if (batch.decodeError !== null) {
    dropKept();
    fail("guest: cannot decode batch: " + batch.decodeError!);
    return 0;
  }
  if (batch.usageError === null) output.write(batch);
  if (batch.usageError !== null) {
    dropKept();
    fail("guest: " + batch.usageError!);
    return 0;
  }
  if (output.len == 0) return 0;
  return (<i64>changetype<usize>(output.buf) << 32) | <i64>output.len;
}
