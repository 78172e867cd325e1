// count in AssemblyScript: events per partition key in collection "counts" as {"count":N},
// byte-identical to ../count.go. It uses the library's allocation-free byte APIs (readRaw,
// putWriter) with the partition key's bytes straight from the batch.
//
//   asc index.ts -o count-as.wasm --runtime incremental -O3
import { Batch, JsonFields, JsonWriter, handle } from "../../../../wasmabi/as/index";
export { projhost_abi_v1, projhost_alloc, projhost_handle } from "../../../../wasmabi/as/index";

const COLLECTION = "counts";
const w = new JsonWriter();
const doc = new JsonFields(["count"]);

function onBatch(b: Batch): string | null {
  while (b.next()) {
    const ev = b.event;
    if (ev.keyLen == 0) return "count: event seq " + ev.seq() + " has an empty partition key";
    let n: i64 = 0;
    if (b.readRaw(COLLECTION, ev.keyPtr, ev.keyLen)) {
      n = doc.scan(b.docPtr, b.docSize).int(0);
      if (!doc.ok) return "count: stored document " + COLLECTION + "/" + ev.partitionKey() + " has no integer \"count\"";
    }
    w.begin().int("count", n + 1);
    b.putWriter(COLLECTION, ev.keyPtr, ev.keyLen, w);
  }
  return null;
}

handle(onBatch);
