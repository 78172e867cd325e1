// Test handler of sdk/as/index_test.go (built as build/wasm/as-indexprobe.wasm): reads fixed
// fields of every event through Event.json() with every getter and puts the answers as
// c/<seq> = {"r":"..."}, so the Go tests can compare the answers of batches with and without the
// host's field index (ABI.md §2.1) and against the Go SDK.
//
// Per name, in NAMES order: has, getInt, getBool, getText, getString, getRaw, getFloat (its
// bits in hex), each "found value" or "-", separated by RS (\x1e); names separated by GS
// (\x1d). Then, in this order:
//   - when the partition key is "late", the field "late" (a name the handler reads first in the
//     middle of a batch);
//   - when the partition key is "many", getInt of m00..m69 (more names than the host indexes,
//     and than the library's first table of names holds), each "v," or "-1,";
//   - when the event has a string field "dyn", the field named by its value (a name built at
//     run time: never indexed);
//   - every name again, getText then getInt (records and views are reused within an event);
//   - the reader's ok.
import { Batch, JsonReader, JsonWriter, handle } from "../index";
export * from "../exports";

const RS = "\x1e";
const GS = "\x1d";
const w = new JsonWriter();

function probe(j: JsonReader, name: string): string {
  let r = j.has(name) ? "1" : "-";
  const i = j.getInt(name, -7);
  r += RS + (j.found ? i.toString() : "-" + i.toString());
  const b = j.getBool(name, true);
  r += RS + (j.found ? (b ? "true" : "false") : "-");
  const t = j.getText(name);
  r += RS + (j.found ? "=" + t.toString() : "-" + t.length.toString());
  const s = j.getString(name);
  r += RS + (s !== null ? "=" + s : "-");
  const raw = j.getRaw(name);
  r += RS + (raw !== null ? "=" + raw : "-");
  const f = j.getFloat(name, 0.5);
  r += RS + (j.found ? reinterpret<u64>(f).toString(16) : "-");
  return r;
}

function many(j: JsonReader): string {
  let r = "";
  r += j.getInt("m00", -1).toString() + ",";
  r += j.getInt("m01", -1).toString() + ",";
  r += j.getInt("m02", -1).toString() + ",";
  r += j.getInt("m03", -1).toString() + ",";
  r += j.getInt("m04", -1).toString() + ",";
  r += j.getInt("m05", -1).toString() + ",";
  r += j.getInt("m06", -1).toString() + ",";
  r += j.getInt("m07", -1).toString() + ",";
  r += j.getInt("m08", -1).toString() + ",";
  r += j.getInt("m09", -1).toString() + ",";
  r += j.getInt("m10", -1).toString() + ",";
  r += j.getInt("m11", -1).toString() + ",";
  r += j.getInt("m12", -1).toString() + ",";
  r += j.getInt("m13", -1).toString() + ",";
  r += j.getInt("m14", -1).toString() + ",";
  r += j.getInt("m15", -1).toString() + ",";
  r += j.getInt("m16", -1).toString() + ",";
  r += j.getInt("m17", -1).toString() + ",";
  r += j.getInt("m18", -1).toString() + ",";
  r += j.getInt("m19", -1).toString() + ",";
  r += j.getInt("m20", -1).toString() + ",";
  r += j.getInt("m21", -1).toString() + ",";
  r += j.getInt("m22", -1).toString() + ",";
  r += j.getInt("m23", -1).toString() + ",";
  r += j.getInt("m24", -1).toString() + ",";
  r += j.getInt("m25", -1).toString() + ",";
  r += j.getInt("m26", -1).toString() + ",";
  r += j.getInt("m27", -1).toString() + ",";
  r += j.getInt("m28", -1).toString() + ",";
  r += j.getInt("m29", -1).toString() + ",";
  r += j.getInt("m30", -1).toString() + ",";
  r += j.getInt("m31", -1).toString() + ",";
  r += j.getInt("m32", -1).toString() + ",";
  r += j.getInt("m33", -1).toString() + ",";
  r += j.getInt("m34", -1).toString() + ",";
  r += j.getInt("m35", -1).toString() + ",";
  r += j.getInt("m36", -1).toString() + ",";
  r += j.getInt("m37", -1).toString() + ",";
  r += j.getInt("m38", -1).toString() + ",";
  r += j.getInt("m39", -1).toString() + ",";
  r += j.getInt("m40", -1).toString() + ",";
  r += j.getInt("m41", -1).toString() + ",";
  r += j.getInt("m42", -1).toString() + ",";
  r += j.getInt("m43", -1).toString() + ",";
  r += j.getInt("m44", -1).toString() + ",";
  r += j.getInt("m45", -1).toString() + ",";
  r += j.getInt("m46", -1).toString() + ",";
  r += j.getInt("m47", -1).toString() + ",";
  r += j.getInt("m48", -1).toString() + ",";
  r += j.getInt("m49", -1).toString() + ",";
  r += j.getInt("m50", -1).toString() + ",";
  r += j.getInt("m51", -1).toString() + ",";
  r += j.getInt("m52", -1).toString() + ",";
  r += j.getInt("m53", -1).toString() + ",";
  r += j.getInt("m54", -1).toString() + ",";
  r += j.getInt("m55", -1).toString() + ",";
  r += j.getInt("m56", -1).toString() + ",";
  r += j.getInt("m57", -1).toString() + ",";
  r += j.getInt("m58", -1).toString() + ",";
  r += j.getInt("m59", -1).toString() + ",";
  r += j.getInt("m60", -1).toString() + ",";
  r += j.getInt("m61", -1).toString() + ",";
  r += j.getInt("m62", -1).toString() + ",";
  r += j.getInt("m63", -1).toString() + ",";
  r += j.getInt("m64", -1).toString() + ",";
  r += j.getInt("m65", -1).toString() + ",";
  r += j.getInt("m66", -1).toString() + ",";
  r += j.getInt("m67", -1).toString() + ",";
  r += j.getInt("m68", -1).toString() + ",";
  r += j.getInt("m69", -1).toString() + ",";
  return r;
}

function onBatch(b: Batch): string | null {
  while (b.next()) {
    const ev = b.event;
    const j = ev.json();
    let r = probe(j, "delay") + GS + probe(j, "distance") + GS + probe(j, "origin") + GS +
      probe(j, "destination") + GS + probe(j, "s") + GS + probe(j, "esc") + GS + probe(j, "t") + GS +
      probe(j, "f") + GS + probe(j, "nul") + GS + probe(j, "obj") + GS + probe(j, "arr") + GS +
      probe(j, "neg") + GS + probe(j, "flt") + GS + probe(j, "é") + GS + probe(j, "\"q") + GS +
      probe(j, "missing") + GS + probe(j, "");
    if (ev.key.equals("late")) r += GS + probe(j, "late");
    if (ev.key.equals("many")) r += GS + many(j);
    const dyn = j.getString("dyn");
    if (dyn !== null) r += GS + probe(j, dyn);
    r += GS + j.getText("esc").toString() + RS + j.getText("origin").toString() + RS + j.getText("s").toString() +
      RS + j.getInt("delay").toString() + RS + j.getInt("neg").toString();
    r += GS + (j.ok ? "ok" : "not ok");
    b.put("c", ev.seq(), w.begin().string("r", r));
  }
  return null;
}

handle(onBatch);
