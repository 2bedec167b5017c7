// muflow trace viewer: renders the report model (engine/trace_analysis, schema in
// tools/trace_viewer/README.md) embedded as JSON in #report-data. Plain DOM + canvas, no
// libraries. ASCII only (non-ASCII text is written as \u escapes): the file is embedded in a
// C++ header by embed.cmake.
(function () {
  'use strict';
  var MU = '\u00b5';
  var TIMES = '\u00d7';
  var DOT = ' \u00b7 ';

  // ---------------------------------------------------------------- small helpers
  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    if (attrs) {
      for (var k in attrs) {
        if (k === 'text') node.textContent = attrs[k];
        else if (k === 'class') node.className = attrs[k];
        else if (k === 'style') node.style.cssText = attrs[k];
        else if (k.slice(0, 2) === 'on') node.addEventListener(k.slice(2), attrs[k]);
        else node.setAttribute(k, attrs[k]);
      }
    }
    (children || []).forEach(function (c) {
      if (c == null) return;
      node.appendChild(typeof c === 'string' ? document.createTextNode(c) : c);
    });
    return node;
  }
  function num(x, d) { return typeof x === 'number' && isFinite(x) ? x : (d === undefined ? 0 : d); }
  function fmtInt(x) { return Math.round(num(x)).toLocaleString('en-US'); }
  function fmtPct(x) { return num(x).toFixed(1) + '%'; }
  function fmtCompact(x) {
    x = num(x);
    var a = Math.abs(x);
    if (a >= 1e9) return (x / 1e9).toFixed(a >= 1e10 ? 0 : 1) + 'G';
    if (a >= 1e6) return (x / 1e6).toFixed(a >= 1e7 ? 0 : 1) + 'M';
    if (a >= 1e4) return (x / 1e3).toFixed(0) + 'k';
    if (a >= 1e3) return (x / 1e3).toFixed(1) + 'k';
    return String(Math.round(x));
  }
  function sig(x, n) { return Number(x.toPrecision(n)).toString(); }
  /// Microseconds as a readable duration: 850 us, 12.4 ms, 3.21 s.
  function fmtUs(us) {
    us = num(us);
    var a = Math.abs(us);
    if (a < 1) return sig(us, 2) + ' ' + MU + 's';
    if (a < 1e3) return sig(us, 3) + ' ' + MU + 's';
    if (a < 1e6) return sig(us / 1e3, 3) + ' ms';
    return sig(us / 1e6, 3) + ' s';
  }
  function lowerBound(arr, key, value) {
    var lo = 0, hi = arr.length;
    while (lo < hi) { var mid = (lo + hi) >> 1; if (key(arr[mid]) < value) lo = mid + 1; else hi = mid; }
    return lo;
  }
  function clamp(x, lo, hi) { return x < lo ? lo : (x > hi ? hi : x); }

  // ---------------------------------------------------------------- palette
  var palette = {};
  function parseColor(s) {
    s = (s || '').trim();
    var m = /^#([0-9a-f]{6})$/i.exec(s);
    if (m) { var v = parseInt(m[1], 16); return [(v >> 16) & 255, (v >> 8) & 255, v & 255]; }
    m = /^#([0-9a-f]{3})$/i.exec(s);
    if (m) return [0, 1, 2].map(function (i) { return parseInt(m[1][i] + m[1][i], 16); });
    m = /rgba?\(([^)]+)\)/.exec(s);
    if (m) return m[1].split(',').slice(0, 3).map(function (t) { return parseFloat(t); });
    return [128, 128, 128];
  }
  function rgb(c, a) {
    return a === undefined ? 'rgb(' + c.map(Math.round).join(',') + ')'
                           : 'rgba(' + c.map(Math.round).join(',') + ',' + a + ')';
  }
  function mix(a, b, t) { return [0, 1, 2].map(function (i) { return a[i] + (b[i] - a[i]) * t; }); }
  function readPalette() {
    var cs = getComputedStyle(document.documentElement);
    ['bg', 'panel', 'panel-2', 'fg', 'muted', 'border', 'accent', 'attn', 'expert', 'sampler',
     'other', 'wait', 'idle', 'bad', 'good', 'heat-0', 'heat-1', 'heat-2', 'heat-3', 'heat-4'
    ].forEach(function (k) { palette[k] = parseColor(cs.getPropertyValue('--' + k)); });
    palette.grid = cs.getPropertyValue('--grid').trim() || 'rgba(128,128,128,0.1)';
    palette.hatch = null;
  }
  function heatColor(t) {
    t = clamp(t, 0, 1) * 4;
    var i = Math.min(3, Math.floor(t));
    return mix(palette['heat-' + i], palette['heat-' + (i + 1)], t - i);
  }
  function hatchPattern(ctx) {
    if (!palette.hatch) {
      var c = document.createElement('canvas');
      c.width = c.height = 6;
      var g = c.getContext('2d');
      g.strokeStyle = rgb(palette.wait, 0.9);
      g.lineWidth = 1.4;
      g.beginPath();
      g.moveTo(-1, 7); g.lineTo(7, -1);
      g.moveTo(5, 7); g.lineTo(7, 5);
      g.moveTo(-1, 1); g.lineTo(1, -1);
      g.stroke();
      palette.hatch = c;
    }
    return ctx.createPattern(palette.hatch, 'repeat');
  }

  // ---------------------------------------------------------------- drawing scheduler
  var drawers = [];
  var pending = new Set();
  var frameRequested = false;
  function schedule(d) {
    pending.add(d);
    if (!frameRequested) {
      frameRequested = true;
      requestAnimationFrame(function () {
        frameRequested = false;
        var list = Array.from(pending);
        pending.clear();
        list.forEach(function (x) { x.draw(); });
      });
    }
  }
  function scheduleAll() { drawers.forEach(schedule); }
  /// Sizes a canvas to its CSS box at device-pixel resolution; returns {ctx, w, h} in CSS px.
  function prepare(canvas) {
    var dpr = window.devicePixelRatio || 1;
    var w = Math.max(1, canvas.clientWidth), h = Math.max(1, canvas.clientHeight);
    if (canvas.width !== Math.round(w * dpr) || canvas.height !== Math.round(h * dpr)) {
      canvas.width = Math.round(w * dpr);
      canvas.height = Math.round(h * dpr);
    }
    var ctx = canvas.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, w, h);
    return { ctx: ctx, w: w, h: h };
  }

  // ---------------------------------------------------------------- tooltip
  var tooltip = document.getElementById('tooltip');
  function showTip(ev, title, rows) {
    tooltip.textContent = '';
    tooltip.appendChild(el('div', { class: 'tt-title', text: title }));
    rows.forEach(function (r) {
      tooltip.appendChild(el('div', { class: 'tt-row' }, [el('span', { text: r[0] }), el('span', { text: r[1] })]));
    });
    tooltip.hidden = false;
    var x = ev.clientX + 14, y = ev.clientY + 14;
    var r = tooltip.getBoundingClientRect();
    if (x + r.width > window.innerWidth - 8) x = ev.clientX - r.width - 14;
    if (y + r.height > window.innerHeight - 8) y = ev.clientY - r.height - 14;
    tooltip.style.left = Math.max(4, x) + 'px';
    tooltip.style.top = Math.max(4, y) + 'px';
  }
  function hideTip() { tooltip.hidden = true; }

  // ---------------------------------------------------------------- run model
  /// Derived numbers of one report: stage lookup, totals used by KPIs and the diff table.
  function Run(index, entry) {
    var rep = entry.report || {};
    this.index = index;
    this.label = entry.label || String.fromCharCode(65 + index);
    this.file = entry.file || (rep.meta && rep.meta.source) || '';
    this.rep = rep;
    this.meta = rep.meta || {};
    this.devices = rep.devices || [];
    this.duration = Math.max(1e-3, num(this.meta.duration_us, 1));
    this.stageById = new Map();
    var self = this;
    (rep.stages || []).forEach(function (s) { self.stageById.set(s.id, s); });
    var nd = Math.max(1, this.devices.length);
    this.meanBusy = this.devices.reduce(function (a, d) { return a + num(d.busy_pct); }, 0) / nd;
    this.meanWait = this.devices.reduce(function (a, d) { return a + num(d.wait_pct); }, 0) / nd;
    this.meanIdle = this.devices.reduce(function (a, d) { return a + num(d.idle_pct); }, 0) / nd;
    var bal = (rep.balance || []).map(function (b) { return num(b.mean_over_max, 1); });
    this.meanBalance = bal.length ? bal.reduce(function (a, b) { return a + b; }, 0) / bal.length : NaN;
    this.worstBalance = bal.length ? Math.min.apply(null, bal) : NaN;
    var samplerTokens = 0, runs = 0;
    (rep.stages || []).forEach(function (s) {
      runs += num(s.runs);
      if (s.kind === 'sampler') samplerTokens += num(s.tokens);
    });
    this.samplerTokens = samplerTokens;
    this.stageRuns = runs;
    // Prefer the run's own output throughput (generated tokens / run duration); without it,
    // fall back to rows through the samplers (prompt rows included) over the trace window.
    var rm = (rep.meta && rep.meta.run_metrics) || null;
    this.outputTokens = rm && isFinite(rm.num_output_tokens) ? rm.num_output_tokens : NaN;
    this.tokensPerS = rm && isFinite(rm.output_tokens_per_s) ? rm.output_tokens_per_s
                                                             : samplerTokens / (this.duration / 1e6);
    this.waitTotal = (rep.waits || []).reduce(function (a, w) { return a + num(w.total_us); }, 0);
  }
  /// Fill of a stage's slices: its kind's colour, lighter for alternate blocks.
  Run.prototype.stageRgb = function (stage) {
    var base = palette[stage && palette[stage.kind] ? stage.kind : 'other'];
    var b = stage ? num(stage.block) : 0;
    return mix(base, palette.panel, (((b % 4) + 4) % 4) * 0.13);
  };
  Run.prototype.stageColor = function (stage) { return rgb(this.stageRgb(stage)); };
  /// Label colour readable on stageColor(stage).
  Run.prototype.stageText = function (stage) {
    var c = this.stageRgb(stage);
    return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2] > 150 ? 'rgba(10,20,40,0.9)' : 'rgba(255,255,255,0.95)';
  };
  Run.prototype.tag = function () {
    return el('span', { class: 'run-tag' + (this.index ? ' b' : ''), text: this.label });
  };

  // ---------------------------------------------------------------- timeline
  var sharedScale = { on: false, view: null, timelines: [] };
  function niceStep(raw) {
    var p = Math.pow(10, Math.floor(Math.log10(raw)));
    var m = raw / p;
    return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
  }
  function ticks(v0, v1, w) {
    var step = niceStep(Math.max(1e-6, (v1 - v0) / Math.max(1, w / 110)));
    var out = [];
    for (var t = Math.ceil(v0 / step) * step; t <= v1 + 1e-9; t += step) out.push(t);
    return out;
  }

  /// One run's per-device timeline: rows share a view window [v0, v1] in microseconds
  /// since the run's first event; with the "same time scale" option all runs share it.
  function Timeline(run, host, queueView) {
    var self = this;
    this.run = run;
    this.queueView = queueView;
    this.ownView = [0, run.duration];
    this.rows = [];
    this.lod = '';
    var lodBadge = el('span', { class: 'lod-badge', title: 'level of detail currently drawn' });
    this.lodBadge = lodBadge;
    var btn = function (text, title, fn) { return el('button', { type: 'button', title: title, text: text, onclick: fn }); };
    var toolbar = el('div', { class: 'toolbar' }, [
      btn('+', 'zoom in (or mouse wheel)', function () { self.zoomAt(0.5, 0.5); }),
      btn('\u2212', 'zoom out (or mouse wheel)', function () { self.zoomAt(2, 0.5); }),
      btn('\u2190', 'pan left (or drag)', function () { self.pan(-0.25); }),
      btn('\u2192', 'pan right (or drag)', function () { self.pan(0.25); }),
      btn('Fit', 'show the whole run (or double-click)', function () { self.reset(); }),
      lodBadge,
      el('span', { class: 'spacer' }),
      el('div', { class: 'legend' }, [
        el('span', {}, [el('span', { class: 'sw attn' }), 'attention']),
        el('span', {}, [el('span', { class: 'sw expert' }), 'expert']),
        el('span', {}, [el('span', { class: 'sw sampler' }), 'sampler']),
        el('span', {}, [el('span', { class: 'sw wait' }), 'collective wait']),
        el('span', {}, [el('span', { class: 'sw idle' }), 'idle gap'])
      ])
    ]);
    host.appendChild(toolbar);
    var box = el('div', { class: 'timeline' });
    this.axisCanvas = el('canvas');
    box.appendChild(el('div', { class: 'tl-axis' }, [el('div', { class: 'row-label muted', text: 'time' }), this.axisCanvas]));
    run.devices.forEach(function (dev) {
      var canvas = el('canvas', { 'aria-label': 'timeline of ' + dev.name });
      var nm = String(dev.name || ('device ' + dev.pid));
      var cut = nm.indexOf(' (');
      var label = el('div', { class: 'row-label', title: nm }, [
        el('div', { class: 'name', text: cut > 0 ? nm.slice(0, cut) : nm }),
        el('div', { class: 'stat', text: 'busy ' + fmtPct(dev.busy_pct) + DOT + 'wait ' + fmtPct(dev.wait_pct) })
      ]);
      var row = el('div', { class: 'device-row', 'data-testid': 'device-row', 'data-pid': String(dev.pid) }, [label, canvas]);
      box.appendChild(row);
      var r = { dev: dev, canvas: canvas };
      self.rows.push(r);
      self.attachInteraction(canvas, r);
    });
    this.overview = el('canvas', { title: 'whole run: mean utilization of all devices; click or drag to move the view' });
    box.appendChild(el('div', { class: 'tl-overview' }, [el('div', { class: 'row-label', text: 'overview' }), this.overview]));
    host.appendChild(box);
    this.attachOverview();
    sharedScale.timelines.push(this);
    drawers.push(this);
  }
  Timeline.prototype.limit = function () {
    if (!sharedScale.on) return this.run.duration;
    return Math.max.apply(null, sharedScale.timelines.map(function (t) { return t.run.duration; }));
  };
  Timeline.prototype.view = function () { return sharedScale.on && sharedScale.view ? sharedScale.view : this.ownView; };
  Timeline.prototype.setView = function (v0, v1) {
    var lim = this.limit();
    var span = clamp(v1 - v0, Math.min(lim, Math.max(0.05, lim * 1e-7)), lim);
    v0 = clamp(v0, 0, lim - span);
    var v = [v0, v0 + span];
    if (sharedScale.on) {
      sharedScale.view = v;
      sharedScale.timelines.forEach(function (t) { t.changed(); });
    } else {
      this.ownView = v;
      this.changed();
    }
  };
  Timeline.prototype.changed = function () {
    schedule(this);
    if (this.queueView) this.queueView.setRange(this.view());
  };
  Timeline.prototype.zoomAt = function (factor, frac) {
    var v = this.view(), span = v[1] - v[0];
    var t = v[0] + span * frac;
    this.setView(t - (t - v[0]) * factor, t + (v[1] - t) * factor);
  };
  Timeline.prototype.pan = function (frac) {
    var v = this.view(), d = (v[1] - v[0]) * frac;
    this.setView(v[0] + d, v[1] + d);
  };
  Timeline.prototype.reset = function () { this.setView(0, this.limit()); };
  Timeline.prototype.attachInteraction = function (canvas, row) {
    var self = this, drag = null;
    canvas.addEventListener('wheel', function (ev) {
      ev.preventDefault();
      var r = canvas.getBoundingClientRect();
      if (ev.shiftKey || Math.abs(ev.deltaX) > Math.abs(ev.deltaY)) {
        self.pan((ev.deltaX || ev.deltaY) / r.width);
      } else {
        self.zoomAt(Math.exp(ev.deltaY * 0.0015), (ev.clientX - r.left) / r.width);
      }
    }, { passive: false });
    canvas.addEventListener('pointerdown', function (ev) {
      drag = { x: ev.clientX, view: self.view().slice(), w: canvas.getBoundingClientRect().width };
      canvas.setPointerCapture(ev.pointerId);
      hideTip();
    });
    canvas.addEventListener('pointermove', function (ev) {
      if (drag) {
        var d = (drag.x - ev.clientX) / drag.w * (drag.view[1] - drag.view[0]);
        self.setView(drag.view[0] + d, drag.view[1] + d);
        return;
      }
      self.hover(ev, row);
    });
    canvas.addEventListener('pointerup', function () { drag = null; });
    canvas.addEventListener('pointerleave', function () { if (!drag) hideTip(); });
    canvas.addEventListener('dblclick', function () { self.reset(); });
  };
  Timeline.prototype.attachOverview = function () {
    var self = this, down = false;
    function move(ev) {
      var r = self.overview.getBoundingClientRect();
      var t = (ev.clientX - r.left) / r.width * self.limit();
      var v = self.view(), half = (v[1] - v[0]) / 2;
      self.setView(t - half, t + half);
    }
    this.overview.addEventListener('pointerdown', function (ev) { down = true; self.overview.setPointerCapture(ev.pointerId); move(ev); });
    this.overview.addEventListener('pointermove', function (ev) { if (down) move(ev); });
    this.overview.addEventListener('pointerup', function () { down = false; });
  };
  /// Which level of detail a row draws for view [v0, v1] at width w (CSS px).
  Timeline.prototype.rowMode = function (dev, v0, v1, w) {
    var slices = dev.slices;
    if (!slices || !slices.length) return { mode: 'buckets' };
    var i0 = lowerBound(slices, function (s) { return s[0] + s[1]; }, v0);
    var i1 = lowerBound(slices, function (s) { return s[0]; }, v1 + 1e-9);
    var b = dev.buckets || {};
    var bucketPx = num(b.bucket_us) / (v1 - v0) * w;
    if (i1 - i0 > 2 * w && bucketPx <= 1.5 && b.busy && b.busy.length) return { mode: 'buckets' };
    return { mode: 'slices', i0: i0, i1: i1 };
  };
  Timeline.prototype.draw = function () {
    var self = this, v = this.view(), v0 = v[0], v1 = v[1];
    // axis
    var a = prepare(this.axisCanvas);
    var tk = ticks(v0, v1, a.w);
    a.ctx.fillStyle = rgb(palette.muted);
    a.ctx.font = '11px ' + getComputedStyle(document.body).fontFamily;
    a.ctx.textBaseline = 'middle';
    tk.forEach(function (t) {
      var x = (t - v0) / (v1 - v0) * a.w;
      a.ctx.fillRect(Math.round(x), 16, 1, 8);
      if (x < a.w - 30) a.ctx.fillText(fmtUs(t), x + 3, 11);
    });
    var modes = {};
    this.rows.forEach(function (r) {
      var m = self.drawRow(r, v0, v1, tk);
      modes[m] = (modes[m] || 0) + 1;
    });
    var span = fmtUs(v1 - v0);
    var lod = Object.keys(modes).sort().join(' + ');
    this.lodBadge.textContent = 'window ' + span + DOT + (lod || 'no devices');
    this.lod = lod;
    this.drawOverview(v0, v1);
  };
  Timeline.prototype.drawRow = function (row, v0, v1, tk) {
    var dev = row.dev, run = this.run;
    var c = prepare(row.canvas), ctx = c.ctx, w = c.w, h = c.h;
    var scale = w / (v1 - v0);
    var X = function (t) { return (t - v0) * scale; };
    var top = 4, bh = h - 12; // slice band; idle strip below
    ctx.fillStyle = palette.grid;
    tk.forEach(function (t) { ctx.fillRect(Math.round(X(t)), 0, 1, h); });
    if (v1 > run.duration) { // shared time scale: past the end of this run
      ctx.fillStyle = rgb(palette['panel-2']);
      ctx.fillRect(X(run.duration), 0, w, h);
    }
    // idle gaps (the longest ones): faint wash plus a warning strip under the band
    (dev.gaps || []).forEach(function (g) {
      if (g[0] > v1 || g[0] + g[1] < v0) return;
      var x0 = X(g[0]), x1 = Math.max(x0 + 1, X(g[0] + g[1]));
      ctx.fillStyle = rgb(palette.idle, 0.07);
      ctx.fillRect(x0, 0, x1 - x0, h);
      ctx.fillStyle = rgb(palette.idle, 0.9);
      ctx.fillRect(x0, h - 5, x1 - x0, 3);
    });
    var b = dev.buckets || {}, bu = num(b.bucket_us), busy = b.busy || [], wait = b.wait || [];
    var k0 = bu > 0 ? Math.max(0, Math.floor(v0 / bu)) : 0;
    var k1 = bu > 0 ? Math.min(Math.max(busy.length, wait.length), Math.ceil(v1 / bu) + 1) : 0;
    // collective waits (bucket fractions): hatched, opacity by fraction
    var hatch = hatchPattern(ctx);
    for (var k = k0; k < k1; ++k) {
      var wf = num(wait[k]);
      if (wf <= 0) continue;
      var x0 = X(k * bu), x1 = Math.max(x0 + 1, X((k + 1) * bu));
      ctx.globalAlpha = clamp(0.25 + wf, 0, 1);
      ctx.fillStyle = hatch;
      ctx.fillRect(x0, top, x1 - x0, bh);
    }
    ctx.globalAlpha = 1;
    var m = this.rowMode(dev, v0, v1, w);
    if (m.mode === 'buckets') {
      var col = rgb(mix(palette.attn, palette.expert, 0.5));
      ctx.fillStyle = col;
      for (k = k0; k < k1; ++k) {
        var f = clamp(num(busy[k]), 0, 1);
        if (f <= 0) continue;
        x0 = X(k * bu); x1 = Math.max(x0 + 1, X((k + 1) * bu));
        ctx.fillRect(x0, top + bh * (1 - f), x1 - x0, bh * f);
      }
      return 'buckets (' + fmtUs(bu) + ')';
    }
    // slices: wide ones one by one (with labels when they fit), sub-pixel ones merged per column
    var cov = new Float32Array(Math.ceil(w) + 1), kindAt = new Array(Math.ceil(w) + 1);
    var merged = 0, labelFont = '10.5px ' + getComputedStyle(document.body).fontFamily;
    ctx.font = labelFont;
    ctx.textBaseline = 'middle';
    for (var i = m.i0; i < m.i1; ++i) {
      var s = dev.slices[i];
      var sx0 = X(s[0]), sx1 = X(s[0] + s[1]);
      var stage = run.stageById.get(s[2]);
      if (sx1 - sx0 < 1) {
        var px = clamp(Math.floor(sx0), 0, cov.length - 1);
        cov[px] += sx1 - sx0;
        kindAt[px] = stage;
        ++merged;
        continue;
      }
      ctx.fillStyle = run.stageColor(stage);
      ctx.fillRect(sx0, top, sx1 - sx0, bh);
      if (sx1 - sx0 > 4) {
        ctx.fillStyle = rgb(palette.panel, 0.55);
        ctx.fillRect(sx0, top, 1, bh);
      }
      if (sx1 - sx0 > 46 && stage) {
        var lx = Math.max(sx0, 0) + 4, room = Math.min(sx1, w) - lx - 3;
        if (room > 24) {
          ctx.save();
          ctx.beginPath(); ctx.rect(lx, top, room, bh); ctx.clip();
          ctx.fillStyle = run.stageText(stage);
          ctx.fillText(stage.name + (s[3] ? DOT + s[3] + ' tok' : ''), lx, top + bh / 2);
          ctx.restore();
        }
      }
    }
    for (var p = 0; p < cov.length; ++p) {
      if (cov[p] <= 0) continue;
      ctx.globalAlpha = clamp(0.35 + cov[p], 0, 1);
      ctx.fillStyle = run.stageColor(kindAt[p]);
      ctx.fillRect(p, top, 1, bh);
    }
    ctx.globalAlpha = 1;
    return merged ? 'slices (merged per pixel)' : 'slices';
  };
  Timeline.prototype.drawOverview = function (v0, v1) {
    var run = this.run, c = prepare(this.overview), ctx = c.ctx, w = c.w, h = c.h;
    var lim = this.limit();
    ctx.fillStyle = rgb(palette['panel-2']);
    ctx.fillRect(0, 0, w, h);
    var devs = run.devices, n = Math.max(1, devs.length);
    var bu = devs.length && devs[0].buckets ? num(devs[0].buckets.bucket_us) : 0;
    var nb = devs.length && devs[0].buckets && devs[0].buckets.busy ? devs[0].buckets.busy.length : 0;
    if (bu > 0 && nb) {
      var busy = new Float32Array(nb), wait = new Float32Array(nb);
      devs.forEach(function (d) {
        var b = d.buckets || {};
        for (var k = 0; k < nb; ++k) { busy[k] += num((b.busy || [])[k]) / n; wait[k] += num((b.wait || [])[k]) / n; }
      });
      var col = rgb(mix(palette.attn, palette.expert, 0.5), 0.85);
      for (var k = 0; k < nb; ++k) {
        var x0 = k * bu / lim * w, x1 = Math.max(x0 + 0.6, (k + 1) * bu / lim * w);
        ctx.fillStyle = col;
        ctx.fillRect(x0, h * (1 - busy[k]), x1 - x0, h * busy[k]);
        ctx.fillStyle = rgb(palette.wait, 0.7);
        ctx.fillRect(x0, h * (1 - busy[k] - wait[k]), x1 - x0, h * wait[k]);
      }
    }
    var a = v0 / lim * w, bb = v1 / lim * w;
    ctx.fillStyle = rgb(palette.fg, 0.08);
    ctx.fillRect(0, 0, a, h);
    ctx.fillRect(bb, 0, w - bb, h);
    ctx.strokeStyle = rgb(palette.accent);
    ctx.lineWidth = 1.5;
    ctx.strokeRect(a + 0.75, 0.75, Math.max(2, bb - a - 1.5), h - 1.5);
  };
  Timeline.prototype.hover = function (ev, row) {
    var r = row.canvas.getBoundingClientRect();
    var v = this.view(), t = v[0] + (ev.clientX - r.left) / r.width * (v[1] - v[0]);
    var dev = row.dev, run = this.run;
    var tol = 2 / r.width * (v[1] - v[0]);
    var m = this.rowMode(dev, v[0], v[1], r.width);
    if (m.mode === 'slices') {
      var i = lowerBound(dev.slices, function (s) { return s[0] + s[1]; }, t - tol);
      var s = dev.slices[i];
      if (s && s[0] <= t + tol) {
        var st = run.stageById.get(s[2]) || {};
        showTip(ev, st.name || ('stage ' + s[2]), [
          ['kind', st.kind || '?'], ['tokens', fmtInt(s[3])], ['duration', fmtUs(s[1])],
          ['start', fmtUs(s[0])], ['device', String(dev.name)]]);
        return;
      }
    }
    var gap = (dev.gaps || []).find(function (g) { return t >= g[0] && t <= g[0] + g[1]; });
    if (gap) {
      showTip(ev, 'idle gap', [['duration', fmtUs(gap[1])], ['start', fmtUs(gap[0])], ['device', String(dev.name)]]);
      return;
    }
    var b = dev.buckets || {}, bu = num(b.bucket_us);
    if (bu > 0) {
      var k = Math.floor(t / bu);
      if (b.busy && k >= 0 && k < b.busy.length) {
        showTip(ev, String(dev.name), [['at', fmtUs(t)], ['busy', fmtPct(100 * num(b.busy[k]))],
          ['collective wait', fmtPct(100 * num((b.wait || [])[k]))], ['bucket', fmtUs(bu)]]);
        return;
      }
    }
    hideTip();
  };

  // ---------------------------------------------------------------- queue depth
  /// Small multiples of the per-stage mu-queue depth, following the timeline's window.
  function QueueView(run, host) {
    var self = this;
    this.run = run;
    this.range = [0, run.duration];
    this.queues = (run.rep.queues || []).slice();
    this.limit = 24;
    this.cells = [];
    if (!this.queues.length) {
      host.appendChild(el('div', { class: 'empty', text: 'This trace has no queue-depth counters.' }));
      return;
    }
    this.filter = '';
    this.sort = 'max';
    var search = el('input', { type: 'search', placeholder: 'filter stages, e.g. "expert b2"', 'aria-label': 'filter queues' });
    search.addEventListener('input', function () { self.filter = search.value.trim().toLowerCase(); self.rebuild(); });
    var sort = el('select', { 'aria-label': 'sort queues' }, [
      el('option', { value: 'max', text: 'deepest first' }), el('option', { value: 'name', text: 'by stage' })]);
    sort.addEventListener('change', function () { self.sort = sort.value; self.rebuild(); });
    this.more = el('button', { type: 'button', onclick: function () { self.limit = self.limit ? 0 : 24; self.rebuild(); } });
    host.appendChild(el('div', { class: 'toolbar' }, [search, sort, this.more, el('span', { class: 'spacer' }),
      el('span', { class: 'muted', text: 'window follows the timeline' })]));
    this.grid = el('div', { class: 'qgrid' });
    host.appendChild(this.grid);
    this.rebuild();
    drawers.push(this);
  }
  QueueView.prototype.rebuild = function () {
    var self = this, f = this.filter;
    var list = this.queues.filter(function (q) { return !f || String(q.name).toLowerCase().indexOf(f) >= 0; });
    list.sort(this.sort === 'max' ? function (a, b) { return num(b.max) - num(a.max) || (a.stage_id - b.stage_id); }
                                  : function (a, b) { return a.stage_id - b.stage_id; });
    var shown = this.limit ? list.slice(0, this.limit) : list;
    this.more.textContent = this.limit ? 'show all ' + list.length : 'show top 24';
    this.more.hidden = list.length <= 24;
    this.grid.textContent = '';
    this.cells = shown.map(function (q) {
      var canvas = el('canvas');
      var cell = el('div', { class: 'qcell', 'data-testid': 'queue-chart' }, [
        el('div', { class: 'qhead' }, [el('span', { class: 'qname', text: q.name, title: q.name }),
                                        el('span', { class: 'qmax', text: 'max ' + fmtCompact(q.max) })]), canvas]);
      self.grid.appendChild(cell);
      var c = { q: q, canvas: canvas };
      canvas.addEventListener('pointermove', function (ev) { self.hover(ev, c); });
      canvas.addEventListener('pointerleave', hideTip);
      return c;
    });
    schedule(this);
  };
  QueueView.prototype.setRange = function (v) { this.range = v.slice(); schedule(this); };
  QueueView.prototype.draw = function () {
    var v0 = this.range[0], v1 = this.range[1];
    var line = rgb(palette.accent), fill = rgb(palette.accent, 0.18);
    this.cells.forEach(function (c) {
      var p = prepare(c.canvas), ctx = p.ctx, w = p.w, h = p.h - 2;
      var s = c.q.series || [], ymax = Math.max(1, num(c.q.max));
      var i0 = Math.max(0, lowerBound(s, function (e) { return e[0]; }, v0) - 1);
      var i1 = Math.min(s.length, lowerBound(s, function (e) { return e[0]; }, v1) + 1);
      var X = function (t) { return (t - v0) / (v1 - v0) * w; };
      var Y = function (d) { return 1 + h - h * clamp(num(d) / ymax, 0, 1); };
      ctx.beginPath();
      ctx.moveTo(0, Y(0));
      var lastY = Y(0);
      for (var i = i0; i < i1; ++i) {
        var x = clamp(X(s[i][0]), 0, w), y = Y(s[i][1]);
        ctx.lineTo(x, lastY);
        ctx.lineTo(x, y);
        lastY = y;
      }
      ctx.lineTo(w, lastY);
      ctx.strokeStyle = line;
      ctx.lineWidth = 1.2;
      ctx.stroke();
      ctx.lineTo(w, Y(0));
      ctx.closePath();
      ctx.fillStyle = fill;
      ctx.fill();
    });
  };
  QueueView.prototype.hover = function (ev, c) {
    var r = c.canvas.getBoundingClientRect();
    var t = this.range[0] + (ev.clientX - r.left) / r.width * (this.range[1] - this.range[0]);
    var s = c.q.series || [];
    var i = lowerBound(s, function (e) { return e[0]; }, t + 1e-9) - 1;
    showTip(ev, c.q.name, [['at', fmtUs(t)], ['depth', i >= 0 ? fmtInt(s[i][1]) + ' tokens' : '0'], ['max', fmtInt(c.q.max)]]);
  };

  // ---------------------------------------------------------------- heatmaps
  /// Block x column heatmap (columns: experts or devices), linear colour scale from 0 to max.
  function Heatmap(host, title, matrix, colName, colLabels) {
    var self = this;
    this.matrix = matrix || [];
    this.colName = colName;
    this.colLabels = colLabels;
    this.rows = this.matrix.length;
    this.cols = this.matrix.reduce(function (a, r) { return Math.max(a, (r || []).length); }, 0);
    var max = 0;
    this.matrix.forEach(function (r) { (r || []).forEach(function (x) { max = Math.max(max, num(x)); }); });
    this.max = max;
    var wrap = el('div', { class: 'heatmap', 'data-testid': 'heatmap' });
    wrap.appendChild(el('h4', { text: title }));
    host.appendChild(wrap);
    if (!this.rows || !this.cols) {
      wrap.appendChild(el('div', { class: 'empty', text: 'No expert executions in this trace.' }));
      return;
    }
    this.canvas = el('canvas', { 'aria-label': title });
    this.canvas.style.height = Math.min(560, 26 + this.rows * clamp(Math.floor(420 / this.rows), 12, 30)) + 'px';
    wrap.appendChild(this.canvas);
    this.legend = el('canvas');
    wrap.appendChild(el('div', { class: 'heat-legend' }, ['0', this.legend, fmtInt(max) + ' tokens']));
    this.canvas.addEventListener('pointermove', function (ev) { self.hover(ev); });
    this.canvas.addEventListener('pointerleave', hideTip);
    drawers.push(this);
  }
  Heatmap.prototype.geometry = function (w, h) {
    var left = 34, top = 20;
    return { left: left, top: top, cw: (w - left) / this.cols, ch: (h - top) / this.rows };
  };
  Heatmap.prototype.draw = function () {
    var self = this, p = prepare(this.canvas), ctx = p.ctx, g = this.geometry(p.w, p.h);
    var font = getComputedStyle(document.body).fontFamily;
    ctx.font = '10.5px ' + font;
    ctx.textBaseline = 'middle';
    ctx.textAlign = 'center';
    var labelEvery = Math.ceil(26 / g.cw);
    ctx.fillStyle = rgb(palette.muted);
    for (var c = 0; c < this.cols; c += labelEvery) ctx.fillText(this.colLabels(c), g.left + (c + 0.5) * g.cw, 9);
    ctx.textAlign = 'right';
    var rowEvery = Math.ceil(12 / g.ch);
    for (var r = 0; r < this.rows; r += rowEvery) ctx.fillText('b' + r, g.left - 6, g.top + (r + 0.5) * g.ch);
    ctx.textAlign = 'center';
    var gapPx = g.cw > 6 && g.ch > 6 ? 1.5 : 0;
    for (r = 0; r < this.rows; ++r) {
      for (c = 0; c < this.cols; ++c) {
        var v = num((this.matrix[r] || [])[c]);
        var col = heatColor(this.max > 0 ? v / this.max : 0);
        ctx.fillStyle = rgb(col);
        ctx.fillRect(g.left + c * g.cw + gapPx / 2, g.top + r * g.ch + gapPx / 2, g.cw - gapPx, g.ch - gapPx);
        if (g.cw >= 30 && g.ch >= 15) {
          var lum = 0.2126 * col[0] + 0.7152 * col[1] + 0.0722 * col[2];
          ctx.fillStyle = lum > 140 ? 'rgba(10,20,40,0.85)' : 'rgba(255,255,255,0.92)';
          ctx.fillText(fmtCompact(v), g.left + (c + 0.5) * g.cw, g.top + (r + 0.5) * g.ch);
        }
      }
    }
    var l = prepare(this.legend);
    for (var x = 0; x < l.w; ++x) {
      l.ctx.fillStyle = rgb(heatColor(x / (l.w - 1)));
      l.ctx.fillRect(x, 0, 1, l.h);
    }
    void self;
  };
  Heatmap.prototype.hover = function (ev) {
    var r = this.canvas.getBoundingClientRect(), g = this.geometry(r.width, r.height);
    var c = Math.floor((ev.clientX - r.left - g.left) / g.cw), row = Math.floor((ev.clientY - r.top - g.top) / g.ch);
    if (c < 0 || c >= this.cols || row < 0 || row >= this.rows) { hideTip(); return; }
    var vals = this.matrix[row] || [], v = num(vals[c]);
    var sum = vals.reduce(function (a, x) { return a + num(x); }, 0), mean = sum / Math.max(1, this.cols);
    showTip(ev, 'block ' + row + DOT + this.colLabels(c), [
      ['tokens', fmtInt(v)], ['share of block', fmtPct(sum > 0 ? 100 * v / sum : 0)],
      ['vs. block mean', mean > 0 ? (v / mean).toFixed(2) + TIMES : '-']]);
  };

  // ---------------------------------------------------------------- sections
  function kpi(label, value, sub) {
    return el('div', { class: 'kpi' }, [el('div', { class: 'label', text: label }), el('div', { class: 'value', text: value }),
      sub ? el('div', { class: 'sub', text: sub }) : null]);
  }
  function runCard(run, title) {
    var card = el('div', { class: 'card' });
    var h = el('h3', {}, runs.length > 1 ? [run.tag(), title] : [title]);
    if (runs.length > 1 && run.file) h.appendChild(el('span', { class: 'muted', style: 'font-weight:400;font-size:12px', text: run.file }));
    card.appendChild(h);
    return card;
  }
  function section(id, title, hint) {
    var s = el('section', { class: 'section', id: id }, [el('h2', {}, [title, hint ? el('span', { class: 'hint', text: hint }) : null])]);
    app.appendChild(s);
    return s;
  }
  function grid(parent, two) { var g = el('div', { class: 'runs' + (two ? ' two' : '') }); parent.appendChild(g); return g; }

  function buildKpis(run, host) {
    var card = runCard(run, 'Run summary');
    var m = run.meta;
    card.appendChild(el('div', { class: 'kpis' }, [
      kpi('duration', fmtUs(run.duration), fmtInt(run.devices.length) + ' devices'),
      kpi('mean busy', fmtPct(run.meanBusy), 'wait ' + fmtPct(run.meanWait) + DOT + 'idle ' + fmtPct(run.meanIdle)),
      kpi('balance', isNaN(run.meanBalance) ? '-' : run.meanBalance.toFixed(2),
          isNaN(run.worstBalance) ? 'no expert load' : 'mean/max tokens; worst ' + run.worstBalance.toFixed(2)),
      kpi('throughput', isFinite(run.tokensPerS) && run.tokensPerS > 0 ? fmtCompact(run.tokensPerS) + ' tok/s' : '-',
          isFinite(run.outputTokens) ? fmtInt(run.outputTokens) + ' output tokens'
                                     : fmtInt(run.samplerTokens) + ' sampler rows'),
      kpi('events', fmtCompact(m.num_events), num(m.num_dropped_events) ? fmtInt(m.num_dropped_events) + ' dropped' : 'none dropped')
    ]));
    host.appendChild(card);
  }
  function buildUtil(run, host) {
    var card = runCard(run, 'Where the time went');
    run.devices.forEach(function (d) {
      var nm = String(d.name || d.pid), cut = nm.indexOf(' (');
      var b = clamp(num(d.busy_pct), 0, 100), w = clamp(num(d.wait_pct), 0, 100 - b), i = clamp(num(d.idle_pct), 0, 100 - b - w);
      card.appendChild(el('div', { class: 'util-row' }, [
        el('div', { class: 'name', text: cut > 0 ? nm.slice(0, cut) : nm, title: nm }),
        el('div', { class: 'stack' }, [
          el('div', { class: 'busy', style: 'width:' + b + '%', title: 'busy ' + fmtPct(b) + ' (' + fmtUs(d.busy_us) + ')' }),
          el('div', { class: 'wait', style: 'width:' + w + '%', title: 'waiting in collectives ' + fmtPct(w) + ' (' + fmtUs(d.wait_us) + ')' }),
          el('div', { class: 'idle', style: 'width:' + i + '%', title: 'idle ' + fmtPct(i) + ' (' + fmtUs(d.idle_us) + ')' })]),
        el('div', { class: 'pct', text: fmtPct(b) + ' / ' + fmtPct(w) + ' / ' + fmtPct(i) })
      ]));
    });
    card.appendChild(el('div', { class: 'legend', style: 'margin-top:6px' }, [
      el('span', {}, [el('span', { class: 'sw expert' }), 'busy']),
      el('span', {}, [el('span', { class: 'sw wait' }), 'waiting in collectives']),
      el('span', {}, [el('span', { class: 'sw idle' }), 'idle'])]));
    var split = el('div', { class: 'split' });
    // top waiting reasons
    var waits = (run.rep.waits || []).slice(0, 12);
    var wmax = waits.reduce(function (a, w) { return Math.max(a, num(w.total_us)); }, 0);
    var wt = el('table', {}, [el('tr', {}, [el('th', { text: 'reason' }), el('th', { class: 'num', text: 'total' }),
      el('th', { class: 'num', text: 'count' }), el('th', { class: 'num', text: 'mean' }), el('th', { text: '' })])]);
    waits.forEach(function (w) {
      wt.appendChild(el('tr', {}, [el('td', { text: w.reason }), el('td', { class: 'num', text: fmtUs(w.total_us) }),
        el('td', { class: 'num', text: fmtInt(w.count) }), el('td', { class: 'num', text: fmtUs(num(w.total_us) / Math.max(1, num(w.count))) }),
        el('td', { class: 'bar-cell' }, [el('div', { class: 'bar', style: 'width:calc(' + (wmax > 0 ? 100 * num(w.total_us) / wmax : 0) + '% - 12px);background:var(--wait)' })])]));
    });
    split.appendChild(el('div', {}, [el('h4', { text: 'Top waiting reasons' }),
      waits.length ? el('div', { class: 'scroll' }, [wt]) : el('div', { class: 'empty', text: 'No collective waits recorded.' })]));
    // per-layer balance
    var hm = run.rep.heatmap || {};
    var bt = el('table', {}, [el('tr', {}, [el('th', { text: 'block' }), el('th', { class: 'num', text: 'mean/max' }), el('th', { text: '' }),
      el('th', { class: 'num', text: 'hottest device' })])]);
    (run.rep.balance || []).forEach(function (b) {
      var row = (hm.device_tokens || [])[b.block] || [];
      var best = -1, bestV = -1;
      row.forEach(function (v, i) { if (num(v) > bestV) { bestV = num(v); best = i; } });
      var dev = run.devices[best];
      var r = num(b.mean_over_max, 1);
      bt.appendChild(el('tr', {}, [el('td', { text: 'b' + b.block }),
        el('td', { class: 'num' + (r < 0.7 ? ' worse' : r > 0.9 ? ' better' : ''), text: r.toFixed(3) }),
        el('td', { class: 'bar-cell' }, [el('div', { class: 'bar', style: 'width:calc(' + 100 * clamp(r, 0, 1) + '% - 12px);background:' + (r < 0.7 ? 'var(--bad)' : 'var(--expert)') })]),
        el('td', { class: 'num', text: best >= 0 ? (dev ? String(dev.name).split(' (')[0] : 'dev ' + best) + ' ' + fmtCompact(bestV) : '-' })]));
    });
    split.appendChild(el('div', {}, [el('h4', { text: 'Per-layer balance (1 = even)' }),
      (run.rep.balance || []).length ? el('div', { class: 'scroll' }, [bt]) : el('div', { class: 'empty', text: 'No expert load recorded.' })]));
    card.appendChild(split);
    host.appendChild(card);
  }
  function buildHeat(run, host) {
    var card = runCard(run, 'Expert load (tokens routed)');
    var hm = run.rep.heatmap || {};
    var wrap = el('div', { class: 'heat-wrap' });
    card.appendChild(wrap);
    new Heatmap(wrap, 'block ' + TIMES + ' expert', hm.expert_tokens, 'expert', function (c) { return 'e' + c; });
    new Heatmap(wrap, 'block ' + TIMES + ' device', hm.device_tokens, 'device', function (c) {
      var d = run.devices[c];
      return d ? String(d.name).split(' (')[0] : 'd' + c;
    });
    host.appendChild(card);
  }
  function buildDiff(a, b) {
    var s = section('sec-diff', 'Comparison', 'B relative to A');
    var card = el('div', { class: 'card' });
    var rows = [
      ['duration', a.duration, b.duration, fmtUs, -1],
      ['throughput (tok/s)', a.tokensPerS, b.tokensPerS, fmtCompact, 1],
      ['mean busy', a.meanBusy, b.meanBusy, fmtPct, 1],
      ['mean collective wait', a.meanWait, b.meanWait, fmtPct, -1],
      ['mean idle', a.meanIdle, b.meanIdle, fmtPct, -1],
      ['balance (mean/max)', a.meanBalance, b.meanBalance, function (x) { return isNaN(x) ? '-' : x.toFixed(3); }, 1],
      ['worst block balance', a.worstBalance, b.worstBalance, function (x) { return isNaN(x) ? '-' : x.toFixed(3); }, 1],
      ['total collective wait', a.waitTotal, b.waitTotal, fmtUs, -1],
      ['events', num(a.meta.num_events), num(b.meta.num_events), fmtCompact, 0]
    ];
    var t = el('table', {}, [el('tr', {}, [el('th', { text: 'metric' }), el('th', { class: 'num' }, [a.tag()]),
      el('th', { class: 'num' }, [b.tag()]), el('th', { class: 'num', text: '\u0394 (B \u2212 A)' }), el('th', { class: 'num', text: 'change' })])]);
    rows.forEach(function (r) {
      var d = r[2] - r[1], rel = r[1] ? d / Math.abs(r[1]) : NaN;
      var cls = !r[4] || !isFinite(d) || Math.abs(rel) < 0.005 ? '' : (d * r[4] > 0 ? 'better' : 'worse');
      var isPct = r[3] === fmtPct;
      t.appendChild(el('tr', {}, [el('td', { text: r[0] }), el('td', { class: 'num', text: r[3](r[1]) }), el('td', { class: 'num', text: r[3](r[2]) }),
        el('td', { class: 'num ' + cls, text: !isFinite(d) ? '-' : (d >= 0 ? '+' : '\u2212') + (isPct ? Math.abs(d).toFixed(1) + ' pt' : r[3](Math.abs(d))) }),
        el('td', { class: 'num ' + cls, text: isFinite(rel) ? (rel >= 0 ? '+' : '\u2212') + Math.abs(100 * rel).toFixed(1) + '%' : '-' })]));
    });
    card.appendChild(t);
    s.appendChild(card);
  }

  // ---------------------------------------------------------------- page
  var app = document.getElementById('app');
  var runs = [];
  function build() {
    var t0 = performance.now();
    readPalette();
    var payload = JSON.parse(document.getElementById('report-data').textContent || '{}');
    runs = (payload.runs || []).map(function (r, i) { return new Run(i, r); });
    if (!runs.length) throw new Error('the report has no runs');
    var two = runs.length > 1;
    var sub = runs.map(function (r) {
      var m = r.meta;
      return (two ? r.label + ': ' : '') + [m.wiring, m.topology, fmtUs(r.duration), r.devices.length + ' devices'].filter(Boolean).join(DOT);
    }).join('   |   ');
    document.getElementById('subtitle').textContent = sub;
    if (two) buildDiff(runs[0], runs[1]);
    var g = grid(section('sec-summary', 'Summary'), two);
    runs.forEach(function (r) { buildKpis(r, g); });

    var tlSec = section('sec-timeline', 'Device timeline', 'wheel to zoom' + DOT + 'drag to pan' + DOT + 'double-click to fit' + DOT + 'hover for details');
    var qs = [];
    var queueSec = el('section', { class: 'section', id: 'sec-queues' }, [el('h2', {}, [el('span', {}, [el('span', { style: 'text-transform:none', text: '\u00b5' }), '-queue depth']),
      el('span', { class: 'hint', text: 'tokens ready per stage over the timeline window' })])]);
    var qg = el('div', { class: 'runs' + (two ? ' two' : '') });
    queueSec.appendChild(qg);
    runs.forEach(function (r) {
      var card = runCard(r, 'Queue depth');
      qg.appendChild(card);
      qs.push(new QueueView(r, card));
    });
    if (two) {
      var same = el('input', { type: 'checkbox' });
      same.addEventListener('change', function () {
        sharedScale.on = same.checked;
        sharedScale.view = null;
        sharedScale.timelines.forEach(function (t) { t.ownView = [0, t.run.duration]; });
        sharedScale.timelines[0].reset();
        sharedScale.timelines.forEach(function (t) { t.changed(); });
      });
      tlSec.appendChild(el('div', { class: 'toolbar' }, [el('label', {}, [same, 'same time scale for both runs (zoom and pan together)'])]));
    }
    runs.forEach(function (r, i) {
      var card = runCard(r, 'Stages per device');
      tlSec.appendChild(card);
      if (i) card.style.marginTop = '12px';
      new Timeline(r, card, qs[i]);
    });
    var ug = grid(section('sec-util', 'Utilization'), two);
    runs.forEach(function (r) { buildUtil(r, ug); });
    app.appendChild(queueSec);
    var hg = grid(section('sec-heat', 'Expert load', 'hover a cell for its value'), two);
    runs.forEach(function (r) { buildHeat(r, hg); });

    drawers.forEach(function (d) { d.draw(); });
    document.body.dataset.renderMs = String(Math.round(performance.now() - t0));
  }

  // The theme is always explicit (data-theme on <html>; one dark palette in viewer.css): it
  // follows the system setting until the user picks one with the button.
  var root = document.documentElement;
  var userPickedTheme = false;
  var systemDark = window.matchMedia ? window.matchMedia('(prefers-color-scheme: dark)') : null;
  function followSystemTheme() {
    if (userPickedTheme) return;
    root.dataset.theme = systemDark && systemDark.matches ? 'dark' : 'light';
    readPalette();
    scheduleAll();
  }
  var themeButton = document.getElementById('theme-toggle');
  themeButton.addEventListener('click', function () {
    userPickedTheme = true;
    root.dataset.theme = root.dataset.theme === 'dark' ? 'light' : 'dark';
    readPalette();
    scheduleAll();
  });
  if (systemDark) systemDark.addEventListener('change', followSystemTheme);
  if (window.ResizeObserver) new ResizeObserver(function () { scheduleAll(); }).observe(app);
  else window.addEventListener('resize', scheduleAll);

  /// For tests and benchmarks: redraw everything now; returns milliseconds taken.
  window.muflowViewer = {
    redraw: function () { var t = performance.now(); drawers.forEach(function (d) { d.draw(); }); return performance.now() - t; },
    timelines: function () { return sharedScale.timelines.length; }
  };
  try {
    build();
    if (!window.__muflowErrors) document.body.dataset.status = 'ok';
  } catch (e) {
    if (window.__muflowShowError) window.__muflowShowError('render failed: ' + (e && e.stack || e));
    document.body.dataset.status = 'error';
  }
})();
