// What the `muflow serve` tests share: the binary and source folder (from ctest's
// environment), starting a server and reading its Prometheus metrics.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import parsePrometheusTextFormat from 'parse-prometheus-text-format';

export const BINARY = process.env.MUFLOW_BINARY;
export const SOURCE = process.env.MUFLOW_SOURCE_DIR;
assert.ok(BINARY && SOURCE, 'set MUFLOW_BINARY and MUFLOW_SOURCE_DIR');

// Starts `muflow serve --port 0 ...`; resolves with {proc, url, exit, log} once it prints its
// URL.
export function startServer(args) {
  return new Promise((resolve, reject) => {
    const proc = spawn(BINARY, ['serve', '--port', '0', ...args], {
      stdio: ['ignore', 'ignore', 'pipe'],
      env: { ...process.env, MUFLOW_MODELS_DIR: path.join(SOURCE, 'models') },
    });
    let log = '';
    const exit = new Promise((r) => proc.on('exit', (code, signal) => r({ code, signal, log })));
    const timer = setTimeout(() => reject(new Error('server did not start:\n' + log)), 60000);
    proc.stderr.on('data', (chunk) => {
      log += chunk.toString();
      const m = log.match(/on (http:\/\/127\.0\.0\.1:\d+)/);
      if (m) {
        clearTimeout(timer);
        resolve({ proc, url: m[1], exit, log: () => log });
      }
    });
    proc.on('exit', () => reject(new Error('server exited at start:\n' + log)));
  });
}

export async function metrics(url, key) {
  const res = await fetch(url + '/metrics', { headers: { Authorization: 'Bearer ' + key } });
  assert.equal(res.status, 200);
  const families = parsePrometheusTextFormat(await res.text());
  const byName = Object.fromEntries(families.map((f) => [f.name, f]));
  return byName;
}

export function sampleValue(family, labels = {}) {
  const m = family.metrics.find((s) =>
    Object.entries(labels).every(([k, v]) => s.labels && s.labels[k] === v));
  assert.ok(m, `no sample of ${family.name} with ${JSON.stringify(labels)}`);
  return Number(m.value);
}

export async function waitFor(predicate, what, timeoutMs = 20000) {
  const t0 = Date.now();
  for (;;) {
    if (await predicate()) return;
    if (Date.now() - t0 > timeoutMs) throw new Error('timed out waiting for ' + what);
    await new Promise((r) => setTimeout(r, 100));
  }
}
