// flightdelays in AssemblyScript: the same projection as ../flightdelays.go, writing
// byte-identical documents (see that file for the document shapes). Each document is a typed
// value of a State: decoded at its key's first event in a batch (unless the State kept it from
// the last batch that wrote it), updated by plain code, encoded and written once when the batch
// ends.
//
//   asc index.ts -o flightdelays-as.wasm --runtime minimal -O3
import { Batch, Doc, Event, JsonReader, JsonWriter, Key, State, handle } from "@projhost/sdk";
export * from "@projhost/sdk/exports";

/** The arrival delay (minutes) above which a flight counts as delayed. */
const DELAYED_MINUTES: i64 = 15;

/** airports/<origin>: {"flights":N,"delayed":N,"total_delay":N,"max_delay":N} */
class Airport extends Doc {
  flights: i64 = 0;
  delayed: i64 = 0;
  totalDelay: i64 = 0;
  maxDelay: i64 = I64.MIN_VALUE; // a new airport's first flight sets it

  reset(): void {
    this.flights = 0;
    this.delayed = 0;
    this.totalDelay = 0;
    this.maxDelay = I64.MIN_VALUE;
  }

  decode(d: JsonReader): bool {
    this.flights = d.getInt("flights");
    this.delayed = d.getInt("delayed");
    this.totalDelay = d.getInt("total_delay");
    this.maxDelay = d.getInt("max_delay");
    return d.ok;
  }

  encode(w: JsonWriter): void {
    w.int("flights", this.flights).int("delayed", this.delayed)
      .int("total_delay", this.totalDelay).int("max_delay", this.maxDelay);
  }
}

/** routes/<origin>-<destination>: {"flights":N,"total_distance":N} */
class Route extends Doc {
  flights: i64 = 0;
  totalDistance: i64 = 0;

  reset(): void {
    this.flights = 0;
    this.totalDistance = 0;
  }

  decode(d: JsonReader): bool {
    this.flights = d.getInt("flights");
    this.totalDistance = d.getInt("total_distance");
    return d.ok;
  }

  encode(w: JsonWriter): void {
    w.int("flights", this.flights).int("total_distance", this.totalDistance);
  }
}

const airports = new State<Airport>("airports");
const routes = new State<Route>("routes");
const routeKey = new Key();

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
    const origin = j.getText("origin");
    if (!j.found || origin.length == 0) return badEvent(ev, "origin", "a non-empty string");
    const dest = j.getText("destination");
    if (!j.found || dest.length == 0) return badEvent(ev, "destination", "a non-empty string");

    const a = airports.get(origin);
    a.flights++;
    if (delay > DELAYED_MINUTES) a.delayed++;
    a.totalDelay += delay;
    if (delay > a.maxDelay) a.maxDelay = delay;

    const r = routes.get(routeKey.set(origin).append("-").append(dest));
    r.flights++;
    r.totalDistance += distance;
  }
  return null;
}

handle(onBatch);
