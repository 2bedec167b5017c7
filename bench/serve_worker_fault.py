#!/usr/bin/env python3
"""kill -9 of a worker while `muflow serve` streams a completion (#18 item 5, serving side).

Streams a 200-token greedy completion (ignore_eos) from a running `muflow serve` on PORT,
sends SIGKILL to worker process PID at the 40th streamed token, and prints the time from the
kill to the next streamed token next to the median inter-token gap before it. Start the
server with `muflow serve topologies/sync-kjv-2workers.toml --spawn-workers --port PORT`
(its log prints each worker's pid). Usage: serve_worker_fault.py PORT PID
"""
import http.client, json, os, signal, sys, time, statistics
port, pid = int(sys.argv[1]), int(sys.argv[2])
conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
body = json.dumps({"model": "m", "prompt": "And God said, Let there be", "max_tokens": 200,
                   "temperature": 0, "stream": True, "ignore_eos": True})
conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
r = conn.getresponse()
times, killed, n = [], None, 0
for line in r:
    line = line.strip()
    if not line.startswith(b"data: ") or line == b"data: [DONE]":
        continue
    t = time.monotonic()
    times.append(t)
    n += 1
    if n == 40:
        os.kill(pid, signal.SIGKILL)
        killed = time.monotonic()
after = [t for t in times if t > killed]
gaps = [b - a for a, b in zip(times[:39], times[1:40])]
print(f"tokens {n}; median ITL before the kill {1e3*statistics.median(gaps):.1f} ms; "
      f"kill -9 -> next token {1e3*(after[0]-killed):.1f} ms")
