// The tuned flightdelays in AssemblyScript, kept for benchmarks only: the example as it was
// before the library had typed per-batch state (issue 14), with its hand-made per-batch arrays,
// raw pointers and unchecked array access. Built by `make wasm` as
// build/wasm/flightdelays-as-tuned.wasm; plugins/examples' BenchmarkASDocumentedVsTuned compares
// the documented example (plugins/examples/flightdelays/as) with it. Same documents, same order.
//
//   asc index.ts -o flightdelays-as-tuned.wasm --runtime minimal -O3
import { Batch, BytesIndex, Event, JsonFields, JsonWriter, handle } from "@projhost/sdk";
export * from "@projhost/sdk/exports";

const DELAYED_MINUTES: i64 = 15;
const AIRPORTS = "airports";
const ROUTES = "routes";

const w = new JsonWriter();
const event = new JsonFields(["delay", "distance", "origin", "destination"]);
const airportDoc = new JsonFields(["flights", "delayed", "total_delay", "max_delay"]);
const routeDoc = new JsonFields(["flights", "total_distance"]);

// Aggregates of the current batch, by index in their BytesIndex.
const airports = new BytesIndex();
const aFlights: Array<i64> = [];
const aDelayed: Array<i64> = [];
const aTotal: Array<i64> = [];
const aMax: Array<i64> = [];
const routes = new BytesIndex();
const rFlights: Array<i64> = [];
const rDist: Array<i64> = [];
// Documents in first-appearance order: index << 1 | 1 for a route, index << 1 for an airport.
const order: Array<i32> = [];
// "<origin>-<destination>" of the current event; the origin is its first originLen bytes.
let keyBuf = new ArrayBuffer(64);

function badEvent(ev: Event, field: string, want: string): string {
  return "flightdelays: event seq " + ev.seq() + " (partition key \"" + ev.partitionKey() +
    "\"): field \"" + field + "\" missing or not " + want;
}

function keyInto(off: i32, p: usize, n: i32): usize {
  if (keyBuf.byteLength < off + n) {
    const nb = new ArrayBuffer(max(off + n, keyBuf.byteLength << 1));
    memory.copy(changetype<usize>(nb), changetype<usize>(keyBuf), <usize>off);
    keyBuf = nb;
  }
  const k = changetype<usize>(keyBuf);
  memory.copy(k + <usize>off, p, n);
  return k;
}

function onBatch(b: Batch): string | null {
  airports.reset();
  routes.reset();
  aFlights.length = 0; aDelayed.length = 0; aTotal.length = 0; aMax.length = 0;
  rFlights.length = 0; rDist.length = 0;
  order.length = 0;
  while (b.next()) {
    const ev = b.event;
    const j = event.scan(ev.dataPtr, ev.dataLen);
    const delay = j.int(0);
    if (!j.ok) return badEvent(ev, "delay", "an integer");
    const distance = j.int(1);
    if (!j.ok) return badEvent(ev, "distance", "an integer");
    if (!j.str(2) || j.strLen == 0) return badEvent(ev, "origin", "a non-empty string");
    const ol = j.strLen;
    keyInto(0, j.strPtr, ol);
    if (!j.str(3) || j.strLen == 0) return badEvent(ev, "destination", "a non-empty string");
    const kl = ol + 1 + j.strLen;
    const k = keyInto(ol + 1, j.strPtr, j.strLen);
    store<u8>(k + <usize>ol, 0x2D); // '-

    let ai = airports.find(k, ol);
    if (ai < 0) {
      let flights: i64 = 0, delayed: i64 = 0, totalDelay: i64 = 0, maxDelay: i64 = delay;
      if (b.readRaw(AIRPORTS, k, ol)) {
        const d = airportDoc.scan(b.docPtr, b.docSize);
        flights = d.int(0);
        let ok = d.ok;
        delayed = d.int(1);
        ok = ok && d.ok;
        totalDelay = d.int(2);
        ok = ok && d.ok;
        maxDelay = d.int(3);
        ok = ok && d.ok;
        if (!ok) return "flightdelays: stored document " + AIRPORTS + "/" + String.UTF8.decodeUnsafe(k, ol) +
          " is not {\"flights\":N,\"delayed\":N,\"total_delay\":N,\"max_delay\":N}";
      }
      ai = airports.add(k, ol);
      aFlights.push(flights); aDelayed.push(delayed); aTotal.push(totalDelay); aMax.push(maxDelay);
      order.push(ai << 1);
    }
    unchecked(aFlights[ai] = unchecked(aFlights[ai]) + 1);
    if (delay > DELAYED_MINUTES) unchecked(aDelayed[ai] = unchecked(aDelayed[ai]) + 1);
    unchecked(aTotal[ai] = unchecked(aTotal[ai]) + delay);
    if (delay > unchecked(aMax[ai])) unchecked(aMax[ai] = delay);

    let ri = routes.find(k, kl);
    if (ri < 0) {
      let flights: i64 = 0, dist: i64 = 0;
      if (b.readRaw(ROUTES, k, kl)) {
        const d = routeDoc.scan(b.docPtr, b.docSize);
        flights = d.int(0);
        let ok = d.ok;
        dist = d.int(1);
        ok = ok && d.ok;
        if (!ok) return "flightdelays: stored document " + ROUTES + "/" + String.UTF8.decodeUnsafe(k, kl) +
          " is not {\"flights\":N,\"total_distance\":N}";
      }
      ri = routes.add(k, kl);
      rFlights.push(flights); rDist.push(dist);
      order.push(ri << 1 | 1);
    }
    unchecked(rFlights[ri] = unchecked(rFlights[ri]) + 1);
    unchecked(rDist[ri] = unchecked(rDist[ri]) + distance);
  }
  for (let n = order.length, x = 0; x < n; x++) {
    const o = unchecked(order[x]);
    const i = o >> 1;
    if (o & 1) {
      w.begin().int("flights", unchecked(rFlights[i])).int("total_distance", unchecked(rDist[i]));
      b.putWriter(ROUTES, routes.keyPtr(i), routes.keyLen(i), w);
    } else {
      w.begin().int("flights", unchecked(aFlights[i])).int("delayed", unchecked(aDelayed[i]))
        .int("total_delay", unchecked(aTotal[i])).int("max_delay", unchecked(aMax[i]));
      b.putWriter(AIRPORTS, airports.keyPtr(i), airports.keyLen(i), w);
    }
  }
  return null;
}

handle(onBatch);
