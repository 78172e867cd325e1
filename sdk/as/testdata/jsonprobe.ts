// Test module for sdk/as/json_test.go: exposes the library's JsonReader and JsonWriter so the
// Go tests can check they agree with the Go SDK byte for byte. Not an ABI v1 handler.
import { JsonReader, JsonWriter, Key } from "../index";

let input = new ArrayBuffer(0);
let result = new ArrayBuffer(0);
let found: bool = false;
const reader = new JsonReader();
const writer = new JsonWriter();

/**
 * Returns a buffer of n bytes for the next probe's input. Built with `--runtime minimal`, this
 * module is not a handler (the library's projhost_handle collects garbage), so it collects here,
 * at the start of each probe, where nothing lives only on the stack.
 */
export function alloc(n: i32): usize {
  if (ASC_RUNTIME == 1) __collect(); // 1: Runtime.Minimal
  input = new ArrayBuffer(n);
  return changetype<usize>(input);
}

function keyAt(off: i32, len: i32): string {
  return String.UTF8.decodeUnsafe(changetype<usize>(input) + <usize>off, len);
}

function setResult(s: string | null): void {
  found = s !== null;
  result = s === null ? new ArrayBuffer(0) : String.UTF8.encode(s, false, String.UTF8.ErrorMode.REPLACE);
}

/** Whether the last probe found its field. */
export function lastFound(): i32 { return found ? 1 : 0; }
/** The UTF-8 result of the last string probe. */
export function resultPtr(): usize { return changetype<usize>(result); }
export function resultLen(): i32 { return result.byteLength; }

// Input layout for the get* probes: data at 0..dl, key at dl..dl+kl.
export function probeInt(dl: i32, kl: i32): i64 {
  const v = reader.reset(changetype<usize>(input), dl).getInt(keyAt(dl, kl));
  found = reader.found;
  return v;
}

export function probeBool(dl: i32, kl: i32): i32 {
  const v = reader.reset(changetype<usize>(input), dl).getBool(keyAt(dl, kl));
  found = reader.found;
  return v ? 1 : 0;
}

export function probeString(dl: i32, kl: i32): void {
  setResult(reader.reset(changetype<usize>(input), dl).getString(keyAt(dl, kl)));
}

export function probeRaw(dl: i32, kl: i32): void {
  setResult(reader.reset(changetype<usize>(input), dl).getRaw(keyAt(dl, kl)));
}

// Input layout for write: key at 0..kl, string value at kl..kl+vl; writes
// {key: value, "i": i, "b": b} and returns it as the result.
export function write(kl: i32, vl: i32, i: i64, b: i32): void {
  const k = keyAt(0, kl), v = keyAt(kl, vl);
  const out = writer.begin().string(k, v).int("i", i).bool("b", b != 0).finish();
  result = out;
  found = true;
}

export function probeText(dl: i32, kl: i32): void {
  const t = reader.reset(changetype<usize>(input), dl).getText(keyAt(dl, kl));
  found = reader.found;
  result = t.toArrayBuffer();
}

// Input layout for probeSeq: data at 0..dl, then keys separated by NUL (kl bytes). It reads
// every key in turn with getRaw on one reader (the reader's members scanned so far are reused);
// the result holds, per key, "1" and the raw value or "0", then a NUL. lastFound is the reader's
// ok: whether every key was found.
export function probeSeq(dl: i32, kl: i32): void {
  const keys = keyAt(dl, kl).split("\0");
  reader.reset(changetype<usize>(input), dl);
  let out = "";
  for (let i = 0; i < keys.length; i++) {
    const r = reader.getRaw(keys[i]);
    out += (r === null ? "0" : "1" + r) + "\0";
  }
  found = reader.ok;
  result = String.UTF8.encode(out, false, String.UTF8.ErrorMode.REPLACE);
}

// writeLiterals writes two objects with string-literal keys (the writer encodes a literal key
// once and copies it after: keys with escapes, non-ASCII keys, more keys than its first table
// holds, a literal key first and after a dynamic one) and returns them separated by a NUL.
export function writeLiterals(): void {
  const w = writer.begin();
  w.int("\"q\\u", 0);
  w.int("ключ", 1);
  w.int("tab\t", 2);
  w.int("😀", 3);
  w.int("k00", 4);
  w.int("k01", 5);
  w.int("k02", 6);
  w.int("k03", 7);
  w.int("k04", 8);
  w.int("k05", 9);
  w.int("k06", 10);
  w.int("k07", 11);
  w.int("k08", 12);
  w.int("k09", 13);
  w.int("k10", 14);
  w.int("k11", 15);
  w.int("k12", 16);
  w.int("k13", 17);
  w.int("k14", 18);
  w.int("k15", 19);
  w.int("k16", 20);
  w.int("k17", 21);
  w.int("k18", 22);
  w.int("k19", 23);
  w.int("k20", 24);
  w.int("k21", 25);
  w.int("k22", 26);
  w.int("k23", 27);
  w.int("k24", 28);
  w.int("k25", 29);
  w.int("k26", 30);
  w.int("k27", 31);
  w.int("k28", 32);
  w.int("k29", 33);
  w.int("k30", 34);
  w.int("k31", 35);
  w.int("k32", 36);
  w.int("k33", 37);
  w.int("k34", 38);
  w.int("k35", 39);
  w.int("k36", 40);
  w.int("k37", 41);
  w.int("k38", 42);
  w.int("k39", 43);
  const a = w.finish();
  const b = writer.begin().int("k05", 5).string(keyAt(0, 0), "dyn").int("k00", 0).int("\"q\\u", 1).finish();
  const out = new Uint8Array(a.byteLength + 1 + b.byteLength);
  out.set(Uint8Array.wrap(a), 0);
  out.set(Uint8Array.wrap(b), a.byteLength + 1);
  result = out.buffer;
  found = true;
}

// readLiterals reads the object at 0..dl with string-literal names (JsonReader encodes a literal
// name once, in a table that grows past 64 names; non-ASCII names take the slow path) and
// returns "v," per name: its integer value, or x when not found. Each name is read twice, the
// second time among the members already scanned.
export function readLiterals(dl: i32): void {
  let out = "";
  for (let pass = 0; pass < 2; pass++) {
    const r = pass == 0 ? reader.reset(changetype<usize>(input), dl) : reader;
    let v: i64 = 0;
  v = r.getInt("\"q\\u", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("ключ", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("tab\t", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("😀", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("a", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("abcdefg", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("abcdefgh", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("abcdefghi", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("destination_airport", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k00", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k01", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k02", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k03", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k04", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k05", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k06", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k07", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k08", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k09", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k10", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k11", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k12", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k13", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k14", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k15", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k16", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k17", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k18", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k19", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k20", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k21", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k22", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k23", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k24", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k25", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k26", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k27", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k28", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k29", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k30", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k31", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k32", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k33", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k34", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k35", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k36", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k37", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k38", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k39", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k40", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k41", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k42", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k43", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k44", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k45", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k46", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k47", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k48", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k49", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k50", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k51", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k52", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k53", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k54", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k55", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k56", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k57", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k58", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k59", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k60", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k61", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k62", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k63", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k64", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k65", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k66", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k67", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k68", -1); out += (r.found ? v.toString() : "x") + ",";
  v = r.getInt("k69", -1); out += (r.found ? v.toString() : "x") + ",";
  }
  result = String.UTF8.encode(out);
  found = true;
}

// keyInts builds a Key of integers of every width and signedness at their limits, separated by
// commas (Key.append writes an integer in decimal, unsigned ones without a sign).
export function keyInts(): void {
  const k = new Key();
  k.append(i64.MIN_VALUE).append(",").append(i64.MAX_VALUE).append(",").append(<i64>-4294967296).append(",")
    .append(<i64>-4294967295).append(",").append(<u64>18446744073709551615).append(",")
    .append(<u64>9223372036854775808).append(",").append(<u64>4294967296).append(",").append(u32.MAX_VALUE).append(",")
    .append(i32.MIN_VALUE).append(",").append(<u16>65535).append(",").append(<i8>-128).append(",").append(<u8>255).append(",")
    .append(<u64>0);
  result = k.toArrayBuffer();
  found = true;
}
