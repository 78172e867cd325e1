// count in AssemblyScript: events per partition key in collection "counts" as {"count":N},
// byte-identical to ../count.go. The count is a typed document of a State, keyed by the
// partition key's bytes (Event.key: no string is created).
//
//   asc index.ts -o count-as.wasm --runtime minimal -O3
import { Batch, Doc, JsonReader, JsonWriter, State, handle } from "@projhost/sdk";
export * from "@projhost/sdk/exports";

/** counts/<partition key>: {"count":N} */
class Count extends Doc {
  count: i64 = 0;

  reset(): void { this.count = 0; }

  decode(d: JsonReader): bool {
    this.count = d.getInt("count");
    return d.ok;
  }

  encode(w: JsonWriter): void { w.int("count", this.count); }
}

const counts = new State<Count>("counts");

function onBatch(b: Batch): string | null {
  while (b.next()) {
    const ev = b.event;
    if (ev.key.length == 0) return "count: event seq " + ev.seq() + " has an empty partition key";
    counts.get(ev.key).count++;
  }
  return null;
}

handle(onBatch);
