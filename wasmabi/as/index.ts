// projhost guest library for AssemblyScript 0.28 (ABI v1, see wasmabi/ABI.md).
//
// A handler is an entry file that re-exports the ABI functions and registers one function:
//
//   import { Batch, handle, JsonWriter } from "<path>/wasmabi/as/index";
//   export { projhost_abi_v1, projhost_alloc, projhost_handle } from "<path>/wasmabi/as/index";
//
//   function onBatch(b: Batch): string | null {
//     while (b.next()) {
//       const ev = b.event;
//       const j = ev.json();
//       const amount = j.getInt("amount");
//       if (!j.found) return "event seq " + ev.seq() + ": no integer amount";
//       ...
//       b.put("totals", ev.partitionKey(), doc);
//     }
//     return null; // or an error message: fails the batch
//   }
//   handle(onBatch);
//
//   asc handler.ts -o handler.wasm --runtime incremental -O3
//
// Semantics match the Go SDK (wasmabi/guest): put/delete go into a per-batch cache keyed by
// collection/key and only the final value of each key is emitted, in first-write order; read
// consults that cache first (read-your-writes, ABI.md §5) and asks the host once per key and batch.
// A handler returning a message fails the batch through the host's fail import; the host keeps the
// instance. A trap or abort (e.g. an assertion) poisons the instance.
//
// Strings: collection names and keys are AssemblyScript strings, sent to the host as UTF-8 (unpaired
// surrogates become U+FFFD). Documents are ArrayBuffers holding one JSON object.

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

// ---- limits (ABI.md §2, §4) ----

const ABI_VERSION: u32 = 1;
const MAX_SEQ_LEN: i32 = 129; // the Kinesis pattern 0|([1-9]\d{0,128})
const MAX_SHARD_ID_LEN: i32 = 256;
// In bytes: 256 Unicode characters (the Kinesis limit) of up to 4 UTF-8 bytes each.
const MAX_PARTITION_KEY_LEN: i32 = 1024;
const MAX_DATA_LEN: u32 = 1 << 20;
const MAX_COLLECTION_LEN: i32 = 255;
const MAX_DOC_KEY_LEN: i32 = 1024;
const MAX_DOC_LEN: i32 = 256 << 10;
const MAX_MESSAGE_LEN: i32 = 4096;
const OP_PUT: u8 = 1;
const OP_DELETE: u8 = 2;

/** Log levels of Batch.log (ABI.md §1). */
export const LEVEL_DEBUG: i32 = 0;
export const LEVEL_INFO: i32 = 1;
export const LEVEL_WARN: i32 = 2;
export const LEVEL_ERROR: i32 = 3;

// ---- UTF-8 helpers ----

/** Growable scratch memory for UTF-8 encodings; never shrinks. */
class Scratch {
  buf: ArrayBuffer = new ArrayBuffer(256);
  ptr(min: i32): usize {
    if (this.buf.byteLength < min) this.buf = new ArrayBuffer(max(min, this.buf.byteLength << 1));
    return changetype<usize>(this.buf);
  }
}

const keyScratch = new Scratch();
const collScratch = new Scratch();
const msgScratch = new Scratch();
const unescScratch = new Scratch();

/** Writes s as UTF-8 (unpaired surrogates -> U+FFFD) into sc and returns the byte length. */
function utf8Into(sc: Scratch, s: string): i32 {
  const p = sc.ptr(s.length * 3);
  return <i32>String.UTF8.encodeUnsafe(changetype<usize>(s), s.length, p, false, String.UTF8.ErrorMode.REPLACE);
}

/** Decodes one UTF-8 sequence at p (< end) like Go's utf8.DecodeRune: returns (rune << 3) | size, rune 0xFFFD size 1 when invalid. */
function decodeRune(p: usize, end: usize): u32 {
  const b0 = <u32>load<u8>(p);
  if (b0 < 0x80) return (b0 << 3) | 1;
  const n = end - p;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    if (n >= 2) {
      const b1 = <u32>load<u8>(p, 1);
      if ((b1 & 0xC0) == 0x80) return (((b0 & 0x1F) << 6 | (b1 & 0x3F)) << 3) | 2;
    }
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    if (n >= 3) {
      const b1 = <u32>load<u8>(p, 1), b2 = <u32>load<u8>(p, 2);
      const lo: u32 = b0 == 0xE0 ? 0xA0 : 0x80;
      const hi: u32 = b0 == 0xED ? 0x9F : 0xBF;
      if (b1 >= lo && b1 <= hi && (b2 & 0xC0) == 0x80) {
        return (((b0 & 0x0F) << 12 | (b1 & 0x3F) << 6 | (b2 & 0x3F)) << 3) | 3;
      }
    }
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    if (n >= 4) {
      const b1 = <u32>load<u8>(p, 1), b2 = <u32>load<u8>(p, 2), b3 = <u32>load<u8>(p, 3);
      const lo: u32 = b0 == 0xF0 ? 0x90 : 0x80;
      const hi: u32 = b0 == 0xF4 ? 0x8F : 0xBF;
      if (b1 >= lo && b1 <= hi && (b2 & 0xC0) == 0x80 && (b3 & 0xC0) == 0x80) {
        return (((b0 & 0x07) << 18 | (b1 & 0x3F) << 12 | (b2 & 0x3F) << 6 | (b3 & 0x3F)) << 3) | 4;
      }
    }
  }
  return (0xFFFD << 3) | 1;
}

function validUTF8(p: usize, end: usize): bool {
  while (p < end) {
    if (load<u8>(p) < 0x80) { p++; continue; }
    const r = decodeRune(p, end);
    if ((r >> 3) == 0xFFFD && (r & 7) == 1) return false;
    p += r & 7;
  }
  return true;
}

/** Appends rune r as UTF-8 at q and returns the new end. */
function putRune(q: usize, r: u32): usize {
  if (r < 0x80) { store<u8>(q, r); return q + 1; }
  if (r < 0x800) { store<u8>(q, 0xC0 | (r >> 6)); store<u8>(q, 0x80 | (r & 0x3F), 1); return q + 2; }
  if (r < 0x10000) {
    store<u8>(q, 0xE0 | (r >> 12)); store<u8>(q, 0x80 | ((r >> 6) & 0x3F), 1); store<u8>(q, 0x80 | (r & 0x3F), 2);
    return q + 3;
  }
  store<u8>(q, 0xF0 | (r >> 18)); store<u8>(q, 0x80 | ((r >> 12) & 0x3F), 1);
  store<u8>(q, 0x80 | ((r >> 6) & 0x3F), 2); store<u8>(q, 0x80 | (r & 0x3F), 3);
  return q + 4;
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
  private reader: JsonReader = new JsonReader();

  /** The decimal sequence number. */
  seq(): string { return String.UTF8.decodeUnsafe(this.seqPtr, this.seqLen); }
  /** The partition key. */
  partitionKey(): string { return String.UTF8.decodeUnsafe(this.keyPtr, this.keyLen); }
  /** A copy of the data bytes. */
  data(): ArrayBuffer {
    const b = new ArrayBuffer(this.dataLen);
    memory.copy(changetype<usize>(b), this.dataPtr, this.dataLen);
    return b;
  }
  /** A JSON field reader over the data (one reader per event object, reused by every call). */
  json(): JsonReader { return this.reader.reset(this.dataPtr, this.dataLen); }
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
  // The per-batch cache. Collections: few per handler, so a linear scan (pointer equality first:
  // names are usually the same string constant) beats hashing; each is validated once per batch.
  // Entries are keyed by (collection index u32, key UTF-8 bytes) in one BytesIndex, whose dense
  // indexes are first-touch order, the output order. Documents live in one arena reset per
  // batch: the cache allocates nothing per key once warmed up.
  private collNames: Array<string> = [];
  private collBytes: Array<ArrayBuffer> = [];
  keys: BytesIndex = new BytesIndex();
  docOff: Array<i32> = []; // -1: absent or deleted
  docLen: Array<i32> = [];
  dirty: Array<bool> = [];
  docs: ArrayBuffer = new ArrayBuffer(4096);
  docsLen: i32 = 0;
  private ckey: ArrayBuffer = new ArrayBuffer(64); // composite key scratch
  private readBuf: ArrayBuffer = new ArrayBuffer(4096);
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
    this.ptr = p + dl;
    this.left--;
    return true;
  }

  private bad(field: string): bool {
    this.decodeError = "event " + (this.count - this.left).toString() + ": " + field + " truncated or too long";
    return false;
  }

  /** Writes msg to the host log at level (LEVEL_*; the host truncates it to 4096 bytes). */
  log(level: i32, msg: string): void {
    const n = utf8Into(msgScratch, msg);
    host_log(level, changetype<usize>(msgScratch.buf), min(n, MAX_MESSAGE_LEN));
  }

  /**
   * Sets collection/key to doc, one JSON object of at most 256 KiB (copied: the caller may reuse
   * doc). Collection names are 1..255 bytes of [A-Za-z0-9_.-]; keys 1..1024 UTF-8 bytes without
   * NUL. Misuse fails the batch when the handler returns.
   */
  put(collection: string, key: string, doc: ArrayBuffer): void {
    const kl = utf8Into(keyScratch, key);
    this.putRaw(collection, changetype<usize>(keyScratch.buf), kl, changetype<usize>(doc), doc.byteLength);
  }

  /** put with the key as UTF-8 bytes kp..kp+kl and the document as bytes dp..dp+dl (both copied). */
  putRaw(collection: string, kp: usize, kl: i32, dp: usize, dl: i32): void {
    const e = this.entry(collection, kp, kl);
    if (e < 0) return;
    if (dl > MAX_DOC_LEN) {
      this.misuse("put " + collection + "/" + String.UTF8.decodeUnsafe(kp, kl) + ": document of " + dl.toString() + " bytes exceeds " + MAX_DOC_LEN.toString());
      return;
    }
    if (dl < 2 || load<u8>(dp) != 0x7B || load<u8>(dp + dl - 1) != 0x7D) {
      this.misuse("put " + collection + "/" + String.UTF8.decodeUnsafe(kp, kl) + ": document is not a JSON object (want {...})");
      return;
    }
    this.setDoc(e, dp, dl);
    unchecked(this.dirty[e] = true);
  }

  /** put of the object w holds (after its last field; w stays usable, see JsonWriter.end). */
  putWriter(collection: string, kp: usize, kl: i32, w: JsonWriter): void {
    const p = w.end();
    this.putRaw(collection, kp, kl, p, w.byteLength);
  }

  /** Deletes collection/key. */
  delete(collection: string, key: string): void {
    const kl = utf8Into(keyScratch, key);
    this.deleteRaw(collection, changetype<usize>(keyScratch.buf), kl);
  }

  /** delete with the key as UTF-8 bytes kp..kp+kl. */
  deleteRaw(collection: string, kp: usize, kl: i32): void {
    const e = this.entry(collection, kp, kl);
    if (e < 0) return;
    unchecked(this.docOff[e] = -1);
    unchecked(this.docLen[e] = 0);
    unchecked(this.dirty[e] = true);
  }

  /**
   * Returns the current document of collection/key, or null when there is none: this batch's own
   * latest put or delete of it if any, otherwise the host's read model (asked once per key and
   * batch). The result is a new copy: readRaw avoids the allocation.
   */
  read(collection: string, key: string): ArrayBuffer | null {
    const kl = utf8Into(keyScratch, key);
    if (!this.readRaw(collection, changetype<usize>(keyScratch.buf), kl)) return null;
    const d = new ArrayBuffer(this.docSize);
    memory.copy(changetype<usize>(d), this.docPtr, this.docSize);
    return d;
  }

  /**
   * read with the key as UTF-8 bytes kp..kp+kl, without allocating: returns whether there is a
   * document, whose bytes are then at docPtr..docPtr+docSize until the next put, delete or read.
   */
  readRaw(collection: string, kp: usize, kl: i32): bool {
    const known = this.keys.size;
    const e = this.entry(collection, kp, kl);
    if (e < 0) return false;
    if (e == known) { // new entry: ask the host
      const ci = this.collIndex;
      const cb = unchecked(this.collBytes[ci]);
      const cp = changetype<usize>(cb), cl = cb.byteLength;
      const kpp = this.keys.keyPtr(e) + 4; // the key bytes, stable until the next entry
      let n = host_read(cp, cl, kpp, kl, changetype<usize>(this.readBuf), this.readBuf.byteLength);
      if (n > this.readBuf.byteLength) {
        this.readBuf = new ArrayBuffer(n);
        n = host_read(cp, cl, kpp, kl, changetype<usize>(this.readBuf), this.readBuf.byteLength);
      }
      if (n < -1 || n > this.readBuf.byteLength) {
        this.misuse("read " + collection + "/" + String.UTF8.decodeUnsafe(kp, kl) + ": host returned invalid length " + n.toString());
      } else if (n >= 0) {
        this.setDoc(e, changetype<usize>(this.readBuf), n);
      }
    }
    const off = unchecked(this.docOff[e]);
    if (off < 0) return false;
    this.docPtr = changetype<usize>(this.docs) + <usize>off;
    this.docSize = unchecked(this.docLen[e]);
    return true;
  }

  private setDoc(e: i32, p: usize, n: i32): void {
    const need = this.docsLen + n;
    if (need > this.docs.byteLength) {
      const nb = new ArrayBuffer(max(need, this.docs.byteLength << 1));
      memory.copy(changetype<usize>(nb), changetype<usize>(this.docs), <usize>this.docsLen);
      this.docs = nb;
    }
    memory.copy(changetype<usize>(this.docs) + <usize>this.docsLen, p, n);
    unchecked(this.docOff[e] = this.docsLen);
    unchecked(this.docLen[e] = n);
    this.docsLen = need;
  }

  private collIndex: i32 = 0;

  /** The entry of collection/key (created absent and clean), or -1 after reporting misuse. Sets collIndex. */
  private entry(collection: string, kp: usize, kl: i32): i32 {
    const names = this.collNames;
    const nc = names.length;
    let ci = -1;
    for (let i = 0; i < nc; i++) {
      const c = unchecked(names[i]);
      if (changetype<usize>(c) == changetype<usize>(collection) || c == collection) { ci = i; break; }
    }
    if (ci < 0) {
      if (!validCollection(collection)) {
        this.misuse("invalid collection name \"" + collection + "\": want 1..255 bytes of [A-Za-z0-9_.-]");
        return -1;
      }
      ci = nc;
      names.push(collection);
      this.collBytes.push(String.UTF8.encode(collection));
    }
    this.collIndex = ci;
    let ok = kl > 0 && kl <= MAX_DOC_KEY_LEN;
    for (let i = 0; ok && i < kl; i++) ok = load<u8>(kp + <usize>i) != 0;
    if (!ok) {
      this.misuse("collection " + collection + ": invalid key \"" + String.UTF8.decodeUnsafe(kp, kl) + "\": want 1..1024 bytes without NUL");
      return -1;
    }
    if (this.ckey.byteLength < kl + 4) this.ckey = new ArrayBuffer(max(kl + 4, this.ckey.byteLength << 1));
    const ck = changetype<usize>(this.ckey);
    store<u32>(ck, <u32>ci);
    memory.copy(ck + 4, kp, kl);
    let e = this.keys.find(ck, kl + 4);
    if (e < 0) {
      e = this.keys.add(ck, kl + 4);
      this.docOff.push(-1);
      this.docLen.push(0);
      this.dirty.push(false);
    }
    return e;
  }

  /** The collection name of entry e. */
  collectionOf(e: i32): ArrayBuffer { return unchecked(this.collBytes[<i32>load<u32>(this.keys.keyPtr(e))]); }

  private misuse(msg: string): void {
    if (this.usageError === null) this.usageError = msg;
  }

  /** Prepares for a new batch at ptr..ptr+len; returns an error message or null. */
  begin(ptr: usize, len: i32): string | null {
    this.collNames.length = 0;
    this.collBytes.length = 0;
    this.keys.reset();
    this.docOff.length = 0;
    this.docLen.length = 0;
    this.dirty.length = 0;
    this.docsLen = 0;
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
    this.left = this.count;
    return null;
  }
}

// ---- output (ABI.md §4) ----

class Output {
  buf: ArrayBuffer = new ArrayBuffer(4096);
  len: i32 = 0;

  reserve(n: i32): usize {
    const need = this.len + n;
    if (need > this.buf.byteLength) {
      const nb = new ArrayBuffer(max(need, this.buf.byteLength << 1));
      memory.copy(changetype<usize>(nb), changetype<usize>(this.buf), this.len);
      this.buf = nb;
    }
    return changetype<usize>(this.buf) + <usize>this.len;
  }

  write(batch: Batch): void {
    this.len = 0;
    let p = this.reserve(8);
    store<u32>(p, ABI_VERSION);
    this.len = 8;
    let count: u32 = 0;
    const keys = batch.keys;
    for (let e = 0, n = keys.size; e < n; e++) {
      if (!unchecked(batch.dirty[e])) continue;
      const off = unchecked(batch.docOff[e]);
      const dl = off < 0 ? 0 : unchecked(batch.docLen[e]);
      const coll = batch.collectionOf(e);
      const cl = coll.byteLength;
      const kl = keys.keyLen(e) - 4;
      p = this.reserve(1 + 2 + cl + 2 + kl + 4 + dl);
      store<u8>(p, off < 0 ? OP_DELETE : OP_PUT);
      store<u16>(p + 1, <u16>cl);
      memory.copy(p + 3, changetype<usize>(coll), cl);
      let q = p + 3 + <usize>cl;
      store<u16>(q, <u16>kl);
      memory.copy(q + 2, keys.keyPtr(e) + 4, kl);
      q += 2 + <usize>kl;
      store<u32>(q, <u32>dl);
      q += 4;
      if (off >= 0) {
        memory.copy(q, changetype<usize>(batch.docs) + <usize>off, dl);
        q += dl;
      }
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
  const h = handler;
  if (h === null) {
    fail("guest: no handler registered: call handle() at the top level of the entry file");
    return 0;
  }
  const msg = h(batch);
  if (msg !== null) {
    fail(msg);
    return 0;
  }
  if (batch.decodeError !== null) {
    fail("guest: cannot decode batch: " + batch.decodeError!);
    return 0;
  }
  if (batch.usageError !== null) {
    fail("guest: " + batch.usageError!);
    return 0;
  }
  output.write(batch);
  if (output.len == 0) return 0;
  return (<i64>changetype<usize>(output.buf) << 32) | <i64>output.len;
}

// ---- JSON reader ----

const MAX_JSON_DEPTH: i32 = 10000;

/**
 * Reads top-level fields of one JSON object in memory (event data or a stored document) without
 * allocating, except for returned strings. Same rules as the Go SDK's JSONInt/JSONString: every
 * call scans from the start, syntax-checks the values it skips and stops at the field; the first
 * of duplicate keys wins; keys match after unescaping. After each get*, `found` tells whether
 * the field existed with the requested type.
 */
export class JsonReader {
  ptr: usize = 0;
  len: i32 = 0;
  /** Whether the last get* found its field with the requested type. */
  found: bool = false;
  private vs: usize = 0; // last value start
  private ve: usize = 0; // last value end
  private plain: bool = false; // last string value needs no unescaping

  /** Points the reader at ptr..ptr+len. */
  reset(ptr: usize, len: i32): JsonReader {
    this.ptr = ptr;
    this.len = len;
    this.found = false;
    return this;
  }

  /** Points the reader at a document buffer. */
  of(doc: ArrayBuffer): JsonReader { return this.reset(changetype<usize>(doc), doc.byteLength); }

  /** Whether the field exists (any type). */
  has(key: string): bool { return this.field(key); }

  /** The field as an integer literal (no fraction or exponent) fitting an i64; dflt if not. */
  getInt(key: string, dflt: i64 = 0): i64 {
    if (!this.field(key)) return dflt;
    let p = this.vs;
    const neg = load<u8>(p) == 0x2D;
    if (neg) p++;
    const n = this.ve - p;
    if (n == 0 || n > 19) { this.found = false; return dflt; }
    let u: u64 = 0;
    for (; p < this.ve; p++) {
      const c = <u32>load<u8>(p);
      if (c < 0x30 || c > 0x39) { this.found = false; return dflt; }
      u = u * 10 + <u64>(c - 0x30);
    }
    if (neg) {
      if (u > 0x8000000000000000) { this.found = false; return dflt; }
      return -(<i64>u);
    }
    if (u > 0x7FFFFFFFFFFFFFFF) { this.found = false; return dflt; }
    return <i64>u;
  }

  /** The field as a number (AssemblyScript's parseFloat); dflt if absent or not a number. */
  getFloat(key: string, dflt: f64 = 0): f64 {
    if (!this.field(key)) return dflt;
    const c = load<u8>(this.vs);
    if (c != 0x2D && (c < 0x30 || c > 0x39)) { this.found = false; return dflt; }
    return parseFloat(String.UTF8.decodeUnsafe(this.vs, this.ve - this.vs));
  }

  /** The field as true/false; dflt if absent or not a boolean. */
  getBool(key: string, dflt: bool = false): bool {
    if (!this.field(key)) return dflt;
    const c = load<u8>(this.vs);
    if (c == 0x74) return true;
    if (c == 0x66) return false;
    this.found = false;
    return dflt;
  }

  /** The field's unescaped string value (invalid UTF-8 and lone surrogates -> U+FFFD); null if absent or not a string. */
  getString(key: string): string | null {
    if (!this.field(key) || load<u8>(this.vs) != 0x22) { this.found = false; return null; }
    const s = this.vs + 1, e = this.ve - 1;
    if (this.plain) return String.UTF8.decodeUnsafe(s, e - s);
    const q = unescScratch.ptr(<i32>(e - s) * 3);
    const n = unescape(s, e, q);
    return String.UTF8.decodeUnsafe(q, n);
  }

  /** The field's raw JSON text; null if absent. */
  getRaw(key: string): string | null {
    if (!this.field(key)) return null;
    return String.UTF8.decodeUnsafe(this.vs, this.ve - this.vs);
  }

  private field(key: string): bool {
    this.found = false;
    const kl = utf8Into(keyScratch, key);
    const kp = changetype<usize>(keyScratch.buf);
    const end = this.ptr + <usize>this.len;
    let i = firstMember(this.ptr, end);
    while (i != 0) {
      i = nextMember(i, end);
      if (i == 0) return false;
      if (keyEqual(mKeyStart, mKeyEnd, mKeyPlain, kp, kl)) {
        this.vs = mValStart;
        this.ve = mValEnd;
        this.plain = mValPlain;
        this.found = true;
        return true;
      }
      if (mLast) return false;
    }
    return false;
  }
}

// The member scanner shared by JsonReader and JsonFields. nextMember leaves the parts of the
// member it parsed in these globals.
let mKeyStart: usize = 0;
let mKeyEnd: usize = 0;
let mKeyPlain = false;
let mValStart: usize = 0;
let mValEnd: usize = 0;
let mValPlain = false;
let mLast = false;

/** Position of the first member of the object at ptr..end; 0 when it is not an object or is empty. */
function firstMember(ptr: usize, end: usize): usize {
  let i = skipWS(ptr, end);
  if (i >= end || load<u8>(i) != 0x7B) return 0;
  i = skipWS(i + 1, end);
  if (i < end && load<u8>(i) == 0x7D) return 0;
  return i;
}

/**
 * Parses the member `"key": value` at i and the separator after it. Returns the position of the
 * next member (mLast: there is none), or 0 when the object is malformed there.
 */
function nextMember(i: usize, end: usize): usize {
  if (i >= end || load<u8>(i) != 0x22) return 0;
  let j = scanString(i, end);
  if (j == 0) return 0;
  mKeyStart = i + 1;
  mKeyEnd = j - 1;
  mKeyPlain = scanPlain;
  i = skipWS(j, end);
  if (i >= end || load<u8>(i) != 0x3A) return 0;
  i = skipWS(i + 1, end);
  mValStart = i;
  mValPlain = false;
  if (i < end && load<u8>(i) == 0x22) {
    j = scanString(i, end);
    if (j == 0) return 0;
    mValPlain = scanPlain;
  } else {
    j = skipValue(i, end, 1); // the object itself is level 1
    if (j == 0) return 0;
  }
  mValEnd = j;
  i = skipWS(j, end);
  if (i >= end) return 0;
  const c = load<u8>(i);
  if (c != 0x2C && c != 0x7D) return 0;
  mLast = c == 0x7D;
  return mLast ? i : skipWS(i + 1, end);
}

// scanString's second result: the string has neither escapes nor invalid UTF-8.
let scanPlain = false;

function skipWS(p: usize, end: usize): usize {
  while (p < end) {
    const c = load<u8>(p);
    if (c != 0x20 && c != 0x09 && c != 0x0A && c != 0x0D) break;
    p++;
  }
  return p;
}

function hexVal(c: u32): i32 {
  if (c >= 0x30 && c <= 0x39) return <i32>(c - 0x30);
  if (c >= 0x61 && c <= 0x66) return <i32>(c - 0x61 + 10);
  if (c >= 0x41 && c <= 0x46) return <i32>(c - 0x41 + 10);
  return -1;
}

function hex4(p: usize): u32 {
  return <u32>(hexVal(load<u8>(p)) << 12 | hexVal(load<u8>(p, 1)) << 8 | hexVal(load<u8>(p, 2)) << 4 | hexVal(load<u8>(p, 3)));
}

/** Checks the string at p (a quote) and returns the address after its closing quote, or 0; sets scanPlain. */
function scanString(p: usize, end: usize): usize {
  p++;
  const start = p;
  let plain = true, high = false;
  while (p < end) {
    const c = load<u8>(p);
    if (c == 0x22) {
      if (high && plain && !validUTF8(start, p)) plain = false;
      scanPlain = plain;
      return p + 1;
    }
    if (c == 0x5C) {
      plain = false;
      if (p + 1 >= end) return 0;
      const e = load<u8>(p + 1);
      if (e == 0x22 || e == 0x5C || e == 0x2F || e == 0x62 || e == 0x66 || e == 0x6E || e == 0x72 || e == 0x74) {
        p += 2;
      } else if (e == 0x75) {
        if (p + 6 > end) return 0;
        for (let k: usize = 2; k < 6; k++) if (hexVal(load<u8>(p + k)) < 0) return 0;
        p += 6;
      } else {
        return 0;
      }
    } else if (c < 0x20) {
      return 0;
    } else {
      if (c >= 0x80) high = true;
      p++;
    }
  }
  return 0;
}

function skipLiteral(p: usize, end: usize, lit: string): usize {
  const n = <usize>lit.length;
  if (end - p < n) return 0;
  for (let k: usize = 0; k < n; k++) if (<u32>load<u8>(p + k) != <u32>lit.charCodeAt(<i32>k)) return 0;
  return p + n;
}

function skipDigits(p: usize, end: usize): usize {
  while (p < end) {
    const c = load<u8>(p);
    if (c < 0x30 || c > 0x39) break;
    p++;
  }
  return p;
}

function skipNumber(p: usize, end: usize): usize {
  if (load<u8>(p) == 0x2D) p++;
  if (p < end && load<u8>(p) == 0x30) p++;
  else if (p < end && load<u8>(p) >= 0x31 && load<u8>(p) <= 0x39) p = skipDigits(p, end);
  else return 0;
  if (p < end && load<u8>(p) == 0x2E) {
    const j = skipDigits(p + 1, end);
    if (j == p + 1) return 0;
    p = j;
  }
  if (p < end && (load<u8>(p) == 0x65 || load<u8>(p) == 0x45)) {
    p++;
    if (p < end && (load<u8>(p) == 0x2B || load<u8>(p) == 0x2D)) p++;
    const j = skipDigits(p, end);
    if (j == p) return 0;
    p = j;
  }
  return p;
}

/** Checks the value at p and returns the address after it, or 0. */
function skipValue(p: usize, end: usize, depth: i32): usize {
  if (p >= end) return 0;
  const c = load<u8>(p);
  if (c == 0x22) return scanString(p, end);
  if (c == 0x7B) {
    if (depth >= MAX_JSON_DEPTH) return 0;
    p = skipWS(p + 1, end);
    if (p < end && load<u8>(p) == 0x7D) return p + 1;
    while (true) {
      if (p >= end || load<u8>(p) != 0x22) return 0;
      p = scanString(p, end);
      if (p == 0) return 0;
      p = skipWS(p, end);
      if (p >= end || load<u8>(p) != 0x3A) return 0;
      p = skipValue(skipWS(p + 1, end), end, depth + 1);
      if (p == 0) return 0;
      p = skipWS(p, end);
      if (p >= end) return 0;
      const d = load<u8>(p);
      if (d == 0x7D) return p + 1;
      if (d != 0x2C) return 0;
      p = skipWS(p + 1, end);
    }
  }
  if (c == 0x5B) {
    if (depth >= MAX_JSON_DEPTH) return 0;
    p = skipWS(p + 1, end);
    if (p < end && load<u8>(p) == 0x5D) return p + 1;
    while (true) {
      p = skipValue(p, end, depth + 1);
      if (p == 0) return 0;
      p = skipWS(p, end);
      if (p >= end) return 0;
      const d = load<u8>(p);
      if (d == 0x5D) return p + 1;
      if (d != 0x2C) return 0;
      p = skipWS(p + 1, end);
    }
  }
  if (c == 0x74) return skipLiteral(p, end, "true");
  if (c == 0x66) return skipLiteral(p, end, "false");
  if (c == 0x6E) return skipLiteral(p, end, "null");
  if (c == 0x2D || (c >= 0x30 && c <= 0x39)) return skipNumber(p, end);
  return 0;
}

/** Writes the value of the checked raw string content s..e as UTF-8 at q; returns its length. */
function unescape(s: usize, e: usize, q: usize): i32 {
  const q0 = q;
  while (s < e) {
    const c = <u32>load<u8>(s);
    if (c == 0x5C) {
      const x = <u32>load<u8>(s + 1);
      if (x == 0x75) {
        let r = hex4(s + 2);
        s += 6;
        if (r >= 0xD800 && r < 0xE000) {
          let r2: u32 = 0xFFFD;
          if (r < 0xDC00 && s + 6 <= e && load<u8>(s) == 0x5C && load<u8>(s + 1) == 0x75) {
            const lo = hex4(s + 2);
            if (lo >= 0xDC00 && lo < 0xE000) {
              r2 = 0x10000 + ((r - 0xD800) << 10) + (lo - 0xDC00);
              s += 6;
            }
          }
          r = r2;
        }
        q = putRune(q, r);
        continue;
      }
      let o: u32 = x; // '"', '\\', '/'
      if (x == 0x62) o = 0x08;
      else if (x == 0x66) o = 0x0C;
      else if (x == 0x6E) o = 0x0A;
      else if (x == 0x72) o = 0x0D;
      else if (x == 0x74) o = 0x09;
      store<u8>(q++, o);
      s += 2;
      continue;
    }
    if (c < 0x80) {
      store<u8>(q++, c);
      s++;
      continue;
    }
    const r = decodeRune(s, e);
    q = putRune(q, r >> 3);
    s += r & 7;
  }
  return <i32>(q - q0);
}

function keyEqual(s: usize, e: usize, plain: bool, kp: usize, kl: i32): bool {
  if (plain) return <i32>(e - s) == kl && memory.compare(s, kp, kl) == 0;
  const q = unescScratch.ptr(<i32>(e - s) * 3);
  const n = unescape(s, e, q);
  return n == kl && memory.compare(q, kp, kl) == 0;
}

// ---- JSON writer ----

const HEX = "0123456789abcdef";

/**
 * Builds one JSON object, byte-identical to the Go SDK's guest.Object for the same calls (ints,
 * strings, booleans, raw values; no floats). Reuse one writer: begin() resets it.
 */
export class JsonWriter {
  private buf: ArrayBuffer = new ArrayBuffer(256);
  private len: i32 = 0;
  private fields: i32 = 0;
  private closed: i32 = 0;

  /** Starts a new object, discarding the previous one. */
  begin(): JsonWriter {
    this.len = 0;
    this.fields = 0;
    this.byte(0x7B);
    return this;
  }

  /** Adds an integer field. */
  int(key: string, v: i64): JsonWriter {
    this.key(key);
    let p = this.reserve(20);
    let u: u64 = v < 0 ? <u64>(-v) : <u64>v; // -MIN wraps to 2^63, right as u64
    if (v < 0) { store<u8>(p++, 0x2D); this.len++; }
    let nd = 1;
    let t = u;
    while (t >= 10) { t /= 10; nd++; }
    let q = p + <usize>nd;
    do {
      store<u8>(--q, <u32>(u % 10) + 0x30);
      u /= 10;
    } while (u != 0);
    this.len += nd;
    return this;
  }

  /** Adds a true or false field. */
  bool(key: string, v: bool): JsonWriter {
    this.key(key);
    this.ascii(v ? "true" : "false");
    return this;
  }

  /** Adds a string field (escaped like the Go SDK; unpaired surrogates become U+FFFD). */
  string(key: string, v: string): JsonWriter {
    this.key(key);
    this.quoted(v);
    return this;
  }

  /** Adds a field whose value is the JSON text raw, copied unchecked: it must be valid JSON. */
  raw(key: string, raw: string): JsonWriter {
    this.key(key);
    const p = this.reserve(raw.length * 3);
    this.len += <i32>String.UTF8.encodeUnsafe(changetype<usize>(raw), raw.length, p, false, String.UTF8.ErrorMode.REPLACE);
    return this;
  }

  /**
   * Closes the object without copying it: returns a pointer to its bytes, valid until the next
   * call on this writer; byteLength is its size. Like finish(), it may be called again.
   */
  end(): usize {
    this.byte(0x7D);
    this.closed = this.len;
    this.len--;
    return changetype<usize>(this.buf);
  }

  /** The size in bytes of the object the last end() closed. */
  get byteLength(): i32 { return this.closed; }

  /** Closes the object and returns it as a new buffer of exactly its size. */
  finish(): ArrayBuffer {
    this.byte(0x7D);
    const out = new ArrayBuffer(this.len);
    memory.copy(changetype<usize>(out), changetype<usize>(this.buf), this.len);
    this.len--; // finish() may be called again
    return out;
  }

  private reserve(n: i32): usize {
    const need = this.len + n;
    if (need > this.buf.byteLength) {
      const nb = new ArrayBuffer(max(need, this.buf.byteLength << 1));
      memory.copy(changetype<usize>(nb), changetype<usize>(this.buf), this.len);
      this.buf = nb;
    }
    return changetype<usize>(this.buf) + <usize>this.len;
  }

  private byte(c: u32): void {
    store<u8>(this.reserve(1), c);
    this.len++;
  }

  private ascii(s: string): void {
    const p = this.reserve(s.length);
    for (let i = 0; i < s.length; i++) store<u8>(p + i, s.charCodeAt(i));
    this.len += s.length;
  }

  private key(k: string): void {
    if (this.fields > 0) this.byte(0x2C);
    this.fields++;
    this.quoted(k);
    this.byte(0x3A);
  }

  private quoted(s: string): void {
    const n = s.length;
    let p = this.reserve(n * 6 + 2); // worst case: every unit as \u00XX
    const p0 = p;
    store<u8>(p++, 0x22);
    for (let i = 0; i < n; i++) {
      let c = <u32>s.charCodeAt(i);
      if (c >= 0x20 && c != 0x22 && c != 0x5C && c < 0x80) {
        store<u8>(p++, c);
        continue;
      }
      if (c == 0x22 || c == 0x5C) { store<u8>(p++, 0x5C); store<u8>(p++, c); continue; }
      if (c < 0x20) {
        store<u8>(p++, 0x5C);
        if (c == 0x08) store<u8>(p++, 0x62);
        else if (c == 0x0C) store<u8>(p++, 0x66);
        else if (c == 0x0A) store<u8>(p++, 0x6E);
        else if (c == 0x0D) store<u8>(p++, 0x72);
        else if (c == 0x09) store<u8>(p++, 0x74);
        else {
          store<u8>(p++, 0x75); store<u8>(p++, 0x30); store<u8>(p++, 0x30);
          store<u8>(p++, HEX.charCodeAt(c >> 4)); store<u8>(p++, HEX.charCodeAt(c & 0xF));
        }
        continue;
      }
      if (c >= 0xD800 && c < 0xE000) {
        if (c < 0xDC00 && i + 1 < n) {
          const lo = <u32>s.charCodeAt(i + 1);
          if (lo >= 0xDC00 && lo < 0xE000) {
            p = putRune(p, 0x10000 + ((c - 0xD800) << 10) + (lo - 0xDC00));
            i++;
            continue;
          }
        }
        c = 0xFFFD;
      }
      p = putRune(p, c);
    }
    store<u8>(p++, 0x22);
    this.len += <i32>(p - p0);
  }
}

// ---- one-pass field reader and byte-keyed index (allocation-free hot paths) ----

/** Parses the raw JSON integer literal s..e like the Go SDK (fits an i64, no fraction/exponent); sets parsedOk. */
let parsedOk = false;
function parseIntRange(s: usize, e: usize): i64 {
  parsedOk = false;
  let p = s;
  const neg = load<u8>(p) == 0x2D;
  if (neg) p++;
  const n = e - p;
  if (n == 0 || n > 19) return 0;
  let u: u64 = 0;
  for (; p < e; p++) {
    const c = <u32>load<u8>(p);
    if (c < 0x30 || c > 0x39) return 0;
    u = u * 10 + <u64>(c - 0x30);
  }
  if (neg) {
    if (u > 0x8000000000000000) return 0;
    parsedOk = true;
    return -(<i64>u);
  }
  if (u > 0x7FFFFFFFFFFFFFFF) return 0;
  parsedOk = true;
  return <i64>u;
}

/**
 * Reads several top-level fields of a JSON object in one scan, the twin of the Go SDK's
 * guest.JSONFields: the same rules as JsonReader (first occurrence wins, values before the last
 * field needed are syntax-checked; fields after a syntax error are absent), but one pass for all
 * fields, keys encoded once, and no allocation: strings come back as bytes (`str`). Keys must be
 * distinct.
 */
export class JsonFields {
  private keys: StaticArray<ArrayBuffer>;
  private vs: StaticArray<usize>;
  private ve: StaticArray<usize>;
  private plain: StaticArray<bool>;
  private seen: StaticArray<bool>;
  private unesc: Scratch = new Scratch();
  /** Whether the last int/str call found its field with that type. */
  ok: bool = false;
  /** After str(): the unescaped UTF-8 bytes, aliasing the scanned data when the string has no
   * escapes or invalid UTF-8, else a scratch buffer valid until the next str(). */
  strPtr: usize = 0;
  strLen: i32 = 0;

  constructor(keys: Array<string>) {
    const n = keys.length;
    this.keys = new StaticArray<ArrayBuffer>(n);
    this.vs = new StaticArray<usize>(n);
    this.ve = new StaticArray<usize>(n);
    this.plain = new StaticArray<bool>(n);
    this.seen = new StaticArray<bool>(n);
    for (let i = 0; i < n; i++) this.keys[i] = String.UTF8.encode(keys[i]);
  }

  /** Scans the object at ptr..ptr+len, replacing the fields of the previous scan. */
  scan(ptr: usize, len: i32): JsonFields {
    const nk = this.keys.length;
    for (let k = 0; k < nk; k++) unchecked(this.seen[k] = false);
    let left = nk;
    const end = ptr + <usize>len;
    let i = firstMember(ptr, end);
    while (i != 0) {
      i = nextMember(i, end);
      if (i == 0) return this;
      for (let k = 0; k < nk; k++) {
        if (unchecked(this.seen[k])) continue;
        const kb = unchecked(this.keys[k]);
        if (keyEqual(mKeyStart, mKeyEnd, mKeyPlain, changetype<usize>(kb), kb.byteLength)) {
          unchecked(this.seen[k] = true);
          unchecked(this.vs[k] = mValStart);
          unchecked(this.ve[k] = mValEnd);
          unchecked(this.plain[k] = mValPlain);
          if (--left == 0) return this;
          break;
        }
      }
      if (mLast) return this;
    }
    return this;
  }

  /** Scans a document buffer. */
  of(doc: ArrayBuffer): JsonFields { return this.scan(changetype<usize>(doc), doc.byteLength); }

  /** Whether field i was found (any type). */
  has(i: i32): bool { return this.seen[i]; }

  /** Field i as an integer literal fitting an i64 (sets ok); 0 if not. */
  int(i: i32): i64 {
    if (!this.seen[i]) { this.ok = false; return 0; }
    const v = parseIntRange(unchecked(this.vs[i]), unchecked(this.ve[i]));
    this.ok = parsedOk;
    return v;
  }

  /** Whether field i is a string (also sets ok); its unescaped bytes are then at strPtr/strLen. */
  str(i: i32): bool {
    this.ok = false;
    if (!this.seen[i]) return false;
    const s = unchecked(this.vs[i]) + 1, e = unchecked(this.ve[i]) - 1;
    if (load<u8>(s - 1) != 0x22) return false;
    if (unchecked(this.plain[i])) {
      this.strPtr = s;
      this.strLen = <i32>(e - s);
    } else {
      const q = this.unesc.ptr(<i32>(e - s) * 3);
      this.strLen = unescape(s, e, q);
      this.strPtr = q;
    }
    this.ok = true;
    return true;
  }
}

/**
 * Maps byte strings to dense indexes 0, 1, 2, ... in insertion order (open addressing, FNV-1a),
 * copying the keys into an internal arena: no allocation per key once warmed up. For per-batch
 * aggregates keyed by raw bytes: reset() at the start of each batch.
 */
export class BytesIndex {
  private slots: StaticArray<i32> = new StaticArray<i32>(64); // index + 1; 0 = empty
  private offs: Array<i32> = [];
  private lens: Array<i32> = [];
  private hashes: Array<u32> = [];
  private arena: ArrayBuffer = new ArrayBuffer(256);
  private arenaLen: i32 = 0;

  /** The number of keys. */
  get size(): i32 { return this.offs.length; }

  /** Removes every key. */
  reset(): void {
    if (this.offs.length > 0) memory.fill(changetype<usize>(this.slots), 0, <usize>this.slots.length << 2);
    this.offs.length = 0;
    this.lens.length = 0;
    this.hashes.length = 0;
    this.arenaLen = 0;
  }

  /** The index of the key p..p+n, or -1. */
  find(p: usize, n: i32): i32 {
    const h = fnv(p, n);
    const mask = this.slots.length - 1;
    let s = <i32>h & mask;
    while (true) {
      const v = unchecked(this.slots[s]);
      if (v == 0) return -1;
      const i = v - 1;
      if (unchecked(this.hashes[i]) == h && unchecked(this.lens[i]) == n &&
        memory.compare(changetype<usize>(this.arena) + <usize>unchecked(this.offs[i]), p, n) == 0) return i;
      s = (s + 1) & mask;
    }
    return -1;
  }

  /** Adds the key p..p+n, which must not be present, and returns its index. p must not point into this index. */
  add(p: usize, n: i32): i32 {
    const i = this.offs.length;
    if ((i + 1) * 2 > this.slots.length) this.grow();
    const need = this.arenaLen + n;
    if (need > this.arena.byteLength) {
      const nb = new ArrayBuffer(max(need, this.arena.byteLength << 1));
      memory.copy(changetype<usize>(nb), changetype<usize>(this.arena), <usize>this.arenaLen);
      this.arena = nb;
    }
    memory.copy(changetype<usize>(this.arena) + <usize>this.arenaLen, p, n);
    const h = fnv(p, n);
    this.offs.push(this.arenaLen);
    this.lens.push(n);
    this.hashes.push(h);
    this.arenaLen += n;
    this.insert(h, i);
    return i;
  }

  /** The bytes of key i (valid until the next add). */
  keyPtr(i: i32): usize { return changetype<usize>(this.arena) + <usize>this.offs[i]; }
  keyLen(i: i32): i32 { return this.lens[i]; }

  private insert(h: u32, i: i32): void {
    const mask = this.slots.length - 1;
    let s = <i32>h & mask;
    while (unchecked(this.slots[s]) != 0) s = (s + 1) & mask;
    unchecked(this.slots[s] = i + 1);
  }

  private grow(): void {
    this.slots = new StaticArray<i32>(this.slots.length << 1);
    for (let i = 0, n = this.offs.length; i < n; i++) this.insert(unchecked(this.hashes[i]), i);
  }
}

function fnv(p: usize, n: i32): u32 {
  let h: u32 = 2166136261;
  for (let k = 0; k < n; k++) h = (h ^ <u32>load<u8>(p + <usize>k)) * 16777619;
  return h;
}
