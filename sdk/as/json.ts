// JSON, UTF-8 and byte-string building blocks of the projhost AssemblyScript library: the
// readers and the writer match the Go SDK's rules byte for byte (see README.md). Imported through
// index.ts; the exported helpers without a doc comment are for index.ts only.

// ---- UTF-8 helpers ----

/**
 * A new buffer of max(need, twice buf's size) holding buf's first used bytes: the growth step of
 * every growable buffer of the library. Callers check need > buf.byteLength themselves, inline:
 * the check is on hot paths, the growth is not (and inlining it everywhere measured slower in
 * wazero).
 */
export function grownBuffer(buf: ArrayBuffer, used: i32, need: i32): ArrayBuffer {
  const nb = new ArrayBuffer(max(need, buf.byteLength << 1));
  memory.copy(changetype<usize>(nb), changetype<usize>(buf), <usize>used);
  return nb;
}

/** Growable scratch memory; never shrinks. */
export class Scratch {
  buf: ArrayBuffer = new ArrayBuffer(256);
  ptr(min: i32): usize {
    if (min > this.buf.byteLength) this.buf = grownBuffer(this.buf, 0, min);
    return changetype<usize>(this.buf);
  }
}

const nameScratch = new Scratch();
const unescScratch = new Scratch();

/** Writes s as UTF-8 (unpaired surrogates -> U+FFFD) into sc and returns the byte length. */
export function utf8Into(sc: Scratch, s: string): i32 {
  const n = s.length;
  const p = sc.ptr(n * 3);
  return utf8At(p, s, n);
}

/** Writes the n units of s as UTF-8 at p (room for 3n bytes) and returns the byte length. */
function utf8At(p: usize, s: string, n: i32): i32 {
  if (!isAscii(s)) return <i32>String.UTF8.encodeUnsafe(changetype<usize>(s), n, p, false, String.UTF8.ErrorMode.REPLACE);
  const sp = changetype<usize>(s);
  for (let i = 0; i < n; i++) store<u8>(p + <usize>i, load<u16>(sp + (<usize>i << 1)));
  return n;
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

export function validUTF8(p: usize, end: usize): bool {
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

// ---- byte strings ----

/**
 * A read-only view of UTF-8 bytes: a string field of an event or document (JsonReader.getText),
 * the partition key (Event.key), or a Key being built. Views the library hands out are reused:
 * they are valid until their reader moves on (the next event, the next reset of the reader).
 * Keys of State, Batch.read, put and delete take a Bytes as well as a string, without creating
 * a string.
 */
export class Bytes {
  /** Where the bytes are in linear memory (for libraries; handlers need not touch it). */
  ptr: usize = 0;
  /** The number of bytes (for libraries: see length). */
  len: i32 = 0;

  /** The length in bytes. */
  get length(): i32 { return this.len; }

  /** Byte i (0 <= i < length; out of range aborts). */
  at(i: i32): u8 {
    if (<u32>i >= <u32>this.len) throw new RangeError("Bytes.at: index out of range");
    return load<u8>(this.ptr + <usize>i);
  }

  /** Whether the bytes equal v: a string (compared as UTF-8), a Bytes or an ArrayBuffer. */
  equals<T>(v: T): bool {
    if (isString<T>()) {
      const s = changetype<string>(v);
      if (isAscii(s)) return asciiEqual(this.ptr, this.len, s);
      const n = utf8Into(nameScratch, s);
      return n == this.len && memory.compare(changetype<usize>(nameScratch.buf), this.ptr, n) == 0;
    } else if (v instanceof Bytes) {
      const b = changetype<Bytes>(v);
      return b.len == this.len && memory.compare(b.ptr, this.ptr, this.len) == 0;
    } else if (v instanceof ArrayBuffer) {
      const b = changetype<ArrayBuffer>(v);
      return b.byteLength == this.len && memory.compare(changetype<usize>(b), this.ptr, this.len) == 0;
    } else {
      ERROR("Bytes.equals: want a string, Bytes or ArrayBuffer");
      return false;
    }
  }

  /** The bytes decoded as a new string (invalid UTF-8 -> U+FFFD). Allocates. */
  toString(): string { return String.UTF8.decodeUnsafe(this.ptr, this.len); }

  /** A copy of the bytes. Allocates. */
  toArrayBuffer(): ArrayBuffer {
    const b = new ArrayBuffer(this.len);
    memory.copy(changetype<usize>(b), this.ptr, this.len);
    return b;
  }
}

/**
 * A reusable byte string for building keys, e.g. a composite key origin-destination:
 *
 *   const routeKey = new Key();
 *   routes.get(routeKey.set(origin).append("-").append(dest));
 *
 * set and append take a string (appended as UTF-8), a Bytes (another Key too), an ArrayBuffer or
 * an integer (appended in decimal). Its memory grows as needed and is kept: building a key
 * allocates nothing once it has grown.
 */
export class Key extends Bytes {
  private buf: ArrayBuffer = new ArrayBuffer(64);

  constructor() {
    super();
    this.ptr = changetype<usize>(this.buf);
  }

  /** Empties the key. */
  clear(): Key {
    this.len = 0;
    return this;
  }

  /** Replaces the key by v (see append). */
  set<T>(v: T): Key {
    if (isReference<T>()) {
      if (changetype<usize>(v) == changetype<usize>(this)) return this;
    }
    this.len = 0;
    return this.append<T>(v);
  }

  /** Appends v: a string (as UTF-8; unpaired surrogates -> U+FFFD), a Bytes, an ArrayBuffer or an integer (decimal). */
  append<T>(v: T): Key {
    if (isString<T>()) {
      const s = changetype<string>(v);
      const n = s.length;
      this.len += utf8At(this.reserve(n * 3), s, n);
    } else if (isBoolean<T>()) {
      ERROR("Key.append: a bool is not a key part (AssemblyScript counts it as an integer): append a string");
    } else if (isInteger<T>()) {
      const p = this.reserve(20);
      // A u64 above 2^63 - 1 is no i64: it is written as unsigned (smaller types widen exactly).
      this.len += !isSigned<T>() && sizeof<T>() == 8 ? writeU64(p, <u64>v) : writeInt(p, <i64>v);
    } else if (v instanceof Bytes) {
      const b = changetype<Bytes>(v);
      const n = b.len;
      const p = this.reserve(n); // b may be this: read its bytes after the buffer grew
      memory.copy(p, b.ptr, n);
      this.len += n;
    } else if (v instanceof ArrayBuffer) {
      const b = changetype<ArrayBuffer>(v);
      const n = b.byteLength;
      memory.copy(this.reserve(n), changetype<usize>(b), n);
      this.len += n;
    } else {
      ERROR("Key.append: want a string, Bytes, ArrayBuffer or integer");
    }
    return this;
  }

  // @ts-ignore: decorator
  @inline private reserve(n: i32): usize {
    if (this.len + n > this.buf.byteLength) this.grow(n);
    const p = changetype<usize>(this.buf);
    this.ptr = p;
    return p + <usize>this.len;
  }

  /** Makes room for n more bytes (reserve's rare path, kept out of line). */
  private grow(n: i32): void { this.buf = grownBuffer(this.buf, this.len, this.len + n); }
}

/** Writes v in decimal at p (room for 20 bytes) and returns the number of bytes. */
function writeInt(p: usize, v: i64): i32 {
  let u: u64 = v < 0 ? <u64>(-v) : <u64>v; // -MIN wraps to 2^63, right as u64
  let sign = 0;
  if (v < 0) { store<u8>(p++, 0x2D); sign = 1; }
  if (u <= <u64>u32.MAX_VALUE) return sign + writeU32(p, <u32>u);
  return sign + writeU64(p, u);
}

/** Writes u in decimal at p (room for 20 bytes) and returns the number of bytes. */
function writeU64(p: usize, u: u64): i32 {
  let nd = 1;
  let t = u;
  while (t >= 10) { t /= 10; nd++; }
  let q = p + <usize>nd;
  do {
    store<u8>(--q, <u32>(u % 10) + 0x30);
    u /= 10;
  } while (u != 0);
  return nd;
}

// "00" to "99", two ASCII digits per entry, for writeU32.
const DIGIT_PAIRS = digitPairs();

function digitPairs(): StaticArray<u16> {
  const a = new StaticArray<u16>(100);
  for (let i: u32 = 0; i < 100; i++) unchecked(a[i] = <u16>((0x30 + i / 10) | ((0x30 + i % 10) << 8)));
  return a;
}

/**
 * writeInt for x < 2^32, two digits per step. Divisions by a constant are multiplications here:
 * binaryen leaves `x / 100` a division, which wazero compiles to a div instruction (tens of
 * cycles each). x * 0x51EB851F >> 37 is x / 100 for every u32 x (the multiplier is
 * ceil(2^37 / 100); checked for all 2^32 values when this was written).
 */
function writeU32(p: usize, x: u32): i32 {
  const nd = decimalDigits(x);
  let q = p + <usize>nd;
  while (x >= 100) {
    const t = <u32>((<u64>x * 0x51EB851F) >> 37);
    q -= 2;
    store<u16>(q, unchecked(DIGIT_PAIRS[x - t * 100]));
    x = t;
  }
  if (x >= 10) {
    store<u16>(q - 2, unchecked(DIGIT_PAIRS[x]));
  } else {
    store<u8>(q - 1, 0x30 + x);
  }
  return nd;
}

/** The number of decimal digits of x. */
function decimalDigits(x: u32): i32 {
  if (x < 100000) {
    if (x < 100) return x < 10 ? 1 : 2;
    return x < 1000 ? 3 : x < 10000 ? 4 : 5;
  }
  if (x < 10000000) return x < 1000000 ? 6 : 7;
  return x < 100000000 ? 8 : x < 1000000000 ? 9 : 10;
}

/** The first slot addrSlot probes for address a in a table of mask + 1 slots. */
// @ts-ignore: decorator
@inline function addrHome(a: usize, mask: i32): i32 { return <i32>((<u32>(a >> 1) * 0x9E3779B1) >> 16) & mask; }

/**
 * The slot of address a in addrs, an open-addressing table of addresses (0: empty; a power of
 * two long, at most half full): a's slot, or the empty slot where it goes.
 */
function addrSlot(addrs: StaticArray<usize>, a: usize): i32 {
  const mask = addrs.length - 1;
  let i = addrHome(a, mask);
  while (true) {
    const x = unchecked(addrs[i]);
    if (x == a || x == 0) return i;
    i = (i + 1) & mask;
  }
  return -1;
}

// The names a JsonReader looks up, as bytes. Static strings (literals, below __heap_base: they
// never move or change) are entered once in an open-addressing table by address (rnAddrs: 0
// empty; a string the handler builds at run time is above __heap_base, so it is never entered
// and never mistaken for one that is). Per entry: the name's bytes in rnBuf at rnOffs when it is
// ASCII (8-aligned, 8 bytes of padding after each, for keyBytesEqual; -1: not ASCII), and its
// slot in the host's field index (ABI.md §2.1) in rnSlots: SLOT_ASK until an event reader
// registers it, then the host's answer, SLOT_NONE when it refused. Other ASCII names are
// encoded per lookup into nameBytes.
// 128 slots at first: a handler's few names then rarely share a first slot (a name that does is
// found by a call, at every lookup).
let rnAddrs = new StaticArray<usize>(128);
let rnOffs = new StaticArray<i32>(128);
let rnSlots = new StaticArray<i32>(128);
let rnCount = 0;
let rnBuf = new ArrayBuffer(512);
let rnLen = 0;
const nameBytes = new Scratch();

// readerName's results: the name's bytes and length.
let rnPtr: usize = 0;
let rnKeyLen: i32 = 0;

/**
 * Sets rnPtr and rnKeyLen to the ASCII bytes of the name s (rnPtr then has 8 readable bytes
 * past every prefix of rnKeyLen rounded down to 8); false if s is not ASCII.
 */
// @ts-ignore: decorator
@inline function readerName(s: string): bool {
  const kp = changetype<usize>(s);
  if (kp < __heap_base) { // a hit at its first or second slot, inline
    const i = nameProbe(kp);
    if (i >= 0) return cachedName(i, s);
  }
  return readerNameSlow(s);
}

/**
 * The slot of rnAddrs holding address kp when it is kp's first or second (the usual place of a
 * name whose first is taken), else -1.
 */
// @ts-ignore: decorator
@inline function nameProbe(kp: usize): i32 {
  const mask = rnAddrs.length - 1;
  const i = addrHome(kp, mask);
  if (unchecked(rnAddrs[i]) == kp) return i;
  const j = (i + 1) & mask;
  return unchecked(rnAddrs[j]) == kp ? j : -1;
}

/** readerName's result for s, cached in slot i. */
// @ts-ignore: decorator
@inline function cachedName(i: i32, s: string): bool {
  const o = unchecked(rnOffs[i]);
  if (o < 0) return false; // not ASCII
  rnPtr = changetype<usize>(rnBuf) + <usize>o;
  rnKeyLen = s.length;
  return true;
}

/** readerName past its inline first probe. */
function readerNameSlow(s: string): bool {
  const kp = changetype<usize>(s);
  if (kp >= __heap_base) {
    if (!isAscii(s)) return false;
    const n = s.length;
    const p = nameBytes.ptr(n + 8);
    for (let i = 0; i < n; i++) store<u8>(p + <usize>i, load<u16>(kp + (<usize>i << 1)));
    rnPtr = p;
    rnKeyLen = n;
    return true;
  }
  return cachedName(nameEntry(s), s);
}

/** The slot of rnAddrs holding the static string s, entered (and its bytes encoded) if new. */
function nameEntry(s: string): i32 {
  const kp = changetype<usize>(s);
  let i = addrSlot(rnAddrs, kp);
  if (unchecked(rnAddrs[i]) == kp) return i;
  if ((rnCount + 1) * 2 > rnAddrs.length) {
    const addrs = rnAddrs, offs = rnOffs, slots = rnSlots;
    rnAddrs = new StaticArray<usize>(addrs.length << 1);
    rnOffs = new StaticArray<i32>(addrs.length << 1);
    rnSlots = new StaticArray<i32>(addrs.length << 1);
    for (let k = 0; k < addrs.length; k++) {
      const ak = unchecked(addrs[k]);
      if (ak == 0) continue;
      const j = addrSlot(rnAddrs, ak);
      unchecked(rnAddrs[j] = ak);
      unchecked(rnOffs[j] = unchecked(offs[k]));
      unchecked(rnSlots[j] = unchecked(slots[k]));
    }
    i = addrSlot(rnAddrs, kp);
  }
  rnCount++;
  unchecked(rnAddrs[i] = kp);
  unchecked(rnSlots[i] = SLOT_ASK);
  if (!isAscii(s)) {
    unchecked(rnOffs[i] = -1);
    return i;
  }
  const n = s.length, room = ((n + 7) & ~7) + 8;
  if (rnLen + room > rnBuf.byteLength) rnBuf = grownBuffer(rnBuf, rnLen, rnLen + room);
  const p = changetype<usize>(rnBuf) + <usize>rnLen;
  for (let k = 0; k < n; k++) store<u8>(p + <usize>k, load<u16>(kp + (<usize>k << 1)));
  unchecked(rnOffs[i] = rnLen);
  rnLen += room;
  return i;
}

// ---- the field index (ABI.md §2.1) ----

// @ts-ignore: decorator
@external("projhost", "field")
declare function host_field(namePtr: usize, nameLen: i32): i32;

/** The most fields a batch indexes (wasmabi.MaxIndexedFields): slots 0..63. */
export const MAX_INDEXED_FIELDS: i32 = 64;
const MAX_FIELD_NAME_LEN: i32 = 255;
const SLOT_NONE: i32 = -1; // rnSlots: never indexed (the host refused the name)
const SLOT_ASK: i32 = -2; // rnSlots: not registered yet

// Whether a handler call is under way: the field import may be called only then.
let fieldsOpen = false;

/** For index.ts: a handler call starts (true) or ends (false). */
export function openFields(open: bool): void { fieldsOpen = open; }

/**
 * The field-index slot of the static string s (below __heap_base): the host's answer to its
 * registration, which is made at its first lookup during a handler call; SLOT_NONE when the host
 * refused it, SLOT_ASK outside a handler call before that.
 */
// @ts-ignore: decorator
@inline function nameSlot(s: string): i32 {
  let i = nameProbe(changetype<usize>(s));
  if (i < 0) i = nameEntry(s);
  const slot = unchecked(rnSlots[i]);
  return slot != SLOT_ASK ? slot : registerName(i, s);
}

/** Registers the name s of rnAddrs slot i with the host (once: the answer is kept). */
function registerName(i: i32, s: string): i32 {
  if (!fieldsOpen) return SLOT_ASK;
  const n = utf8Into(nameBytes, s);
  let slot = SLOT_NONE;
  if (n >= 1 && n <= MAX_FIELD_NAME_LEN) {
    const r = host_field(changetype<usize>(nameBytes.buf), n);
    if (r >= 0 && r < MAX_INDEXED_FIELDS) slot = r;
  }
  unchecked(rnSlots[i] = slot);
  return slot;
}

/**
 * For index.ts: whether the f index entries at e (8 bytes each, ABI.md §2) fit the event data
 * at data..data+dl: every value inside it and at least one byte long (a string's two quotes
 * included), every absent field (offset 0xFFFFFFFF) of length 0.
 */
export function validIndex(e: usize, f: u32, data: usize, dl: u32): bool {
  for (let end = e + (<usize>f << 3); e < end; e += 8) {
    const off = load<u32>(e), n = load<u32>(e, 4);
    if (off == 0xFFFFFFFF) {
      if (n != 0) return false;
      continue;
    }
    const l = n & 0x7FFFFFFF;
    if (l == 0 || off > dl || l > dl - off) return false;
    if (l == 1 && load<u8>(data + <usize>off) == 0x22) return false;
  }
  return true;
}

/**
 * Whether the n bytes at a equal the n bytes at b, which has 8 readable bytes past every
 * multiple of 8 below n (readerName); a's bytes end at or before end, the end of the object.
 * Compares eight bytes at a time.
 */
// @ts-ignore: decorator
@inline function keyBytesEqual(a: usize, b: usize, n: i32, end: usize): bool {
  if (n >= 8) {
    let i = 0;
    for (; i + 8 <= n; i += 8) {
      if (load<u64>(a + <usize>i) != load<u64>(b + <usize>i)) return false;
    }
    return i == n || load<u64>(a + <usize>(n - 8)) == load<u64>(b + <usize>(n - 8));
  }
  if (a + 8 <= end) return ((load<u64>(a) ^ load<u64>(b)) & ((<u64>1 << (<u64>n << 3)) - 1)) == 0;
  for (let i = 0; i < n; i++) {
    if (load<u8>(a + <usize>i) != load<u8>(b + <usize>i)) return false;
  }
  return true;
}

/** Whether every UTF-16 unit of s is below 0x80 (four at a time). */
function isAscii(s: string): bool {
  const p = changetype<usize>(s);
  const n = <usize>s.length << 1;
  let i: usize = 0;
  for (; i + 8 <= n; i += 8) if (load<u64>(p + i) & 0xFF80FF80FF80FF80) return false;
  for (; i < n; i += 2) if (load<u16>(p + i) >= 0x80) return false;
  return true;
}

/** Whether the n bytes at p equal the ASCII string s. */
function asciiEqual(p: usize, n: i32, s: string): bool {
  if (s.length != n) return false;
  const sp = changetype<usize>(s);
  for (let i = 0; i < n; i++) {
    if (<u32>load<u8>(p + <usize>i) != <u32>load<u16>(sp + (<usize>i << 1))) return false;
  }
  return true;
}

// ---- JSON reader ----

const MAX_JSON_DEPTH: i32 = 10000;
const EMPTY_BYTES = new Bytes();

/**
 * Reads top-level fields of one JSON object in memory (event data or a stored document) by name.
 * Same rules as the Go SDK's JSONInt/JSONString: the first of duplicate keys wins, keys match
 * after unescaping, a field is found only if it and every member before it are well-formed (the
 * values before it are syntax-checked), at most 10000 nesting levels. The object is scanned once,
 * lazily: each get* looks among the members scanned so far, then scans on until it finds its
 * field, so reading several fields costs one pass.
 *
 * After each get*, `found` tells whether that field existed with the requested type; `ok` stays
 * true while every get* since the reader was pointed at the object found its field. Nothing is
 * allocated except the strings getString/getRaw/getFloat create; getText returns a view.
 *
 * The reader of Event.json() reads through the host's field index (ABI.md §2.1) when the event
 * has one: a name given as a string literal is registered with the host at its first lookup in
 * a handler call, and from the next batch on its value is where the index points, without a
 * scan. The host indexes only data that follows the document rule, where that gives the
 * answers the scan gives; other names, and other events, are scanned.
 */
export class JsonReader {
  ptr: usize = 0;
  len: i32 = 0;
  /** Whether the last get* found its field with the requested type. */
  found: bool = false;
  /** Whether every get* since reset/of found its field with the requested type. */
  ok: bool = true;
  // Members scanned so far: per member, 4 addresses in mem (key start and end without the
  // quotes, value start and end) and flags in fl (1: the key needs no unescaping, 2: the
  // string value needs none, 4: getText unescaped it). Scanned members are records base..n-1;
  // an event reader (forEvents) keeps records 0..MAX_INDEXED_FIELDS-1 for the values its
  // field index gives, slot s at record s (keys unknown, never compared).
  private base: i32 = 0;
  private n: i32 = 0;
  private mem: StaticArray<usize> = new StaticArray<usize>(32);
  private fl: StaticArray<u8> = new StaticArray<u8>(8);
  private texts: StaticArray<Bytes> = newViews(8); // getText views, one per member
  // A 64-bit Bloom filter of the plain member keys scanned so far (see keySig): a key whose bit
  // is clear is none of them, so a lookup goes straight on scanning. Off (anyKey) once a key
  // with escapes was scanned.
  private sigs: u64 = 0;
  private anyKey: bool = false;
  private next: usize = 0; // the next member to scan; 0: none (end of the object or malformed)
  private arena: ArrayBuffer = new ArrayBuffer(0); // unescaped getText values of this object
  private arenaLen: i32 = 0;
  // The field index of the event data (resetEvent): nf entries at idx (0 and 0: none), bit s
  // of got set once record s holds slot s's value; events: lookups register names.
  private events: bool = false;
  private idx: usize = 0;
  private nf: u32 = 0;
  private got: u64 = 0;

  /**
   * For the library (Event): makes this reader one over event data, which resetEvent points at
   * an event and its field index. Call once, on a new reader.
   */
  forEvents(): JsonReader {
    const c = MAX_INDEXED_FIELDS + 8;
    this.base = MAX_INDEXED_FIELDS;
    this.mem = new StaticArray<usize>(c << 2);
    this.fl = new StaticArray<u8>(c);
    this.texts = newViews(c);
    return this;
  }

  /**
   * For the library (Event.json): points a forEvents reader at the event data ptr..ptr+len
   * whose field index is the nf entries at idx (ABI.md §2; idx 0: not indexed, every field is
   * scanned). Lookups of static names register them with the host.
   */
  resetEvent(ptr: usize, len: i32, idx: usize, nf: u32): JsonReader {
    this.reset(ptr, len);
    this.events = true;
    this.idx = idx;
    this.nf = idx != 0 ? nf : 0;
    this.got = 0;
    return this;
  }

  /** Points the reader at the object ptr..ptr+len. */
  reset(ptr: usize, len: i32): JsonReader {
    this.ptr = ptr;
    this.len = len;
    this.found = false;
    this.ok = true;
    this.n = this.base;
    this.events = false;
    this.nf = 0;
    this.sigs = 0;
    this.anyKey = false;
    this.arenaLen = 0;
    this.next = firstMember(ptr, ptr + <usize>len);
    return this;
  }

  /** Points the reader at a document buffer. */
  of(doc: ArrayBuffer): JsonReader { return this.reset(changetype<usize>(doc), doc.byteLength); }

  /** Whether the field exists (any type). */
  has(key: string): bool {
    const f = this.field(key) >= 0;
    this.found = f;
    return f;
  }

  /** The field as an integer literal (no fraction or exponent) fitting an i64; dflt if not. */
  getInt(key: string, dflt: i64 = 0): i64 {
    const i = this.field(key);
    if (i >= 0) {
      const v = parseIntRange(this.at(i, 2), this.at(i, 3));
      if (parsedOk) return this.hit(v);
    }
    this.miss();
    return dflt;
  }

  /** The field as a number (AssemblyScript's parseFloat, which allocates); dflt if absent or not a number. */
  getFloat(key: string, dflt: f64 = 0): f64 {
    const i = this.field(key);
    if (i >= 0) {
      const s = this.at(i, 2);
      const c = load<u8>(s);
      if (c == 0x2D || (c >= 0x30 && c <= 0x39)) {
        this.found = true;
        return parseFloat(String.UTF8.decodeUnsafe(s, this.at(i, 3) - s));
      }
    }
    this.miss();
    return dflt;
  }

  /** The field as true/false; dflt if absent or not a boolean. */
  getBool(key: string, dflt: bool = false): bool {
    const i = this.field(key);
    if (i >= 0) {
      const c = load<u8>(this.at(i, 2));
      if (c == 0x74) return this.hit(true);
      if (c == 0x66) return this.hit(false);
    }
    this.miss();
    return dflt;
  }

  /**
   * The field's unescaped string value as a view (invalid UTF-8 and lone surrogates -> U+FFFD),
   * valid until the reader is pointed elsewhere; an empty view if absent or not a string. No
   * allocation once the reader's buffers have grown.
   */
  getText(key: string): Bytes {
    const i = this.field(key);
    if (i < 0 || load<u8>(this.at(i, 2)) != 0x22) {
      this.miss();
      return EMPTY_BYTES;
    }
    const t = unchecked(this.texts[i]);
    const fl = unchecked(this.fl[i]);
    if (fl & 4) return this.hit(t); // unescaped by an earlier getText of this object
    const s = this.at(i, 2) + 1, e = this.at(i, 3) - 1;
    if (fl & 2) {
      t.ptr = s;
      t.len = <i32>(e - s);
    } else {
      // Unescaped text takes at most 3 bytes per raw byte and each member is unescaped once, so
      // one arena of 3 * len holds every string of the object and never moves while views
      // point into it; twice that with a field index, whose records may repeat a scanned
      // member. Only an index whose values overlap (a host's bug) could find no room: then the
      // field is not found.
      const room = this.len * (this.nf != 0 ? 6 : 3);
      if (this.arenaLen == 0 && this.arena.byteLength < room) this.arena = new ArrayBuffer(room);
      if (this.arenaLen + <i32>(e - s) * 3 > this.arena.byteLength) {
        this.miss();
        return EMPTY_BYTES;
      }
      const q = changetype<usize>(this.arena) + <usize>this.arenaLen;
      t.ptr = q;
      t.len = unescape(s, e, q);
      this.arenaLen += t.len;
      unchecked(this.fl[i] = fl | 4);
    }
    return this.hit(t);
  }

  /** The field's unescaped string value (invalid UTF-8 and lone surrogates -> U+FFFD); null if absent or not a string. Allocates. */
  getString(key: string): string | null {
    const i = this.field(key);
    if (i < 0 || load<u8>(this.at(i, 2)) != 0x22) {
      this.miss();
      return null;
    }
    this.found = true;
    const s = this.at(i, 2) + 1, e = this.at(i, 3) - 1;
    if (unchecked(this.fl[i]) & 2) return String.UTF8.decodeUnsafe(s, e - s);
    const q = unescScratch.ptr(<i32>(e - s) * 3);
    const n = unescape(s, e, q);
    return String.UTF8.decodeUnsafe(q, n);
  }

  /** The field's raw JSON text; null if absent. Allocates. */
  getRaw(key: string): string | null {
    const i = this.field(key);
    if (i < 0) {
      this.miss();
      return null;
    }
    this.found = true;
    const s = this.at(i, 2);
    return String.UTF8.decodeUnsafe(s, this.at(i, 3) - s);
  }

  @inline private hit<T>(v: T): T {
    this.found = true;
    return v;
  }

  @inline private miss(): void {
    this.found = false;
    this.ok = false;
  }

  /** Address k (0 key start, 1 key end, 2 value start, 3 value end) of member i. */
  // @ts-ignore: decorator
  @inline private at(i: i32, k: i32): usize { return unchecked(this.mem[(i << 2) + k]); }

  /** The record of the first member named key, or -1. */
  private field(key: string): i32 {
    if (this.events && changetype<usize>(key) < __heap_base) {
      const slot = nameSlot(key);
      if (<u32>slot < this.nf) return this.indexed(slot);
    }
    if (!readerName(key)) return this.fieldSlow(key);
    const np = rnPtr, kl = rnKeyLen;
    const end = this.ptr + <usize>this.len;
    const n = this.n, base = this.base;
    if (n > base && (kl == 0 || this.anyKey ||
      (this.sigs & keySig(kl, load<u8>(np), load<u8>(np + <usize>(kl - 1)))) != 0)) {
      for (let i = base; i < n; i++) {
        const s = this.at(i, 0), e = this.at(i, 1);
        if (unchecked(this.fl[i]) & 1) {
          if (<i32>(e - s) == kl && keyBytesEqual(s, np, kl, end)) return i;
        } else if (this.keyIs(i, key)) {
          return i;
        }
      }
    }
    for (let i = this.scanNext(); i >= 0; i = this.scanNext()) {
      if (mKeyPlain) {
        if (<i32>(mKeyEnd - mKeyStart) == kl && keyBytesEqual(mKeyStart, np, kl, end)) return i;
      } else if (this.keyIs(i, key)) {
        return i;
      }
    }
    return -1;
  }

  /**
   * The record of field index slot s (< nf), filled from the index at its first lookup for this
   * event; -1 when the index says the data has no such field.
   */
  // @ts-ignore: decorator
  @inline private indexed(s: i32): i32 {
    const bit = <u64>1 << <u64>s;
    if (this.got & bit) return s;
    const e = this.idx + (<usize>s << 3);
    const off = load<u32>(e);
    if (off == 0xFFFFFFFF) return -1;
    const n = load<u32>(e, 4); // the length; bit 31: a string with an escape
    const v = this.ptr + <usize>off;
    const mem = this.mem, k = s << 2;
    unchecked(mem[k + 2] = v);
    unchecked(mem[k + 3] = v + <usize>(n & 0x7FFFFFFF));
    unchecked(this.fl[s] = <u8>((~n >> 30) & 2)); // 2: no unescaping needed (valid UTF-8: the host checked)
    this.got |= bit;
    return s;
  }

  /** field for a key that is not ASCII: compares UTF-8 bytes, members' keys unescaped. */
  private fieldSlow(key: string): i32 {
    for (let i = this.base, n = this.n; i < n; i++) {
      if (this.keyIs(i, key)) return i;
    }
    for (let i = this.scanNext(); i >= 0; i = this.scanNext()) {
      if (this.keyIs(i, key)) return i;
    }
    return -1;
  }

  /** Whether member i's key, unescaped, is key's UTF-8. */
  private keyIs(i: i32, key: string): bool {
    const kl = utf8Into(nameScratch, key);
    return keyEqual(this.at(i, 0), this.at(i, 1), (unchecked(this.fl[i]) & 1) != 0, changetype<usize>(nameScratch.buf), kl);
  }

  /**
   * Scans the next member and appends it (its parts are also left in the m* globals); returns
   * its index, or -1 at the end of the object or where it is malformed.
   */
  private scanNext(): i32 {
    if (this.next == 0) return -1;
    const r = nextMember(this.next, this.ptr + <usize>this.len);
    if (r == 0) {
      this.next = 0;
      return -1;
    }
    this.next = mLast ? 0 : r;
    const i = this.n;
    if (i == this.fl.length) {
      const c = i << 1;
      this.mem = grown(this.mem, c << 2);
      const fl = new StaticArray<u8>(c);
      memory.copy(changetype<usize>(fl), changetype<usize>(this.fl), <usize>i);
      this.fl = fl;
      const texts = newViews(c);
      for (let k = 0; k < i; k++) unchecked(texts[k] = unchecked(this.texts[k]));
      this.texts = texts;
    }
    const mem = this.mem, k = i << 2;
    unchecked(mem[k] = mKeyStart);
    unchecked(mem[k + 1] = mKeyEnd);
    unchecked(mem[k + 2] = mValStart);
    unchecked(mem[k + 3] = mValEnd);
    unchecked(this.fl[i] = <u8>((mKeyPlain ? 1 : 0) | (mValPlain ? 2 : 0)));
    if (!mKeyPlain || mKeyEnd == mKeyStart) {
      this.anyKey = true; // the filter holds plain, non-empty keys only
    } else {
      this.sigs |= keySig(<i32>(mKeyEnd - mKeyStart), load<u8>(mKeyStart), load<u8>(mKeyEnd - 1));
    }
    this.n = i + 1;
    return i;
  }
}

/** The Bloom filter bit of a key of n bytes whose first and last bytes (or ASCII units) are a and z. */
function keySig(n: i32, a: u32, z: u32): u64 {
  return <u64>1 << (((<u32>n * 0x9E3779B1) ^ (a * 0x85EBCA6B) ^ (z * 0xC2B2AE35)) >> 26);
}

function newViews(n: i32): StaticArray<Bytes> {
  const a = new StaticArray<Bytes>(n);
  for (let i = 0; i < n; i++) unchecked(a[i] = new Bytes());
  return a;
}

function grown(a: StaticArray<usize>, n: i32): StaticArray<usize> {
  const b = new StaticArray<usize>(n);
  memory.copy(changetype<usize>(b), changetype<usize>(a), <usize>a.length * sizeof<usize>());
  return b;
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
  if (j < end && load<u8>(j) == 0x3A) { // the colon right after the key: the common case
    i = j + 1;
  } else {
    i = skipWS(j, end);
    if (i >= end || load<u8>(i) != 0x3A) return 0;
    i++;
  }
  i = skipWS(i, end);
  mValStart = i;
  mValPlain = false;
  if (i >= end) return 0;
  const v = <u32>load<u8>(i);
  if (v == 0x22) {
    j = scanString(i, end);
    if (j == 0) return 0;
    mValPlain = scanPlain;
  } else if (v - 0x30 < 10 || v == 0x2D) {
    j = skipNumberFast(i, end);
  } else {
    j = skipValue(i, end, 1); // the object itself is level 1
  }
  if (j == 0) return 0;
  mValEnd = j;
  if (j >= end) return 0;
  let c = load<u8>(j);
  if (c != 0x2C && c != 0x7D) { // whitespace before the separator
    j = skipWS(j, end);
    if (j >= end) return 0;
    c = load<u8>(j);
    if (c != 0x2C && c != 0x7D) return 0;
  }
  mLast = c == 0x7D;
  return mLast ? j : skipWS(j + 1, end);
}

/**
 * skipNumber for the number at p (a digit or '-'), with a fast path for integers without a
 * leading zero: their digits are only skipped; any other number goes through skipNumber.
 */
// @ts-ignore: decorator
@inline function skipNumberFast(p: usize, end: usize): usize {
  let q = p;
  if (load<u8>(q) == 0x2D) q++;
  if (q >= end || <u32>load<u8>(q) - 0x31 >= 9) return skipNumber(p, end); // '0', or no digit
  q++;
  let c: u32 = 0;
  while (q < end) {
    c = <u32>load<u8>(q);
    if (c - 0x30 >= 10) break;
    q++;
  }
  if (q < end && (c == 0x2E || (c | 0x20) == 0x65)) return skipNumber(p, end); // a fraction or exponent
  return q;
}

// scanString's second result: the string has neither escapes nor invalid UTF-8.
let scanPlain = false;

/** The first byte from p on that is not JSON white space (or end); inline when there is none. */
// @ts-ignore: decorator
@inline function skipWS(p: usize, end: usize): usize {
  if (p < end && load<u8>(p) > 0x20) return p; // no white space: the common case of compact JSON
  return skipWSLoop(p, end);
}

function skipWSLoop(p: usize, end: usize): usize {
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
    if (p + 8 <= end) {
      // Eight bytes at a time while none needs a look: the lowest byte that is a quote, a
      // backslash, a control character or non-ASCII is flagged in m (bytes above it may be
      // flagged falsely by a borrow; they are looked at one by one when reached).
      const x = load<u64>(p);
      const q = x ^ 0x2222222222222222, b = x ^ 0x5C5C5C5C5C5C5C5C;
      const m = (((q - 0x0101010101010101) & ~q) | ((b - 0x0101010101010101) & ~b) |
        ((x - 0x2020202020202020) & ~x) | x) & 0x8080808080808080;
      if (m == 0) {
        p += 8;
        continue;
      }
      p += <usize>(ctz(m) >> 3);
    }
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
// JsonWriter's encodings of static-string keys: an open-addressing table by the string's
// address (0: empty) of offsets and lengths in skBuf, which holds each key as ,"key":.
let skAddrs = new StaticArray<usize>(64); // few keys share a first slot (see rnAddrs)
let skOffs = new StaticArray<i32>(64);
let skLens = new StaticArray<i32>(64);
let skBuf = new ArrayBuffer(256);
let skLen: i32 = 0;
let skCount: i32 = 0;

function growStaticKeys(): void {
  const addrs = skAddrs, offs = skOffs, lens = skLens;
  const n = addrs.length << 1;
  skAddrs = new StaticArray<usize>(n);
  skOffs = new StaticArray<i32>(n);
  skLens = new StaticArray<i32>(n);
  for (let j = 0; j < addrs.length; j++) {
    const a = unchecked(addrs[j]);
    if (a == 0) continue;
    const i = addrSlot(skAddrs, a);
    unchecked(skAddrs[i] = a);
    unchecked(skOffs[i] = offs[j]);
    unchecked(skLens[i] = lens[j]);
  }
}

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
    this.len += writeInt(this.reserve(20), v);
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

  // @ts-ignore: decorator
  @inline private reserve(n: i32): usize {
    if (this.len + n > this.buf.byteLength) this.grow(n);
    return changetype<usize>(this.buf) + <usize>this.len;
  }

  /** Makes room for n more bytes (reserve's rare path, kept out of line). */
  private grow(n: i32): void { this.buf = grownBuffer(this.buf, this.len, this.len + n); }

  // @ts-ignore: decorator
  @inline private byte(c: u32): void {
    store<u8>(this.reserve(1), c);
    this.len++;
  }

  private ascii(s: string): void {
    const p = this.reserve(s.length);
    const sp = changetype<usize>(s);
    for (let i = 0, n = s.length; i < n; i++) store<u8>(p + <usize>i, load<u16>(sp + (<usize>i << 1)));
    this.len += s.length;
  }

  private key(k: string): void {
    const kp = changetype<usize>(k);
    if (kp < __heap_base) {
      // A string of the module's static data (a literal) never changes or moves: its encoding
      // (,"k":) is made once, then copied.
      let i = addrHome(kp, skAddrs.length - 1); // a hit at its first slot, inline
      if (unchecked(skAddrs[i]) != kp) i = this.staticKey(kp);
      const first = <i32>(this.fields == 0); // no comma before the first field
      const n = unchecked(skLens[i]) - first;
      memory.copy(this.reserve(n), changetype<usize>(skBuf) + <usize>(unchecked(skOffs[i]) + first), n);
      this.len += n;
      this.fields++;
      return;
    }
    if (this.fields > 0) this.byte(0x2C);
    this.fields++;
    this.quoted(k);
    this.byte(0x3A);
  }

  /** The slot of skAddrs holding the static string at kp, its encoding made on first use. */
  private staticKey(kp: usize): i32 {
    const i = addrSlot(skAddrs, kp);
    if (unchecked(skAddrs[i]) == kp) return i;
    if ((skCount + 1) * 2 > skAddrs.length) {
      growStaticKeys();
      return this.staticKey(kp);
    }
    // Encode ,"k": at the end of skBuf with this writer's code, then restore the writer.
    const len = this.len, fields = this.fields, buf = this.buf;
    this.buf = skBuf;
    this.len = skLen;
    this.byte(0x2C);
    this.quoted(changetype<string>(kp));
    this.byte(0x3A);
    skBuf = this.buf;
    unchecked(skAddrs[i] = kp);
    unchecked(skOffs[i] = skLen);
    unchecked(skLens[i] = this.len - skLen);
    skLen = this.len;
    skCount++;
    this.buf = buf;
    this.len = len;
    this.fields = fields;
    return i;
  }

  private quoted(s: string): void {
    const n = s.length;
    const sp = changetype<usize>(s);
    let p = this.reserve(n * 6 + 2); // worst case: every unit as \u00XX
    const p0 = p;
    store<u8>(p++, 0x22);
    for (let i = 0; i < n; i++) {
      let c = <u32>load<u16>(sp + (<usize>i << 1));
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
          const lo = <u32>load<u16>(sp + (<usize>(i + 1) << 1));
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
  // Per key i, at 3i: its offset in the arena, its length and its hash. One array grown by
  // hand rather than three Arrays: an add is then stores, not pushes.
  private meta: StaticArray<i32> = new StaticArray<i32>(96);
  private n: i32 = 0;
  private arena: ArrayBuffer = new ArrayBuffer(256);
  private arenaLen: i32 = 0;

  /** The number of keys. */
  get size(): i32 { return this.n; }

  /** Removes every key. */
  reset(): void {
    if (this.n > 0) memory.fill(changetype<usize>(this.slots), 0, <usize>this.slots.length << 2);
    this.n = 0;
    this.arenaLen = 0;
  }

  /** The hash of the key the last find looked up (addHashed takes it). */
  lastHash: u32 = 0;

  /** The index of the key p..p+n, or -1. */
  find(p: usize, n: i32): i32 { return this.findHashed(fnv(p, n), p, n); }

  /**
   * find with the key's hash h (the FNV-1a of the bytes p..p+n that find computes), known from
   * elsewhere: the hash of a prefixed key is its bytes' hash xored with prefixHash(prefix).
   */
  findHashed(h: u32, p: usize, n: i32): i32 {
    this.lastHash = h;
    const mask = this.slots.length - 1;
    const meta = this.meta;
    let s = <i32>h & mask;
    while (true) {
      const v = unchecked(this.slots[s]);
      if (v == 0) return -1;
      const i = v - 1, m = i * 3;
      if (<u32>unchecked(meta[m + 2]) == h && unchecked(meta[m + 1]) == n &&
        memory.compare(changetype<usize>(this.arena) + <usize>unchecked(meta[m]), p, n) == 0) return i;
      s = (s + 1) & mask;
    }
    return -1;
  }

  /**
   * The index of the key made of the 4 bytes of prefix (little-endian) then p..p+n, or -1,
   * without building it; lastHash is then its hash, for addPrefixed. Its hash is not find's but
   * find's hash of p..p+n xored with prefixHash(prefix) (see hashAt): keys added that way are found by
   * findPrefixed only.
   */
  findPrefixed(prefix: u32, p: usize, n: i32): i32 {
    const h = fnv(p, n) ^ prefixHash(prefix);
    this.lastHash = h;
    const mask = this.slots.length - 1;
    const meta = this.meta;
    let s = <i32>h & mask;
    while (true) {
      const v = unchecked(this.slots[s]);
      if (v == 0) return -1;
      const i = v - 1, m = i * 3;
      if (<u32>unchecked(meta[m + 2]) == h && unchecked(meta[m + 1]) == n + 4) {
        const q = changetype<usize>(this.arena) + <usize>unchecked(meta[m]);
        if (load<u32>(q) == prefix && memory.compare(q + 4, p, n) == 0) return i;
      }
      s = (s + 1) & mask;
    }
    return -1;
  }

  /** Adds the key p..p+n, which must not be present, and returns its index. p must not point into this index. */
  add(p: usize, n: i32): i32 { return this.addHashed(p, n, fnv(p, n)); }

  /** add with the key's hash h (lastHash after a find of the same key). */
  addHashed(p: usize, n: i32, h: u32): i32 {
    const q = this.room(n);
    memory.copy(q, p, n);
    return this.added(n, h);
  }

  /**
   * Adds the key made of the 4 bytes of prefix then p..p+n, which must not be present, with its
   * hash h (lastHash after findPrefixed of the same key), and returns its index.
   */
  addPrefixed(prefix: u32, p: usize, n: i32, h: u32): i32 {
    const q = this.room(n + 4);
    store<u32>(q, prefix);
    memory.copy(q + 4, p, n);
    return this.added(n + 4, h);
  }

  /** The hash key i was added with (for a prefixed key, xor prefixHash(prefix) gives find's hash of its bytes). */
  hashAt(i: i32): u32 { return <u32>unchecked(this.meta[this.at(i) + 2]); }

  /** The bytes of key i (valid until the next add). */
  keyPtr(i: i32): usize { return changetype<usize>(this.arena) + <usize>unchecked(this.meta[this.at(i)]); }
  keyLen(i: i32): i32 { return unchecked(this.meta[this.at(i) + 1]); }

  /** The meta offset of key i; a RangeError if there is no key i. */
  // @ts-ignore: decorator
  @inline private at(i: i32): i32 {
    if (<u32>i >= <u32>this.n) noKey(i);
    return i * 3;
  }

  /** Where the next key of n bytes goes in the arena (grown if need be). */
  private room(n: i32): usize {
    if (this.arenaLen + n > this.arena.byteLength) this.arena = grownBuffer(this.arena, this.arenaLen, this.arenaLen + n);
    return changetype<usize>(this.arena) + <usize>this.arenaLen;
  }

  /** Records the key of n bytes just copied to room(n), with hash h; returns its index. */
  private added(n: i32, h: u32): i32 {
    const i = this.n;
    if ((i + 1) * 2 > this.slots.length) this.grow();
    let meta = this.meta;
    const m = i * 3;
    if (m + 3 > meta.length) {
      const bigger = new StaticArray<i32>(meta.length << 1);
      memory.copy(changetype<usize>(bigger), changetype<usize>(meta), <usize>m << 2);
      this.meta = meta = bigger;
    }
    unchecked(meta[m] = this.arenaLen);
    unchecked(meta[m + 1] = n);
    unchecked(meta[m + 2] = <i32>h);
    this.arenaLen += n;
    this.n = i + 1;
    this.insert(h, i);
    return i;
  }

  private insert(h: u32, i: i32): void {
    const mask = this.slots.length - 1;
    let s = <i32>h & mask;
    while (unchecked(this.slots[s]) != 0) s = (s + 1) & mask;
    unchecked(this.slots[s] = i + 1);
  }

  private grow(): void {
    this.slots = new StaticArray<i32>(this.slots.length << 1);
    for (let i = 0, n = this.n; i < n; i++) this.insert(<u32>unchecked(this.meta[i * 3 + 2]), i);
  }
}

function noKey(i: i32): void {
  throw new RangeError("BytesIndex: no key " + i.toString());
}

function fnv(p: usize, n: i32): u32 { return fnvMore(2166136261, p, n); }

/** What a prefix adds to a prefixed key's hash (xor). */
// @ts-ignore: decorator
@inline export function prefixHash(prefix: u32): u32 { return prefix * 0x9E3779B1; }

/** FNV-1a: h continued over the bytes p..p+n. */
function fnvMore(h: u32, p: usize, n: i32): u32 {
  for (let k = 0; k < n; k++) h = (h ^ <u32>load<u8>(p + <usize>k)) * 16777619;
  return h;
}
