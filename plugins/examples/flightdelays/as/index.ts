// flightdelays in AssemblyScript: the same projection as ../flightdelays.go, writing
// byte-identical documents (see that file for the document shapes).
//
//   asc index.ts -o flightdelays-as.wasm --runtime incremental -O3
import { Batch, Event, JsonReader, JsonWriter, handle } from "../../../../wasmabi/as/index";
export { projhost_abi_v1, projhost_alloc, projhost_handle } from "../../../../wasmabi/as/index";

const DELAYED_MINUTES: i64 = 15;
const AIRPORTS = "airports";
const ROUTES = "routes";

const w = new JsonWriter();
const doc = new JsonReader();

function badEvent(ev: Event, field: string, want: string): string {
  return "flightdelays: event seq " + ev.seq() + " (partition key \"" + ev.partitionKey() +
    "\"): field \"" + field + "\" missing or not " + want;
}

function onBatch(b: Batch): string | null {
  while (b.next()) {
    const ev = b.event;
    const j = ev.json();
    const delay = j.getInt("delay");
    if (!j.found) return badEvent(ev, "delay", "an integer");
    const distance = j.getInt("distance");
    if (!j.found) return badEvent(ev, "distance", "an integer");
    const origin = j.getString("origin");
    if (origin === null || origin.length == 0) return badEvent(ev, "origin", "a non-empty string");
    const dest = j.getString("destination");
    if (dest === null || dest.length == 0) return badEvent(ev, "destination", "a non-empty string");

    let flights: i64 = 0, delayed: i64 = 0, totalDelay: i64 = 0, maxDelay: i64 = delay;
    const a = b.read(AIRPORTS, origin);
    if (a !== null) {
      doc.of(a);
      flights = doc.getInt("flights");
      let ok = doc.found;
      delayed = doc.getInt("delayed");
      ok = ok && doc.found;
      totalDelay = doc.getInt("total_delay");
      ok = ok && doc.found;
      maxDelay = doc.getInt("max_delay");
      ok = ok && doc.found;
      if (!ok) return "flightdelays: stored document " + AIRPORTS + "/" + origin +
        " is not {\"flights\":N,\"delayed\":N,\"total_delay\":N,\"max_delay\":N}";
    }
    flights++;
    if (delay > DELAYED_MINUTES) delayed++;
    totalDelay += delay;
    if (delay > maxDelay) maxDelay = delay;
    b.put(AIRPORTS, origin, w.begin().int("flights", flights).int("delayed", delayed)
      .int("total_delay", totalDelay).int("max_delay", maxDelay).finish());

    const route = origin + "-" + dest;
    let rflights: i64 = 0, rdist: i64 = 0;
    const r = b.read(ROUTES, route);
    if (r !== null) {
      doc.of(r);
      rflights = doc.getInt("flights");
      let ok = doc.found;
      rdist = doc.getInt("total_distance");
      ok = ok && doc.found;
      if (!ok) return "flightdelays: stored document " + ROUTES + "/" + route +
        " is not {\"flights\":N,\"total_distance\":N}";
    }
    b.put(ROUTES, route, w.begin().int("flights", rflights + 1).int("total_distance", rdist + distance).finish());
  }
  return null;
}

handle(onBatch);
