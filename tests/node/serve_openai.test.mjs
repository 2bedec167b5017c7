// Drives `muflow serve` on the shipped kjv-mixtral-tiny-bf16 model with the official OpenAI
// Node client (npm `openai`) and parses /metrics with a Prometheus text-format parser
// (npm `parse-prometheus-text-format`). Run by ctest (tests/node/CMakeLists.txt) with
// MUFLOW_BINARY and MUFLOW_SOURCE_DIR set; `npm ci` in this folder installs the clients.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import OpenAI from 'openai';
import { BINARY, SOURCE, startServer, metrics, sampleValue, waitFor } from './serve_helpers.mjs';

const MODEL_DIR = path.join(SOURCE, 'models', 'kjv-mixtral-tiny-bf16');
const KEY = 'test-key-1234';
const PROMPT = 'And God said, Let there be';

let main;    // API key, 20 concurrent requests
let small;   // 1 concurrent request, 4 KiB bodies
let client;

before(async () => {
  main = await startServer(['--api-key', KEY, '--max-concurrent', '20', '--shutdown-grace', '20']);
  small = await startServer(['--max-concurrent', '1', '--max-body-bytes', '4096']);
  client = new OpenAI({ apiKey: KEY, baseURL: main.url + '/v1', maxRetries: 0 });
});

after(async () => {
  for (const s of [main, small]) if (s && s.proc.exitCode === null) s.proc.kill('SIGKILL');
});

test('GET /v1/models lists the model; /health needs no key', async () => {
  const models = await client.models.list();
  assert.equal(models.data.length, 1);
  assert.equal(models.data[0].id, 'kjv-mixtral-tiny-bf16');
  const health = await fetch(main.url + '/health');
  assert.equal(health.status, 200);
});

test('a wrong API key answers 401', async () => {
  const wrong = new OpenAI({ apiKey: 'nope', baseURL: main.url + '/v1', maxRetries: 0 });
  await assert.rejects(wrong.models.list(), (e) => e.status === 401);
  await assert.rejects(
    wrong.completions.create({ model: 'm', prompt: PROMPT, max_tokens: 2 }),
    (e) => e.status === 401 && /API key/.test(e.message));
});

test('greedy completion equals `muflow generate`', async () => {
  const gen = JSON.parse(execFileSync(BINARY, ['generate', '--model', MODEL_DIR, '--prompt',
    PROMPT, '--max-new-tokens', '24', '--json'], { encoding: 'utf8' }));
  const c = await client.completions.create(
    { model: 'kjv-mixtral-tiny-bf16', prompt: PROMPT, max_tokens: 24, temperature: 0 });
  assert.deepEqual(c.choices[0].token_ids, gen.output_ids);
  assert.equal(c.choices[0].text.trimStart(), gen.text);
  assert.equal(c.usage.prompt_tokens, gen.prompt_ids.length);
  assert.equal(c.usage.completion_tokens, gen.output_ids.length);
  assert.ok(['stop', 'length'].includes(c.choices[0].finish_reason));
});

test('streaming completion sends the same text, then usage and [DONE]', async () => {
  const args = { model: 'm', prompt: PROMPT, max_tokens: 12, temperature: 0 };
  const whole = await client.completions.create(args);
  const stream = await client.completions.create(
    { ...args, stream: true, stream_options: { include_usage: true } });
  let text = '';
  let finish = null;
  let usage = null;
  for await (const chunk of stream) {
    if (chunk.choices.length > 0) {
      text += chunk.choices[0].text;
      if (chunk.choices[0].finish_reason) finish = chunk.choices[0].finish_reason;
    }
    if (chunk.usage) usage = chunk.usage;
  }
  assert.equal(text, whole.choices[0].text);
  assert.equal(finish, whole.choices[0].finish_reason);
  assert.equal(usage.completion_tokens, whole.usage.completion_tokens);
});

test('chat completions, plain and streamed, agree', async () => {
  const messages = [{ role: 'user', content: 'Who begat Enos?' }];
  const whole = await client.chat.completions.create(
    { model: 'm', messages, max_tokens: 10, temperature: 0 });
  assert.equal(whole.object, 'chat.completion');
  assert.equal(whole.choices[0].message.role, 'assistant');
  const stream = await client.chat.completions.create(
    { model: 'm', messages, max_tokens: 10, temperature: 0, stream: true });
  let content = '';
  for await (const chunk of stream) content += chunk.choices[0]?.delta?.content ?? '';
  assert.equal(content, whole.choices[0].message.content);
  assert.ok(content.length > 0);
});

test('a seed reproduces a sampled completion; stop strings end it', async () => {
  const args = { model: 'm', prompt: PROMPT, max_tokens: 16, temperature: 1.0, seed: 7,
    ignore_eos: true };
  const a = await client.completions.create(args);
  const b = await client.completions.create(args);
  assert.deepEqual(a.choices[0].token_ids, b.choices[0].token_ids);
  const greedy = await client.completions.create(
    { model: 'm', prompt: PROMPT, max_tokens: 24, temperature: 0 });
  const words = greedy.choices[0].text.trim().split(' ');
  const stop = ' ' + words[2];
  const cut = await client.completions.create(
    { model: 'm', prompt: PROMPT, max_tokens: 24, temperature: 0, stop: [stop] });
  assert.equal(cut.choices[0].finish_reason, 'stop');
  assert.equal(cut.choices[0].text, greedy.choices[0].text.slice(0, greedy.choices[0].text.indexOf(stop)));
});

test('16 concurrent streams all complete', async () => {
  const runs = Array.from({ length: 16 }, async (_, i) => {
    const stream = await client.completions.create({ model: 'm', prompt: PROMPT + ' ' + i,
      max_tokens: 8, temperature: 0, ignore_eos: true, stream: true,
      stream_options: { include_usage: true } });
    let events = 0;
    let usage = null;
    for await (const chunk of stream) {
      if (chunk.choices.length > 0 && chunk.choices[0].finish_reason === null) events += 1;
      if (chunk.usage) usage = chunk.usage;
    }
    return { events, usage };
  });
  const results = await Promise.all(runs);
  for (const r of results) {
    assert.equal(r.events, 8);
    assert.equal(r.usage.completion_tokens, 8);
  }
});

test('a client that disconnects cancels its request and frees its KV cache', async () => {
  const before = await metrics(main.url, KEY);
  const aborts0 = sampleValue(before['muflow:request_success_total'], { finished_reason: 'abort' });
  const stream = await client.completions.create({ model: 'm', prompt: PROMPT, max_tokens: 1500,
    temperature: 0, ignore_eos: true, stream: true });
  let seen = 0;
  for await (const chunk of stream) {
    seen += chunk.choices.length;
    if (seen >= 3) break;  // leaving the loop aborts the HTTP request
  }
  await waitFor(async () => {
    const m = await metrics(main.url, KEY);
    return sampleValue(m['muflow:request_success_total'], { finished_reason: 'abort' }) === aborts0 + 1 &&
      sampleValue(m['muflow:num_requests_running']) === 0 &&
      sampleValue(m['muflow:kv_cache_bytes']) === 0;
  }, 'the cancelled request to free its KV cache');
  const m = await metrics(main.url, KEY);
  // It stopped far short of its 1500 tokens.
  assert.ok(sampleValue(m['muflow:generation_tokens_total']) < sampleValue(before['muflow:generation_tokens_total']) + 1500);
});

test('a full queue answers 429 with Retry-After', async () => {
  const c = new OpenAI({ apiKey: 'unused', baseURL: small.url + '/v1', maxRetries: 0 });
  const long = await c.completions.create({ model: 'm', prompt: PROMPT, max_tokens: 1500,
    temperature: 0, ignore_eos: true, stream: true });
  const it = long[Symbol.asyncIterator]();
  await it.next();  // the long request is in the engine
  await assert.rejects(c.completions.create({ model: 'm', prompt: PROMPT, max_tokens: 2 }),
    (e) => e.status === 429 && e.headers.get('retry-after') === '1');
  await it.return();
});

test('bad bodies answer 400 (OpenAI error body) and 413', async () => {
  const post = (body) => fetch(small.url + '/v1/completions',
    { method: 'POST', headers: { 'Content-Type': 'application/json' }, body });
  let res = await post('{"prompt": "x", ');
  assert.equal(res.status, 400);
  let body = await res.json();
  assert.equal(body.error.type, 'invalid_request_error');
  res = await post(JSON.stringify({ prompt: PROMPT, n: 2 }));
  assert.equal(res.status, 400);
  assert.equal((await res.json()).error.param, 'n');
  res = await post(JSON.stringify({ prompt: PROMPT, temperature: 'hot' }));
  assert.equal(res.status, 400);
  assert.equal((await res.json()).error.param, 'temperature');
  res = await post(JSON.stringify({ prompt: 'x'.repeat(10000) }));
  assert.equal(res.status, 413);
  body = await res.json();
  assert.equal(body.error.code, 'payload_too_large');
});

test('/metrics parses as Prometheus text and counts what was served', async () => {
  const m = await metrics(main.url, KEY);
  for (const name of ['muflow:num_requests_running', 'muflow:num_requests_waiting',
    'muflow:prompt_tokens_total', 'muflow:generation_tokens_total',
    'muflow:time_to_first_token_seconds', 'muflow:inter_token_latency_seconds',
    'muflow:e2e_request_latency_seconds', 'muflow:device_busy_ratio',
    'muflow:moe_expert_tokens_total', 'muflow:mu_queue_tokens', 'muflow:all_to_all_seconds_total']) {
    assert.ok(m[name], 'missing ' + name);
  }
  assert.equal(m['muflow:time_to_first_token_seconds'].type, 'HISTOGRAM');
  // (This parser keeps a labelled histogram's buckets but not its _sum/_count: read +Inf.)
  const ttft = m['muflow:time_to_first_token_seconds'].metrics[0];
  assert.ok(Number(ttft.buckets['+Inf']) >= 20);
  assert.ok(Number(ttft.buckets['0.001']) <= Number(ttft.buckets['1']));
  assert.ok(sampleValue(m['muflow:generation_tokens_total']) >= 16 * 8);
  const moe = m['muflow:moe_expert_tokens_total'].metrics.reduce((s, x) => s + Number(x.value), 0);
  assert.ok(moe > 0);
  assert.equal(m['muflow:device_busy_ratio'].metrics.length, 2);
});

test('SIGTERM lets in-flight requests finish, then exits 0', async () => {
  const stream = await client.completions.create({ model: 'm', prompt: PROMPT, max_tokens: 1000,
    temperature: 0, ignore_eos: true, stream: true, stream_options: { include_usage: true } });
  const it = stream[Symbol.asyncIterator]();
  await it.next();  // the request is running
  main.proc.kill('SIGTERM');
  let usage = null;
  let finish = null;
  for (let r = await it.next(); !r.done; r = await it.next()) {
    if (r.value.usage) usage = r.value.usage;
    if (r.value.choices.length > 0 && r.value.choices[0].finish_reason) finish = r.value.choices[0].finish_reason;
  }
  assert.equal(finish, 'length');
  assert.equal(usage.completion_tokens, 1000);
  const { code, signal, log } = await main.exit;
  assert.equal(signal, null, log);
  assert.equal(code, 0, log);
  assert.match(log, /SIGTERM: no new requests/);
});
