// Runs idem's benchmark workload (docs/benchmarks.md) with Powertools for AWS Lambda
// (TypeScript) idempotency: makeIdempotent with a DynamoDBPersistenceLayer, against the
// DynamoDB endpoint it is given (cmd/bench's counting proxy in front of dynalite), and writes
// one JSON document (scenario → mode → figures) to --out. `go run ./cmd/bench peers` starts
// it once per run; it is not meant to be run by hand, though it can be:
//
//   node --expose-gc run.mjs --endpoint http://127.0.0.1:PORT --n 500 --warmup 200 --run 1 --out out.json
//
// Figures per scenario and mode: p50 and p99 of one wrapped call (and p1, p25 and p75 for the
// charts), events/s, client CPU per
// event (process.cpuUsage: user+system time of this whole process), DynamoDB calls by
// operation and the capacity units the proxy charged them (read from the proxy before and
// after, so both libraries are counted and charged at the wire the same way), handler
// executions and outcomes. Progress goes to stderr.

import { CreateTableCommand, DeleteTableCommand, DescribeTableCommand, DynamoDBClient, PutItemCommand } from '@aws-sdk/client-dynamodb';
import {
  IdempotencyAlreadyInProgressError,
  IdempotencyConfig,
  IdempotencyValidationError,
  makeIdempotent,
} from '@aws-lambda-powertools/idempotency';
import { DynamoDBPersistenceLayer } from '@aws-lambda-powertools/idempotency/dynamodb';
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

const RETENTION_S = 3600;
const INVOCATION_MS = 30_000;
const KEY_PREFIX = 'bench';
const COUNTS_PATH = '/__bench/counts';
const CAPACITY_PATH = '/__bench/capacity';
const MODES = [
  { name: 'seq', conc: 1 },
  { name: 'c16', conc: 16 },
];

const { values: opts } = parseArgs({
  options: {
    endpoint: { type: 'string' },
    n: { type: 'string', default: '2000' },
    warmup: { type: 'string', default: '200' },
    run: { type: 'string', default: '1' },
    only: { type: 'string', default: '' },
    'race-trials': { type: 'string', default: '10' },
    out: { type: 'string' },
  },
});
if (!opts.endpoint || !opts.out) {
  console.error('run.mjs: --endpoint and --out are required');
  process.exit(2);
}
const N = Number(opts.n);
const WARMUP = Number(opts.warmup);
const RUN = Number(opts.run);
const ONLY = opts.only ? new RegExp(opts.only) : null;
const RACE_TRIALS = Number(opts['race-trials']);
const RACE_CALLERS = 32;
const RACE_SLEEP_MS = 50;
// A fresh table per run, as idem's.
const TABLE = `powertools_bench_r${RUN}`;

const client = new DynamoDBClient({
  region: 'us-east-1',
  endpoint: opts.endpoint,
  credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
});

// Event i of a scenario (docs/benchmarks.md): the key is its id.
function makeEvent(scenario, mode, i, amount) {
  return { id: `${scenario}-${mode}-${i}`, n: i, amount, currency: 'EUR' };
}

function makeEvents(scenario, mode, n, amountDelta = 0) {
  return Array.from({ length: n }, (_, i) => makeEvent(scenario, mode, i, 100 + i + amountDelta));
}

// A Lambda context whose deadline is INVOCATION_MS from the start of the call: Powertools
// reads it for the in-progress lease.
function lambdaContext() {
  const deadline = Date.now() + INVOCATION_MS;
  return {
    functionName: 'bench',
    awsRequestId: 'bench',
    getRemainingTimeInMillis: () => deadline - Date.now(),
  };
}

class TransientError extends Error {
  constructor() {
    super('bench: transient failure');
    this.name = 'TransientError';
  }
}

// counter counts the handler's executions.
const counter = { execs: 0 };

// handler marks the call's Lambda context, so that each call knows whether its handler ran;
// it sleeps sleepMs first when asked (c_race).
function handler(throwIt, sleepMs = 0) {
  return async (event, context) => {
    counter.execs++;
    context.executed = true;
    if (sleepMs > 0) await new Promise((r) => setTimeout(r, sleepMs));
    if (throwIt) throw new TransientError();
    return { ok: true, id: event.id, n: event.n };
  };
}

// idempotent wraps handler with Powertools: key = the id field, retention 3600 s; extra
// adds IdempotencyConfig options (payload validation, local cache). A persistence layer
// keeps the first configuration it sees, so each configuration gets its own layer; all
// share one SDK client.
function idempotent(throwIt, extra = {}, sleepMs = 0) {
  const config = new IdempotencyConfig({ eventKeyJmesPath: 'id', expiresAfterSeconds: RETENTION_S, ...extra });
  const persistenceStore = new DynamoDBPersistenceLayer({ tableName: TABLE, awsSdkV3Client: client });
  return makeIdempotent(handler(throwIt, sleepMs), { persistenceStore, config, keyPrefix: KEY_PREFIX });
}

// outcome names what a call got, in idem's vocabulary where one applies.
function outcome(err, executed) {
  if (!err) return executed ? 'executed' : 'replayed';
  if (err instanceof IdempotencyValidationError) return 'key_reused';
  if (err instanceof IdempotencyAlreadyInProgressError) return 'in_progress';
  if (err instanceof TransientError) return 'handler_error';
  return 'error';
}

// setupLayer returns a persistence layer configured as the wrapped handlers' ones (same
// key prefix and key path), to pre-write records in Powertools' own layout.
function setupLayer(expiresAfterSeconds) {
  const layer = new DynamoDBPersistenceLayer({ tableName: TABLE, awsSdkV3Client: client });
  layer.configure({ config: new IdempotencyConfig({ eventKeyJmesPath: 'id', expiresAfterSeconds }), keyPrefix: KEY_PREFIX });
  return layer;
}

// In-progress records whose lease ends leaseMs from now.
const prewriteInProgress = (leaseMs) => (evs) => {
  const layer = setupLayer(RETENTION_S);
  return pool(evs, 16, (ev) => layer.saveInProgress(ev, leaseMs));
};

// Completed records whose retention ended 10 s ago (still present, as after DynamoDB's lazy TTL).
const prewriteExpiredCompleted = (evs) => {
  const layer = setupLayer(-10);
  return pool(evs, 16, async (ev) => {
    await layer.saveInProgress(ev, INVOCATION_MS);
    await layer.saveSuccess(ev, { ok: true, id: ev.id, n: ev.n });
  });
};

// The workload's scenarios, in order: each one that resends events follows the one that
// first sent them. fn(mode) returns the wrapped call, (event, context) => result; expect
// and execs are the outcome every call must get and the handler's executions per event.
function scenarios() {
  const base = idempotent(false);
  const throwing = idempotent(true);
  const validating = idempotent(false, { payloadValidationJmesPath: '@' });
  const own = (name, delta = 0) => (mode) => makeEvents(name, mode, N, delta);
  return [
    { name: 'a_unique', events: own('a_unique'), fn: () => base, expect: 'executed', execs: 1 },
    { name: 'b_duplicate_completed', events: own('a_unique'), fn: () => base, expect: 'replayed', execs: 0 },
    { name: 'd_first', events: own('d_first'), fn: () => validating, expect: 'executed', execs: 1 },
    { name: 'd_mismatch', events: own('d_first', 1), fn: () => validating, expect: 'key_reused', execs: 0 },
    { name: 'd_same', events: own('d_first'), fn: () => validating, expect: 'replayed', execs: 0 },
    { name: 'e_throw', events: own('e_throw'), fn: () => throwing, expect: 'handler_error', execs: 1 },
    { name: 'e_retry', events: own('e_throw'), fn: () => base, expect: 'executed', execs: 1 },
    {
      name: 'f_expired_inprogress', events: own('f_expired_inprogress'), setup: prewriteInProgress(-1000),
      fn: () => base, expect: 'executed', execs: 1,
    },
    {
      name: 'f_live_inprogress', events: own('f_live_inprogress'), setup: prewriteInProgress(600_000),
      fn: () => base, expect: 'in_progress', execs: 0,
    },
    {
      name: 'f_completed_expired', events: own('f_completed_expired'), setup: prewriteExpiredCompleted,
      fn: () => base, expect: 'executed', execs: 1,
    },
    // The cache lives in its persistence layer: one per mode, as idem's cached runner.
    { name: 'g_cache_first', events: own('g_cache_first'), fn: (m) => m.cached, expect: 'executed', execs: 1 },
    { name: 'g_cache_duplicate', events: own('g_cache_first'), fn: (m) => m.cached, expect: 'replayed', execs: 0 },
    {
      name: 'ref_sdk_putitem', events: own('ref_sdk_putitem'), fn: () => async (ev, context) => {
        counter.execs++;
        context.executed = true;
        await client.send(new PutItemCommand({
          TableName: TABLE,
          Item: {
            id: { S: ev.id },
            payload: { S: JSON.stringify(ev) },
            result: { S: JSON.stringify({ ok: true, id: ev.id, n: ev.n }) },
          },
        }));
      }, expect: 'executed', execs: 1,
    },
  ];
}

const resends = {
  b_duplicate_completed: 'a_unique',
  d_mismatch: 'd_first',
  d_same: 'd_first',
  e_retry: 'e_throw',
  g_cache_duplicate: 'g_cache_first',
};

// pool calls fn on every item with conc in flight; it rejects with the first error.
async function pool(items, conc, fn) {
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      await fn(items[i], i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(conc, items.length) }, worker));
}

async function counts() {
  const resp = await fetch(opts.endpoint + COUNTS_PATH);
  if (!resp.ok) throw new Error(`proxy counts: HTTP ${resp.status}`);
  const raw = await resp.json();
  const out = {};
  for (const [k, v] of Object.entries(raw)) {
    const op = k.slice(k.lastIndexOf('.') + 1);
    out[op] = (out[op] ?? 0) + v;
  }
  return out;
}

// capacity reads the proxy's capacity tallies: { totals: { op: tally }, errors, last_error }.
async function capacity() {
  const resp = await fetch(opts.endpoint + CAPACITY_PATH);
  if (!resp.ok) throw new Error(`proxy capacity: HTTP ${resp.status}`);
  return resp.json();
}

// capacityDelta is what the proxy charged between two reads, in cmd/bench's capDelta shape.
function capacityDelta(before, after) {
  const totals = {};
  for (const [op, t] of Object.entries(after.totals ?? {})) {
    const b = before.totals?.[op] ?? {};
    const d = {};
    for (const [k, v] of Object.entries(t)) d[k] = v - (b[k] ?? 0);
    if (d.calls !== 0) totals[op] = d;
  }
  return { Totals: totals, Errors: (after.errors ?? 0) - (before.errors ?? 0), Last: after.last_error ?? '' };
}

function percentile(sorted, q) {
  if (sorted.length === 0) return 0;
  const i = Math.max(0, Math.min(Math.ceil(q * sorted.length) - 1, sorted.length - 1));
  return sorted[i];
}

// drive makes one call per event with conc in flight and measures them.
async function drive(evs, conc, fn) {
  globalThis.gc?.();
  const execs0 = counter.execs;
  const c0 = await counts();
  const k0 = await capacity();
  const cpu0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  const lat = new Array(evs.length);
  const outs = {};
  let firstError = '';
  await pool(evs, conc, async (ev, i) => {
    const s = process.hrtime.bigint();
    const context = lambdaContext();
    let err = null;
    try {
      await fn(ev, context);
    } catch (e) {
      err = e;
    }
    lat[i] = Number(process.hrtime.bigint() - s) / 1e6;
    const o = outcome(err, context.executed === true);
    outs[o] = (outs[o] ?? 0) + 1;
    if (o === 'error' && !firstError) firstError = `${err.name}: ${err.message}`;
  });
  const wallMs = Number(process.hrtime.bigint() - t0) / 1e6;
  const cpu = process.cpuUsage(cpu0);
  const c1 = await counts();
  const k1 = await capacity();
  lat.sort((a, b) => a - b);
  const calls = {};
  for (const [k, v] of Object.entries(c1)) {
    const d = v - (c0[k] ?? 0);
    if (d !== 0) calls[k] = d;
  }
  return {
    p50_ms: percentile(lat, 0.5),
    p99_ms: percentile(lat, 0.99),
    latency_ms: { p1: percentile(lat, 0.01), p25: percentile(lat, 0.25), p50: percentile(lat, 0.5), p75: percentile(lat, 0.75), p99: percentile(lat, 0.99) },
    events_per_s: evs.length / (wallMs / 1000),
    client_cpu_us_per_event: (cpu.user + cpu.system) / evs.length,
    calls,
    capacity: capacityDelta(k0, k1),
    executions: counter.execs - execs0,
    outcomes: outs,
    first_error: firstError,
  };
}

// race fires RACE_CALLERS calls with one key at once, RACE_TRIALS times (c_race): how many
// times the handler ran per key, what the calls got, their latencies and the calls made.
async function race() {
  const fn = idempotent(false, {}, RACE_SLEEP_MS);
  const res = { executions_per_key: [], outcomes: {}, winner_ms: [], others_p50_ms: [] };
  const c0 = await counts();
  const k0 = await capacity();
  for (let t = 0; t < RACE_TRIALS; t++) {
    const ev = makeEvent('c_race', 'c32', t, 100 + t);
    const execs0 = counter.execs;
    const calls = Array.from({ length: RACE_CALLERS }, async () => {
      const context = lambdaContext();
      const s = process.hrtime.bigint();
      let err = null;
      try {
        await fn(ev, context);
      } catch (e) {
        err = e;
      }
      return { ms: Number(process.hrtime.bigint() - s) / 1e6, o: outcome(err, context.executed === true) };
    });
    const done = await Promise.all(calls);
    res.executions_per_key.push(counter.execs - execs0);
    const others = [];
    for (const { ms, o } of done) {
      res.outcomes[o] = (res.outcomes[o] ?? 0) + 1;
      if (o === 'executed') res.winner_ms.push(ms);
      else others.push(ms);
    }
    others.sort((a, b) => a - b);
    res.others_p50_ms.push(percentile(others, 0.5));
  }
  const c1 = await counts();
  res.capacity = capacityDelta(k0, await capacity());
  res.calls = {};
  for (const [k, v] of Object.entries(c1)) {
    const d = v - (c0[k] ?? 0);
    if (d !== 0) res.calls[k] = d;
  }
  console.error(`powertools run ${RUN} c_race executions per key ${JSON.stringify(res.executions_per_key)}, outcomes ${JSON.stringify(res.outcomes)}, calls ${JSON.stringify(res.calls)}`);
  return res;
}

async function createTable() {
  await client.send(new CreateTableCommand({
    TableName: TABLE,
    AttributeDefinitions: [{ AttributeName: 'id', AttributeType: 'S' }],
    KeySchema: [{ AttributeName: 'id', KeyType: 'HASH' }],
    BillingMode: 'PAY_PER_REQUEST',
  }));
  for (let i = 0; i < 100; i++) {
    const out = await client.send(new DescribeTableCommand({ TableName: TABLE }));
    if (out.Table?.TableStatus === 'ACTIVE') return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`table ${TABLE} not active after 5 s`);
}

async function main() {
  const result = { library: '@aws-lambda-powertools/idempotency', run: RUN, n: N, warmup: WARMUP, scenarios: {} };
  await createTable();
  try {
    const every = scenarios();
    const list = every.filter((sc) => !ONLY || ONLY.test(sc.name));
    const all = new Map(every.map((sc) => [sc.name, sc]));
    for (const m of MODES) {
      const warm = idempotent(false);
      const warmEvs = makeEvents('warmup', m.name, WARMUP);
      for (let k = 0; k < 2; k++) await pool(warmEvs, m.conc, (ev) => warm(ev, lambdaContext()));
      const mode = { ...m, cached: idempotent(false, { useLocalCache: true, maxLocalCacheSize: 2 * N + 2 * WARMUP }) };
      const ran = new Set();
      for (const sc of list) {
        const first = resends[sc.name];
        if (first && !ran.has(first)) {
          // The events this scenario resends were not sent yet (--only): send them first, unmeasured.
          const prior = all.get(first);
          const fn = prior.fn(mode);
          await pool(prior.events(m.name), 16, (ev) => fn(ev, lambdaContext()).catch(() => {}));
          ran.add(first);
        }
        const evs = sc.events(m.name);
        if (sc.setup) await sc.setup(evs);
        const fig = await drive(evs, m.conc, sc.fn(mode));
        fig.expected_outcome = sc.expect;
        fig.expected_executions_per_event = sc.execs;
        ran.add(sc.name);
        (result.scenarios[sc.name] ??= {})[m.name] = fig;
        console.error(`powertools run ${RUN} ${sc.name.padEnd(22)} ${m.name.padEnd(4)} p50 ${fig.p50_ms.toFixed(2).padStart(6)} ms  p99 ${fig.p99_ms.toFixed(2).padStart(6)} ms  cpu ${fig.client_cpu_us_per_event.toFixed(0).padStart(5)} µs/ev  calls ${JSON.stringify(fig.calls)}  ${JSON.stringify(fig.outcomes)}`);
      }
    }
    if (!ONLY || ONLY.test('c_race')) result.c_race = await race();
  } finally {
    await client.send(new DeleteTableCommand({ TableName: TABLE })).catch((e) => console.error(`delete table ${TABLE}: ${e.message}`));
  }
  writeFileSync(opts.out, JSON.stringify(result, null, 1));
}

main().catch((e) => {
  console.error(`run.mjs: ${e.stack ?? e}`);
  process.exit(1);
});
