// A Foxglove WebSocket client for the tests, built on the official @foxglove/ws-protocol client and
// decoding each channel from its advertised ros2msg schema with @foxglove/rosmsg and
// @foxglove/rosmsg2-serialization (none of it written here).
//
//   node client.mjs URL (--topics /a,/b | --all) [--count N] [--timeout-ms T] [--stall-ms S] [--brief]
//
// Prints JSON lines on stdout: {"channels": [...]} once advertised, then one {"topic", "logTimeNs",
// "message", "raw"} per message (raw: the CDR bytes, base64; bigints as strings, byte arrays as base64),
// {"time": ns} for each server time broadcast, and {"done": true, "counts": {...}} at the end. Exits 0
// once every topic has N messages, 2 on timeout. --stall-ms S: after subscribing, stop reading the
// socket for S ms from the first message on (a slow client), then read again. --brief: messages as
// {"topic", "logTimeNs"} only. --all: every channel advertised, until the timeout (exit 2) or the end.
import wsProtocol from "@foxglove/ws-protocol"; // a CommonJS package: its named exports need the default
import { parse } from "@foxglove/rosmsg";
import { MessageReader } from "@foxglove/rosmsg2-serialization";
import { WebSocket } from "ws";

const { FoxgloveClient } = wsProtocol;
const argv = process.argv.slice(2);
const url = argv[0];
const option = (name, fallback) => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : fallback;
};
const topics = option("--topics", "").split(",").filter((t) => t);
const count = Number(option("--count", "5"));
const timeoutMs = Number(option("--timeout-ms", "30000"));
const stallMs = Number(option("--stall-ms", "0"));
const brief = argv.includes("--brief");
const all = argv.includes("--all");

const out = (obj, written) => process.stdout.write(
  JSON.stringify(obj, (_, v) => (typeof v === "bigint" ? v.toString()
    : v instanceof Uint8Array ? { base64: Buffer.from(v).toString("base64") } : v)) + "\n", written);

// foxglove-sdk's server accepts the current subprotocol name; the ws-protocol client offers the old one
const ws = new WebSocket(url, ["foxglove.sdk.v1", FoxgloveClient.SUPPORTED_SUBPROTOCOL]);
const client = new FoxgloveClient({ ws });
const readers = new Map();
const counts = Object.fromEntries(topics.map((t) => [t, 0]));
let advertised = [];
let stalled = false;

let finished = false;
const finish = (code) => {
  if (finished) return;
  finished = true;
  client.close();
  // exit once the last line is written: the stream writes in order, so every line before it is out too
  // (process.exit at once cut a 300 KB cloud line short in a pipe)
  out({ done: code === 0, counts, advertised: advertised.length }, () => process.exit(code));
};
const timer = setTimeout(() => finish(2), timeoutMs);

client.on("error", (e) => { process.stderr.write(`client error: ${e}\n`); finish(1); });
client.on("close", () => { if (all) finish(0); }); // --all: the run ended
client.on("time", ({ timestamp }) => { if (!stalled) out({ time: timestamp }); });
client.on("advertise", (channels) => {
  advertised = advertised.concat(channels);
  out({ channels: channels.map((c) => ({ id: c.id, topic: c.topic, encoding: c.encoding,
    schemaName: c.schemaName, schemaEncoding: c.schemaEncoding, schema: c.schema })) });
  for (const ch of channels) {
    if (!all && !topics.includes(ch.topic)) continue;
    const reader = new MessageReader(parse(ch.schema, { ros2: true }));
    readers.set(client.subscribe(ch.id), { topic: ch.topic, reader });
  }
});
let stallStarted = false;
const stallOnce = () => {
  if (stallMs <= 0 || stallStarted) return;
  stallStarted = stalled = true;
  out({ stalled: true });
  ws._socket.pause();
  setTimeout(() => { stalled = false; out({ resumed: true }); ws._socket.resume(); }, stallMs);
};
client.on("message", ({ subscriptionId, timestamp, data }) => {
  const r = readers.get(subscriptionId);
  if (!r || finished) return;
  const bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  out(brief ? { topic: r.topic, logTimeNs: timestamp }
    : { topic: r.topic, logTimeNs: timestamp, message: r.reader.readMessage(bytes),
        raw: Buffer.from(bytes).toString("base64") });
  counts[r.topic] = (counts[r.topic] ?? 0) + 1;
  stallOnce();
  if (!all && topics.every((t) => counts[t] >= count)) {
    clearTimeout(timer);
    finish(0);
  }
});
