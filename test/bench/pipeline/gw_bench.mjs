// The graphile-worker baseline of test/bench/run_pipeline_bench.sh: no-op
// jobs on the same PostgreSQL as the node, in a database of their own.
//
//   node gw_bench.mjs throughput --jobs N [worker options] [--timeout S]
//       N no-op jobs enqueued first (addJobs, 1,000 per call), then a
//       worker started; jobs/s from the first handler start to the moment
//       the jobs table is seen empty (graphile-worker deletes a job when it
//       completes it, and `job:complete` fires before that write commits).
//   node gw_bench.mjs latency --rate R --seconds S --warmup W [worker options]
//       a worker started first, then a child process enqueues one job every
//       1/R s (open loop: it never waits for an insert before the next one)
//       for W + S s; latency = the handler's start - the time the enqueuer
//       called addJob, both as wall clock (performance.timeOrigin +
//       performance.now()); the first W s are left out.
//   node gw_bench.mjs enqueue --rate R --seconds S --warmup W
//       the latency run's child.
//
// Worker options: --concurrency C (default 10), --max-pool P (default 12),
// --complete-job-batch-delay D (default 0; -1 disables batching). In 0.18.0
// `concurrency` and `maxPoolSize` are run() options (`concurrency` is the
// legacy name of the preset's `worker.concurrentJobs`) and
// `completeJobBatchDelay` exists only as a preset option
// (`preset.worker.completeJobBatchDelay`, default -1); `localQueue` is left
// at its default (off).
//
// The connection comes from the libpq environment variables (PGHOST,
// PGPORT, PGUSER, PGDATABASE), which graphile-worker hands to node-postgres
// when there is neither a connection string nor DATABASE_URL. Each mode
// prints one `RESULT key=value ...` line on stdout; progress and errors go
// to stderr. Every wait is bounded.

import { spawn } from "node:child_process";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { Logger, makeWorkerUtils, run } from "graphile-worker";

const wall = () => performance.timeOrigin + performance.now();
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function fail(message) {
  process.stderr.write(`gw_bench: ${message}\n`);
  process.exit(1);
}

function parseArgs(argv) {
  const opts = {
    jobs: 20000,
    concurrency: 10,
    maxPool: 12,
    completeJobBatchDelay: 0,
    rate: 200,
    seconds: 20,
    warmup: 2,
    timeout: 600,
  };
  const names = {
    "--jobs": "jobs",
    "--concurrency": "concurrency",
    "--max-pool": "maxPool",
    "--complete-job-batch-delay": "completeJobBatchDelay",
    "--rate": "rate",
    "--seconds": "seconds",
    "--warmup": "warmup",
    "--timeout": "timeout",
  };
  for (let i = 0; i < argv.length; i += 2) {
    const key = names[argv[i]];
    const value = Number(argv[i + 1]);
    if (!key || !Number.isFinite(value))
      fail(`bad option '${argv[i]} ${argv[i + 1] ?? ""}'`);
    opts[key] = value;
  }
  return opts;
}

// Warnings and errors only: the default logger prints a line per job.
const logger = new Logger(() => (level, message) => {
  if (level === "error" || level === "warning")
    process.stderr.write(`graphile-worker ${level}: ${message}\n`);
});

/// The value below which a fraction q of the sorted values lie, with linear
/// interpolation between the two nearest ranks: PostgreSQL's
/// percentile_cont, which the node's side of the benchmark uses.
function percentileCont(sorted, q) {
  if (sorted.length === 0) return NaN;
  const pos = q * (sorted.length - 1);
  const lo = Math.floor(pos);
  const hi = Math.min(lo + 1, sorted.length - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo);
}

async function withUtils(fn) {
  const utils = await makeWorkerUtils({ logger, maxPoolSize: 4 });
  try {
    return await fn(utils);
  } finally {
    await utils.release();
  }
}

/// Migrates graphile-worker's schema and empties its jobs table.
async function prepare(utils) {
  await utils.migrate();
  await utils.withPgClient((c) =>
    c.query("DELETE FROM graphile_worker._private_jobs"),
  );
}

async function jobCount(utils) {
  const r = await utils.withPgClient((c) =>
    c.query("SELECT count(*)::int AS n FROM graphile_worker._private_jobs"),
  );
  return r.rows[0].n;
}

function startWorker(opts, task) {
  return run({
    concurrency: opts.concurrency,
    maxPoolSize: opts.maxPool,
    noHandleSignals: true,
    logger,
    crontab: "",
    taskList: { noop: task },
    preset: {
      worker: { completeJobBatchDelay: opts.completeJobBatchDelay },
    },
  });
}

async function throughput(opts) {
  const deadline = Date.now() + opts.timeout * 1000;
  await withUtils(async (utils) => {
    await prepare(utils);
    const chunk = 1000;
    for (let i = 0; i < opts.jobs; i += chunk) {
      const n = Math.min(chunk, opts.jobs - i);
      await utils.addJobs(
        Array.from({ length: n }, () => ({ identifier: "noop", payload: {} })),
      );
    }
    await utils.withPgClient((c) =>
      c.query("ANALYZE graphile_worker._private_jobs"),
    );
    const queued = await jobCount(utils);
    if (queued !== opts.jobs)
      fail(`${queued} jobs queued instead of ${opts.jobs}`);

    let started = 0;
    let first = 0;
    const runner = await startWorker(opts, async () => {
      if (started++ === 0) first = wall();
    });
    // Every job handled once, then the table empty: each completion is a
    // DELETE, so an empty table means the last one has committed.
    while (started < opts.jobs && Date.now() < deadline) await sleep(20);
    let last = 0;
    let left = -1;
    while (Date.now() < deadline) {
      const t = wall();
      left = await jobCount(utils);
      if (left === 0) {
        last = t;
        break;
      }
      await sleep(2);
    }
    await runner.stop();
    if (last === 0)
      fail(`timed out: ${started} of ${opts.jobs} jobs started, ${left} left in the table`);
    const seconds = (last - first) / 1000;
    process.stdout.write(
      `RESULT jobs=${opts.jobs} started=${started} seconds=${seconds.toFixed(6)} ` +
        `jobs_per_s=${(opts.jobs / seconds).toFixed(3)} node=${process.version}\n`,
    );
  });
}

async function latency(opts) {
  const deadline =
    Date.now() + (opts.warmup + opts.seconds + 60 + opts.timeout) * 1000;
  await withUtils(async (utils) => {
    await prepare(utils);
    const measured = [];
    let handled = 0;
    const runner = await startWorker(opts, async (payload) => {
      const t = wall();
      handled++;
      if (!payload.w) measured.push(t - payload.t);
    });
    await sleep(500); // the pool connected and listening

    const child = spawn(
      process.execPath,
      [
        fileURLToPath(import.meta.url),
        "enqueue",
        "--rate", String(opts.rate),
        "--seconds", String(opts.seconds),
        "--warmup", String(opts.warmup),
      ],
      { stdio: ["ignore", "pipe", "inherit"] },
    );
    let out = "";
    child.stdout.on("data", (d) => (out += d));
    const code = await new Promise((resolve) => child.on("close", resolve));
    const m = /RESULT enqueued=(\d+) errors=(\d+)/.exec(out);
    if (code !== 0 || !m) {
      await runner.stop();
      fail(`the enqueuer failed (exit ${code}): ${out.trim()}`);
    }
    const enqueued = Number(m[1]);
    while (handled < enqueued && Date.now() < deadline) await sleep(20);
    await runner.stop();
    if (handled < enqueued)
      fail(`timed out: ${handled} of ${enqueued} jobs handled`);
    measured.sort((a, b) => a - b);
    process.stdout.write(
      `RESULT jobs=${measured.length} enqueued=${enqueued} errors=${m[2]} ` +
        `p50_ms=${percentileCont(measured, 0.5).toFixed(4)} ` +
        `p99_ms=${percentileCont(measured, 0.99).toFixed(4)} ` +
        `max_ms=${measured[measured.length - 1].toFixed(4)} node=${process.version}\n`,
    );
  });
}

async function enqueue(opts) {
  await withUtils(async (utils) => {
    // Open the pool's connections before the first job is due.
    await Promise.all(
      Array.from({ length: 4 }, () =>
        utils.withPgClient((c) => c.query("SELECT 1")),
      ),
    );
    const total = Math.floor(opts.rate * (opts.warmup + opts.seconds));
    const warm = Math.floor(opts.rate * opts.warmup);
    const interval = 1000 / opts.rate;
    const t0 = performance.now() + 50;
    let i = 0;
    let ok = 0;
    let errors = 0;
    const pending = [];
    await new Promise((resolve) => {
      const tick = () => {
        const now = performance.now();
        while (i < total && t0 + i * interval <= now) {
          const payload = { t: wall(), w: i < warm };
          pending.push(
            utils.addJob("noop", payload).then(
              () => ok++,
              (e) => {
                if (errors++ === 0) process.stderr.write(`gw_bench: addJob: ${e}\n`);
              },
            ),
          );
          i++;
        }
        if (i < total)
          setTimeout(tick, Math.max(0, t0 + i * interval - performance.now()));
        else resolve();
      };
      tick();
    });
    await Promise.all(pending);
    process.stdout.write(`RESULT enqueued=${ok} errors=${errors}\n`);
  });
}

const [mode, ...rest] = process.argv.slice(2);
const opts = parseArgs(rest);
const modes = { throughput, latency, enqueue };
if (!modes[mode]) fail("usage: node gw_bench.mjs throughput|latency|enqueue [options]");
modes[mode](opts)
  .then(() => process.exit(0))
  .catch((e) => fail(e && e.stack ? e.stack : String(e)));
