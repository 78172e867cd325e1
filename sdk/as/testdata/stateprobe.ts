// Test handler of sdk/as/state_test.go (built as build/wasm/as-stateprobe.wasm): each event's
// data is a command on the library's State and Batch, so the Go tests can check the per-batch
// semantics (first-touch order, read-your-writes, decode once, misuse) through the real host.
//
//   {"op":"inc","key":"k"}        counters.get(k).n += 1 ("by" adds more)
//   {"op":"found","key":"k"}      counters.get(k).n += 1, logged as "found k: true|false" (State.found)
//   {"op":"inc2","key":"k"}       the same through a second State of collection "c"
//   {"op":"del","key":"k"}        counters.delete(k)
//   {"op":"put","key":"k","n":5}  b.put("c", k, {"n":5})
//   {"op":"read","key":"k"}       b.read("c", k), logged as "read k: DOC" or "read k: none"
//   {"op":"pair","a":"x","b":"y"} counters.get(Key x-y).n += 1 (a composite key)
//   {"op":"pk"}                   counters.get(partition key).n += 1 (Event.key)
//   {"op":"num","n":-42}          counters.get(Key "n" + n + "/" + i32 7).n += 1 (integer parts)
//   {"op":"text","key":"k"}       getText of "key" three times (one view), then counters.get
//   {"op":"fail"}                 the handler returns a message
//   {"op":"big","key":"k"}        counters.get(k).n += 1, and its encoding then exceeds 256 KiB
//   {"op":"many","from":0,"to":9} counters.get(Key "m" + i).n += 1 for i in [from, to)
//   {"op":"decodes"}              b.put("stats", "decodes", {"n":N}): the documents the States
//                                 decoded so far in the batch
//
// "coll":"e" makes inc, del, put, read, big and many use collection "e" and its State, which decodes
// every batch (decodeEveryBatch), instead of "c" and counters.
//
// At the end of a batch it logs "decodes=N": how many documents the States decoded.
import { Batch, Doc, JsonReader, JsonWriter, Key, LEVEL_INFO, State, handle } from "../index";
export * from "../exports";

let decodes = 0;

class Counter extends Doc {
  n: i64 = 0;
  big: bool = false; // not encoded by a batch that succeeds (its document is too large)

  reset(): void { this.n = 0; this.big = false; }

  decode(d: JsonReader): bool {
    decodes++;
    this.n = d.getInt("n");
    return d.ok;
  }

  encode(w: JsonWriter): void {
    w.int("n", this.n);
    if (this.big) w.string("pad", "x".repeat(256 << 10));
  }
}

const counters = new State<Counter>("c");
const others = new State<Counter>("c");
const everies = new State<Counter>("e").decodeEveryBatch();
const pair = new Key();
const w = new JsonWriter();

function onBatch(b: Batch): string | null {
  decodes = 0;
  while (b.next()) {
    const ev = b.event;
    const j = ev.json();
    const op = j.getText("op");
    const key = j.getText("key");
    const e = j.getText("coll").equals("e");
    const st = e ? everies : counters;
    const coll = e ? "e" : "c";
    if (op.equals("inc")) {
      const by = j.getInt("by", 1);
      st.get(key).n += by;
    } else if (op.equals("found")) {
      const c = st.get(key);
      const f = st.found; // before c.n++: a compound assignment to st.get(key).n calls get twice
      c.n++;
      b.log(LEVEL_INFO, "found " + key.toString() + ": " + (f ? "true" : "false"));
    } else if (op.equals("inc2")) {
      others.get(key).n++;
    } else if (op.equals("del")) {
      st.delete(key);
    } else if (op.equals("put")) {
      b.put(coll, key, w.begin().int("n", j.getInt("n")));
    } else if (op.equals("read")) {
      const d = b.read(coll, key);
      b.log(LEVEL_INFO, "read " + key.toString() + ": " + (d === null ? "none" : String.UTF8.decode(d)));
    } else if (op.equals("pair")) {
      counters.get(pair.set(j.getText("a")).append("-").append(j.getText("b"))).n++;
    } else if (op.equals("num")) {
      counters.get(pair.set("n").append(j.getInt("n")).append("/").append(<i32>7)).n++;
    } else if (op.equals("text")) {
      const t1 = j.getText("key"), t2 = j.getText("key"), t3 = j.getText("key");
      if (t1 !== t2 || t2 !== t3 || !t1.equals(key)) return "getText returned different views";
      counters.get(t3).n++;
    } else if (op.equals("pk")) {
      counters.get(ev.key).n++;
    } else if (op.equals("big")) {
      const d = st.get(key);
      d.n++;
      d.big = true;
    } else if (op.equals("many")) {
      for (let i = j.getInt("from"), to = j.getInt("to"); i < to; i++) st.get(pair.set("m").append(i)).n++;
    } else if (op.equals("decodes")) {
      b.put("stats", "decodes", w.begin().int("n", decodes));
    } else if (op.equals("fail")) {
      return "failed on purpose at seq " + ev.seq();
    } else {
      return "unknown op " + op.toString();
    }
  }
  b.log(LEVEL_INFO, "decodes=" + decodes.toString());
  return null;
}

handle(onBatch);
