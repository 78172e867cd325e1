// Test handler of sdk/as/gc_test.go (built as build/wasm/as-garbageprobe.wasm with the examples'
// flags, and as-garbageprobe-stub.wasm / as-garbageprobe-incremental.wasm with those runtimes):
// a handler that allocates on purpose, to check that the library's collections free garbage and
// keep what is live.
//
// Each event {"key":"k","pad":"..."}:
//   - makes garbage: a copy of pad as a string, that string doubled, and an array of 8 objects
//     holding slices of it (about 8 times pad's length, unreachable when the event is done);
//   - keeps one object per key alive across batches in a global Map (its text is pad's first 16
//     characters and its sum their code units, checked at every batch's start: a live object
//     freed and reused by the allocator breaks the sum);
//   - counts the key's events in State "counts": {"n":N}.
import { Batch, Doc, JsonReader, JsonWriter, State, handle } from "../index";
export * from "../exports";

class Count extends Doc {
  n: i64 = 0;
  reset(): void { this.n = 0; }
  decode(d: JsonReader): bool { this.n = d.getInt("n"); return d.ok; }
  encode(w: JsonWriter): void { w.int("n", this.n); }
}

class Kept {
  constructor(public text: string, public sum: i32) {}
}

class Piece {
  constructor(public s: string) {}
}

function sumOf(s: string): i32 {
  let sum = 0;
  for (let i = 0; i < s.length; i++) sum += s.charCodeAt(i);
  return sum;
}

const counts = new State<Count>("counts");
const kept = new Map<string, Kept>();
let garbageChars: i64 = 0;

function onBatch(b: Batch): string | null {
  const keys = kept.keys();
  for (let i = 0; i < keys.length; i++) {
    const k = kept.get(keys[i]);
    if (sumOf(k.text) != k.sum) return "kept object of key " + keys[i] + " was overwritten: " + k.text;
  }
  while (b.next()) {
    const j = b.event.json();
    const key = j.getString("key");
    const pad = j.getString("pad");
    if (key === null || pad === null) return "event " + b.event.seq() + ": want string key and pad";
    const twice = pad + pad;
    const pieces = new Array<Piece>();
    for (let i = 0; i < 8; i++) pieces.push(new Piece(twice.substring(i, i + pad.length)));
    garbageChars += pieces.length * pad.length;
    if (!kept.has(key)) {
      const text = pad.substring(0, 16);
      kept.set(key, new Kept(text, sumOf(text)));
    }
    counts.get(key).n++;
  }
  return null;
}

handle(onBatch);
