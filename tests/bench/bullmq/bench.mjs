// BullMQ baseline: no-op jobs through BullMQ workers on the same redis-server.
//   node bench.mjs SOCKET throughput N CONCURRENCY
//   node bench.mjs SOCKET latency N CONCURRENCY
// Prints one JSON line like bench_queue.
import { Queue, Worker, QueueEvents } from "bullmq";

const [sock, mode, nStr, concStr] = process.argv.slice(2);
const n = Number(nStr), concurrency = Number(concStr);
const connection = { path: sock, maxRetriesPerRequest: null };
const name = "bench-" + process.pid;
const queue = new Queue(name, { connection });

if (mode === "throughput") {
  let done = 0, t0 = 0;
  const finished = new Promise((resolve) => {
    const worker = new Worker(name, async () => null, { connection, concurrency });
    worker.on("completed", () => { if (++done === n) resolve(worker); });
  });
  t0 = performance.now();
  for (let i = 0; i < n; i += 1000) {
    const batch = [];
    for (let k = i; k < Math.min(n, i + 1000); k++)
      batch.push({ name: "noop", data: { i: k }, opts: { removeOnComplete: true } });
    await queue.addBulk(batch);
  }
  const worker = await finished;
  const secs = (performance.now() - t0) / 1000;
  console.log(JSON.stringify({ n, seconds: +secs.toFixed(3), jobs_per_s: Math.round(n / secs) }));
  await worker.close();
} else {
  const events = new QueueEvents(name, { connection });
  await events.waitUntilReady();
  const worker = new Worker(name, async () => null, { connection, concurrency });
  await worker.waitUntilReady();
  const ms = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    const job = await queue.add("noop", { i });
    await job.waitUntilFinished(events, 30000);
    ms.push(performance.now() - t0);
  }
  ms.sort((a, b) => a - b);
  console.log(JSON.stringify({ n, p50_ms: +ms[n >> 1].toFixed(3),
    p99_ms: +ms[Math.min(n - 1, Math.floor(n * 0.99))].toFixed(3) }));
  await worker.close();
  await events.close();
}
await queue.obliterate({ force: true });
await queue.close();
