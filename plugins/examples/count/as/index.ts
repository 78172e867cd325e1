// count in AssemblyScript: events per partition key in collection "counts" as {"count":N},
// byte-identical to ../count.go.
//
//   asc index.ts -o count-as.wasm --runtime incremental -O3
import { Batch, JsonReader, JsonWriter, handle } from "../../../../wasmabi/as/index";
export { projhost_abi_v1, projhost_alloc, projhost_handle } from "../../../../wasmabi/as/index";

const COLLECTION = "counts";
const w = new JsonWriter();
const doc = new JsonReader();

function onBatch(b: Batch): string | null {
  while (b.next()) {
    const ev = b.event;
    if (ev.keyLen == 0) return "count: event seq " + ev.seq() + " has an empty partition key";
    const key = ev.partitionKey();
    let n: i64 = 0;
    const d = b.read(COLLECTION, key);
    if (d !== null) {
      n = doc.of(d).getInt("count");
      if (!doc.found) return "count: stored document " + COLLECTION + "/" + key + " has no integer \"count\"";
    }
    b.put(COLLECTION, key, w.begin().int("count", n + 1).finish());
  }
  return null;
}

handle(onBatch);
