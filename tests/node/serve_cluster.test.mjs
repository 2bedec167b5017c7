// `muflow serve` across processes (#18): topologies/sync-kjv-2workers.toml, every device in one
// of two loopback workers that `--spawn-workers` starts, driven with the official OpenAI Node
// client. Completions are those of a one-process server on the same model (greedy); `kill -9`
// of a worker while a completion streams loses nothing: the stream ends with the one-process
// text, later requests are served by the survivor, /metrics counts the recovery; the server
// starts the killed worker again on its port and takes it back (a rejoin, with the same
// completions), and SIGTERM still stops the server and its workers cleanly.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import OpenAI from 'openai';
import { SOURCE, startServer, metrics, sampleValue } from './serve_helpers.mjs';

const TOPOLOGY = path.join(SOURCE, 'topologies', 'sync-kjv-2workers.toml');
const PROMPTS = ['And God said, Let there be', 'In the beginning', 'And the LORD spake unto Moses'];

let single;   // one process: the embedded kjv model
let cluster;  // the same model on two workers
const clientOf = (s) => new OpenAI({ apiKey: 'none', baseURL: s.url + '/v1', maxRetries: 0 });

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

before(async () => {
  single = await startServer([]);
  // A heartbeat timeout of its own: the option reaches the driver (a loaded CI machine keeps
  // answering well within 3 s; the kill below is noticed by the connection, not by it).
  cluster = await startServer([TOPOLOGY, '--spawn-workers', '--heartbeat-timeout-ms', '3000']);
});

after(async () => {
  for (const s of [single, cluster]) if (s && s.proc.exitCode === null) s.proc.kill('SIGKILL');
});

test('completions across two workers are the one-process completions', async () => {
  for (const prompt of PROMPTS) {
    const args = { model: 'm', prompt, max_tokens: 24, temperature: 0 };
    const [want, got] = await Promise.all(
      [clientOf(single).completions.create(args), clientOf(cluster).completions.create(args)]);
    assert.equal(got.choices[0].text, want.choices[0].text, prompt);
    assert.equal(got.usage.completion_tokens, want.usage.completion_tokens, prompt);
  }
  const m = await metrics(cluster.url, 'none');
  assert.equal(sampleValue(m['muflow:worker_recoveries_total']), 0);
});

test('kill -9 of a worker while a completion streams loses nothing', async () => {
  const pids = [...cluster.log().matchAll(/worker \d+ \(devices [^)]*\) started on \S+ \(pid (\d+)\)/g)]
    .map((m) => Number(m[1]));
  assert.equal(pids.length, 2, cluster.log());
  const args = { model: 'm', prompt: PROMPTS[0], max_tokens: 48, temperature: 0 };
  const want = await clientOf(single).completions.create(args);

  const stream = await clientOf(cluster).completions.create({ ...args, stream: true });
  let text = '';
  let chunks = 0;
  for await (const chunk of stream) {
    text += chunk.choices[0]?.text ?? '';
    if (++chunks === 4) process.kill(pids[0], 'SIGKILL');
  }
  assert.ok(chunks > 4, 'the completion streamed past the kill');
  assert.equal(text, want.choices[0].text);
  // SIGKILL is delivered at once, but tearing down a process that holds a model takes the
  // kernel a moment: wait (bounded) until it is gone or a zombie.
  const gone = () => {
    try {
      return !alive(pids[0]) || fs.readFileSync(`/proc/${pids[0]}/stat`, 'utf8').includes(') Z ');
    } catch {
      return true;  // reaped between the two checks
    }
  };
  for (let i = 0; i < 100 && !gone(); ++i) await new Promise((r) => setTimeout(r, 20));
  assert.ok(gone(), 'the killed worker is gone');

  // The survivor serves what comes next.
  const next = { model: 'm', prompt: PROMPTS[1], max_tokens: 24, temperature: 0 };
  const [again, ref] = await Promise.all(
    [clientOf(cluster).completions.create(next), clientOf(single).completions.create(next)]);
  assert.equal(again.choices[0].text, ref.choices[0].text);
  const m = await metrics(cluster.url, 'none');
  assert.equal(sampleValue(m['muflow:worker_recoveries_total']), 1);
  assert.equal(sampleValue(m['muflow:num_requests_running']), 0);
  assert.equal(sampleValue(m['muflow:kv_cache_bytes']), 0);

  // The server starts the killed worker again on its port, and the engine takes it back.
  let rejoins = 0;
  for (let i = 0; i < 300 && rejoins === 0; ++i) {
    await new Promise((r) => setTimeout(r, 100));
    rejoins = sampleValue((await metrics(cluster.url, 'none'))['muflow:worker_rejoins_total']);
  }
  assert.equal(rejoins, 1, cluster.log());
  const restarted = cluster.log().match(/worker 1 started again on \S+ \(pid (\d+)\)/);
  assert.ok(restarted, cluster.log());
  const back = { model: 'm', prompt: PROMPTS[2], max_tokens: 24, temperature: 0 };
  const [afterBack, refBack] = await Promise.all(
    [clientOf(cluster).completions.create(back), clientOf(single).completions.create(back)]);
  assert.equal(afterBack.choices[0].text, refBack.choices[0].text);

  // SIGTERM stops the server, and its workers (the restarted one too) with it.
  cluster.proc.kill('SIGTERM');
  const exit = await cluster.exit;
  assert.equal(exit.code, 0, exit.log);
  for (const pid of [pids[1], Number(restarted[1])]) {
    for (let i = 0; i < 50 && alive(pid); ++i) await new Promise((r) => setTimeout(r, 100));
    assert.ok(!alive(pid), `worker pid ${pid} stopped with the server`);
  }
});
