#!/usr/bin/env python3
"""`muflow trace view` end to end, in a real browser.

1. `muflow run --synthetic --quiet --trace` on the synthetic demo (4 devices), twice.
2. `muflow trace view` of the first run, and of the first `--compare` the second.
3. Each page opened in headless Debian Chromium (--dump-dom): the page's own script must
   set body data-status="ok", draw exactly one device-row per device and the heatmaps,
   and leave #errors empty; Chromium's console log (--enable-logging=stderr) must show no
   uncaught or console errors. A screenshot of each page lands in the work dir.
4. A synthetic trace of 1,000,000 events (the trace contract of engine/trace/trace.hpp): its page
   must stay below 15 MB and render without errors; its size and render time are printed.

Exits 77 (ctest SKIP_RETURN_CODE) when /usr/bin/chromium is absent: install it with
tools/install-deps.sh. Usage: test_trace_view_browser.py --muflow BIN --work-dir DIR
[--data-dir DIR (unused)] [--events N].
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--virtual-time-budget=5000",
]
MAX_HTML_BYTES = 15_000_000

failures = []


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what, flush=True)
    if not cond:
        failures.append(what)
    return cond


def run(cmd, **kw):
    print("$ " + " ".join(cmd), flush=True)
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def chromium(html, work, tag, extra):
    """Runs headless Chromium on `html` with a fresh profile; returns (stdout, stderr)."""
    profile = os.path.join(work, "chromium-profile-" + tag)
    shutil.rmtree(profile, ignore_errors=True)
    os.makedirs(profile)
    p = run([CHROMIUM] + CHROMIUM_FLAGS + ["--user-data-dir=" + profile] + extra +
            ["file://" + os.path.abspath(html)], timeout=240)
    shutil.rmtree(profile, ignore_errors=True)
    return p.stdout, p.stderr


def inspect_page(html, work, tag, num_devices, num_heatmaps, expect_queues):
    """Opens the page twice (DOM dump; console log + screenshot) and checks both."""
    dom, _ = chromium(html, work, tag, ["--dump-dom"])
    body = re.search(r"<body[^>]*>", dom)
    body = body.group(0) if body else ""
    check('data-status="ok"' in body, f"{tag}: body data-status is ok ({body!r})")
    rows = len(re.findall(r'data-testid="device-row"', dom))
    check(rows == num_devices, f"{tag}: {rows} device rows, expected {num_devices}")
    heat = len(re.findall(r'data-testid="heatmap"', dom))
    check(heat == num_heatmaps, f"{tag}: {heat} heatmaps, expected {num_heatmaps}")
    errors = re.search(r'<div id="errors"[^>]*>(.*?)</div>\s*<main', dom, re.S)
    check(errors is not None and errors.group(1).strip() == "",
          f"{tag}: #errors is empty ({errors.group(1)[:300] if errors else 'missing'!r})")
    if expect_queues:
        queues = len(re.findall(r'data-testid="queue-chart"', dom))
        check(queues >= 1, f"{tag}: {queues} queue charts (trace has queue counters)")
    ms = re.search(r'data-render-ms="(\d+)"', body)
    shot = os.path.join(work, tag + ".png")
    if os.path.exists(shot):
        os.remove(shot)
    _, log = chromium(html, work, tag + "-log",
                      ["--enable-logging=stderr", "--v=0", "--window-size=1400,1000",
                       "--screenshot=" + shot])
    bad = [line for line in log.splitlines()
           if "Uncaught" in line or ("CONSOLE" in line and re.search(r"error", line, re.I))]
    check(not bad, f"{tag}: no uncaught/console errors in Chromium's log {bad[:3]}")
    png = b""
    if os.path.exists(shot):
        with open(shot, "rb") as f:
            png = f.read(8)
    check(png == b"\x89PNG\r\n\x1a\n", f"{tag}: screenshot {shot}")
    return int(ms.group(1)) if ms else -1


def trace_facts(path):
    with open(path) as f:
        trace = json.load(f)
    pids = {e["pid"] for e in trace["traceEvents"] if e.get("ph") == "M" and e.get("name") == "process_name"}
    queues = any(e.get("ph") == "C" and str(e.get("name", "")).startswith("queue ") for e in trace["traceEvents"])
    return len(pids), queues


def write_big_trace(path, num_events, num_devices=8, num_blocks=8, num_experts=16):
    """A synthetic trace following engine/trace/trace.hpp's contract with `num_events` events."""
    experts_per_device = num_experts // num_devices
    out = open(path, "w")
    out.write('{"traceEvents":[\n')
    lines = []
    for d in range(num_devices):
        lines.append('{"args":{"name":"cpu%d (cpu, node0)"},"name":"process_name","ph":"M","pid":%d,"tid":0}' % (d, d))
        tid = 0
        for b in range(num_blocks):
            lines.append('{"args":{"name":"attn b%d r%d"},"name":"thread_name","ph":"M","pid":%d,"tid":%d}' % (b, d, d, tid))
            tid += 1
            for k in range(experts_per_device):
                e = d * experts_per_device + k
                lines.append('{"args":{"name":"expert b%d e%d"},"name":"thread_name","ph":"M","pid":%d,"tid":%d}' % (b, e, d, tid))
                tid += 1
        lines.append('{"args":{"name":"collective waits"},"name":"thread_name","ph":"M","pid":%d,"tid":10000}' % d)
    out.write(",\n".join(lines))
    count = 0
    ts = 0.0
    it = 0
    state = 12345
    def rnd():
        nonlocal state
        state = (state * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        return (state >> 33) / float(1 << 31)
    while count < num_events:
        for b in range(num_blocks):
            tid_attn = b * (1 + experts_per_device)
            end = ts
            buf = []
            for d in range(num_devices):
                t = ts + rnd() * 3
                dur = 20 + rnd() * 10
                buf.append('{"args":{"block":%d,"index":%d,"iteration":%d,"phase":"sync","tokens":%d},"dur":%.3f,"name":"attn b%d r%d","ph":"X","pid":%d,"tid":%d,"ts":%.3f}'
                           % (b, d, it, 8, dur, b, d, d, tid_attn, t))
                buf.append('{"args":{"busy":1},"name":"busy","ph":"C","pid":%d,"tid":0,"ts":%.3f}' % (d, t))
                buf.append('{"args":{"tokens":%d},"name":"queue attn b%d r%d","ph":"C","pid":%d,"tid":0,"ts":%.3f}' % (int(rnd() * 8), b, d, d, t))
                end = max(end, t + dur)
                buf.append('{"args":{"block":%d,"collective":"dispatch","iteration":%d},"cat":"wait","dur":%.3f,"name":"wait dispatch b%d","ph":"X","pid":%d,"tid":10000,"ts":%.3f}'
                           % (b, it, 5 + rnd() * 20, b, d, t + dur))
            ts = end + 25
            for d in range(num_devices):
                t = ts
                for k in range(experts_per_device):
                    e = d * experts_per_device + k
                    tokens = int(1 + rnd() * (30 if e % 5 else 90))
                    dur = 2 + tokens * 0.4
                    buf.append('{"args":{"block":%d,"index":%d,"iteration":%d,"phase":"sync","tokens":%d},"dur":%.3f,"name":"expert b%d e%d","ph":"X","pid":%d,"tid":%d,"ts":%.3f}'
                               % (b, e, it, tokens, dur, b, e, d, tid_attn + 1 + k, t))
                    buf.append('{"args":{"tokens":%d},"name":"queue expert b%d e%d","ph":"C","pid":%d,"tid":0,"ts":%.3f}' % (tokens, b, e, d, t))
                    t += dur + 0.5
                buf.append('{"args":{"busy":0},"name":"busy","ph":"C","pid":%d,"tid":0,"ts":%.3f}' % (d, t))
                end = max(end, t)
            buf.append('{"args":{"block":%d,"iteration":%d},"name":"dispatch all-to-all","ph":"i","pid":0,"s":"g","tid":0,"ts":%.3f}' % (b, it, ts))
            ts = end + 10
            count += len(buf)
            out.write(",\n" + ",\n".join(buf))
        it += 1
    out.write('\n],"displayTimeUnit":"ms","otherData":{"wiring":"sync","topology":"synthetic 1M",'
              '"num_events":%d,"num_dropped_events":0,"max_events":%d,"num_devices":%d,"num_layers":%d,"num_experts":%d}}\n'
              % (count, count, num_devices, num_blocks, num_experts))
    out.close()
    return count


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--muflow", required=True)
    ap.add_argument("--work-dir", required=True)
    ap.add_argument("--data-dir", default="")
    ap.add_argument("--events", type=int, default=1_000_000)
    args = ap.parse_args()
    if not os.path.exists(CHROMIUM):
        print(f"SKIP: {CHROMIUM} is absent (tools/install-deps.sh installs Debian's chromium)")
        return 77
    work = os.path.abspath(args.work_dir)
    os.makedirs(work, exist_ok=True)

    traces = []
    for name in ("run-a.json", "run-b.json"):
        path = os.path.join(work, name)
        p = run([args.muflow, "run", "--synthetic", "--quiet", "--trace", path])
        if not check(p.returncode == 0, f"muflow run -> {name} (rc {p.returncode}) {p.stderr[-500:]}"):
            return 1
        traces.append(path)
    num_devices, has_queues = trace_facts(traces[0])
    check(num_devices == 4, f"synthetic demo traces 4 devices ({num_devices})")

    single = os.path.join(work, "report.html")
    p = run([args.muflow, "trace", "view", traces[0], "-o", single])
    if not check(p.returncode == 0, f"trace view (rc {p.returncode}) {p.stdout}{p.stderr}"):
        return 1
    inspect_page(single, work, "report", num_devices, 2, has_queues)

    compare = os.path.join(work, "compare.html")
    p = run([args.muflow, "trace", "view", traces[0], "--compare", traces[1], "-o", compare,
             "--title", "default run <A> vs <B>"])
    if check(p.returncode == 0, f"trace view --compare (rc {p.returncode}) {p.stdout}{p.stderr}"):
        inspect_page(compare, work, "compare", 2 * num_devices, 4, has_queues)
        with open(compare) as f:
            text = f.read()
        check("default run &lt;A&gt; vs &lt;B&gt;" in text, "compare: the title is HTML-escaped")

    p = run([args.muflow, "trace", "view", os.path.join(work, "missing.json"), "-o", os.path.join(work, "x.html")])
    check(p.returncode == 1 and "missing.json" in p.stderr, f"missing trace: exit 1 naming the file ({p.stderr.strip()})")

    big = os.path.join(work, "big-trace.json")
    t = time.time()
    n = write_big_trace(big, args.events)
    print(f"synthetic trace: {n} events, {os.path.getsize(big) / 1e6:.1f} MB, {time.time() - t:.1f} s", flush=True)
    big_html = os.path.join(work, "big-report.html")
    t = time.time()
    p = run([args.muflow, "trace", "view", big, "-o", big_html])
    view_s = time.time() - t
    if check(p.returncode == 0, f"trace view of {n} events (rc {p.returncode}) {p.stderr[-500:]}"):
        size = os.path.getsize(big_html)
        print(f"big report: {size / 1e6:.2f} MB, trace view took {view_s:.1f} s", flush=True)
        check(size < MAX_HTML_BYTES, f"{n}-event report is {size} bytes < {MAX_HTML_BYTES}")
        ms = inspect_page(big_html, work, "big-report", 8, 2, True)
        print(f"big report: first render {ms} ms in headless Chromium", flush=True)
    os.remove(big)

    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
