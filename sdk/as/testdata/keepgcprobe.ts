// Test handler of sdk/as/keepgc_test.go (built as build/wasm/as-keepgcprobe.wasm): a State that
// keeps many documents while each event makes garbage. Each event's data is {"k":N,"g":G}:
// counters.get("k"+N).n += 1, then a throwaway string of G UTF-16 units (2G bytes); with "e":1
// the same through a State that keeps nothing (decodeEveryBatch), for comparison.
import { Batch, Doc, JsonReader, JsonWriter, State, handle } from "../index";
export * from "../exports";

class Counter extends Doc {
  n: i64 = 0;
  reset(): void { this.n = 0; }
  decode(d: JsonReader): bool { this.n = d.getInt("n"); return d.ok; }
  encode(w: JsonWriter): void { w.int("n", this.n); }
}

const counters = new State<Counter>("c");
const everies = new State<Counter>("e").decodeEveryBatch();
let sink: i32 = 0;

function onBatch(b: Batch): string | null {
  while (b.next()) {
    const j = b.event.json();
    const k = j.getInt("k");
    const g = <i32>j.getInt("g");
    const st = j.getInt("e") == 1 ? everies : counters;
    const c = st.get("k" + k.toString());
    c.n += 1;
    if (g > 0) sink += "y".repeat(g).length;
  }
  return null;
}

handle(onBatch);
