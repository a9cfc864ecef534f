// The inline CSS and scripts of the `tessera report` page; the data comes as embedded JSON.
#include "report_page_assets.hpp"

namespace tessera::report {

const char* const kReportStyle = R"CSS(
:root { --standard: #4e79a7; --interleaved: #f28e2b; --bound: #d62728; --ink: #222; --muted: #666; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--ink); margin: 0 auto;
       max-width: 1100px; padding: 16px 24px 48px; }
h1 { font-size: 22px; margin: 8px 0 4px; }
h2 { font-size: 17px; margin: 28px 0 6px; border-bottom: 1px solid #ddd; padding-bottom: 3px; }
p.note, p.hover { color: var(--muted); margin: 4px 0; }
p.hover { min-height: 1.45em; font-variant-numeric: tabular-nums; }
svg.chart { width: 100%; height: auto; display: block; background: #fff; }
svg.chart text { font-size: 11px; fill: var(--muted); }
svg.chart text.mark { fill: var(--ink); font-weight: 600; }
svg.chart .axis { stroke: #999; stroke-width: 1; }
svg.chart .grid { stroke: #eee; stroke-width: 1; }
.region-standard { fill: #4e79a71a; }
.region-interleaved { fill: #f28e2b1a; }
.mem-standard { fill: var(--standard); }
.mem-interleaved { fill: var(--interleaved); }
.boundary { stroke: var(--interleaved); stroke-width: 1.5; stroke-dasharray: 5 3; }
.capacity { stroke: var(--ink); stroke-width: 1.5; }
.device-line { stroke: var(--ink); stroke-width: 1.2; stroke-dasharray: 4 3; }
.lane { fill: #f4f4f4; }
.xsend { fill: #555; }
.bound { stroke: var(--bound); stroke-width: 1.5; stroke-dasharray: 5 3; }
.endpoint-bound { stroke: #9467bd; stroke-width: 1.2; stroke-dasharray: 2 3; }
.horizon { stroke: var(--ink); stroke-width: 1.5; }
.legend { display: flex; flex-wrap: wrap; gap: 4px 14px; margin: 4px 0; color: var(--muted); }
.legend span.swatch { display: inline-block; width: 11px; height: 11px; margin-right: 4px; vertical-align: -1px; }
table { border-collapse: collapse; margin: 8px 0; font-variant-numeric: tabular-nums; }
th, td { padding: 3px 6px; border-bottom: 1px solid #eee; text-align: right; white-space: nowrap; }
th { background: #fafafa; border-bottom: 1px solid #ccc; cursor: default; white-space: normal; vertical-align: bottom; }
table.sortable th { cursor: pointer; }
td.text, th.text { text-align: left; white-space: normal; }
tr.selected td { background: #fff6e8; }
div.wide { overflow-x: auto; }
div.scroll { max-height: 480px; overflow: auto; border: 1px solid #eee; }
div.scroll th { position: sticky; top: 0; }
#render-errors { color: var(--bound); }
select { font: inherit; }
)CSS";

const char* const kErrorCatcherScript = R"JS(
window.reportErrors = [];
window.showReportErrors = function () {
  var list = document.getElementById('render-errors');
  if (!list) return;
  list.textContent = '';
  window.reportErrors.forEach(function (message) {
    var item = document.createElement('li');
    item.textContent = message;
    list.appendChild(item);
  });
};
window.addEventListener('error', function (event) {
  var where = event.filename ? ' (' + event.filename + ':' + event.lineno + ')' : '';
  window.reportErrors.push((event.message || 'script error') + where);
  if (document.body) document.body.setAttribute('data-render', 'error');
  window.showReportErrors();
});
document.addEventListener('DOMContentLoaded', window.showReportErrors);
)JS";

const char* const kReportScript = R"JS(
(function () {
  'use strict';
  var SVG_NS = 'http://www.w3.org/2000/svg';
  var PALETTE = ['#4e79a7', '#f28e2b', '#59a14f', '#e15759', '#76b7b2', '#edc948', '#b07aa1',
                 '#ff9da7', '#9c755f', '#bab0ac'];
  var WIDTH = 960, LEFT = 78, RIGHT = 24, TOP = 22, BOTTOM = 38;

  function add(parent, tag, attributes, text) {
    var element = document.createElementNS(SVG_NS, tag);
    for (var name in attributes) element.setAttribute(name, attributes[name]);
    if (text !== undefined) element.textContent = text;
    parent.appendChild(element);
    return element;
  }
  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); }
  function grouped(n) { return Number(n).toLocaleString('en-US'); }
  function color(index) { return PALETTE[index % PALETTE.length]; }

  // About `count` round tick values from 0 to max: 1, 2 or 5 times a power of ten apart,
  // and whole numbers, as every axis here counts tiles, bytes or cycles.
  function ticks(max, count) {
    if (!(max > 0)) return [0];
    var raw = max / count, power = Math.pow(10, Math.floor(Math.log10(raw)));
    var step = [1, 2, 5, 10].map(function (m) { return m * power; }).find(function (s) { return s >= raw; });
    step = Math.max(1, Math.round(step));
    var values = [];
    for (var i = 0; i * step <= max; ++i) values.push(i * step);
    return values;
  }

  // A plot area with a linear y axis; returns the scales.
  function frame(svg, height, yMax, yLabel, xCount, xLabel) {
    clear(svg);
    svg.setAttribute('viewBox', '0 0 ' + WIDTH + ' ' + height);
    var plotWidth = WIDTH - LEFT - RIGHT, bottom = height - BOTTOM;
    var y = function (v) { return bottom - (v / yMax) * (bottom - TOP); };
    ticks(yMax, 5).forEach(function (v) {
      add(svg, 'line', {class: 'grid', x1: LEFT, x2: WIDTH - RIGHT, y1: y(v), y2: y(v)});
      add(svg, 'text', {x: LEFT - 6, y: y(v) + 4, 'text-anchor': 'end'}, grouped(v));
    });
    add(svg, 'line', {class: 'axis', x1: LEFT, x2: LEFT, y1: TOP, y2: bottom});
    add(svg, 'line', {class: 'axis', x1: LEFT, x2: WIDTH - RIGHT, y1: bottom, y2: bottom});
    add(svg, 'text', {x: 12, y: (TOP + bottom) / 2, 'text-anchor': 'middle',
                      transform: 'rotate(-90 12 ' + (TOP + bottom) / 2 + ')'}, yLabel);
    var band = plotWidth / Math.max(xCount, 1);
    ticks(Math.max(xCount - 1, 0), 8).forEach(function (t) {
      add(svg, 'text', {x: LEFT + (t + 0.5) * band, y: bottom + 14, 'text-anchor': 'middle'}, String(t));
    });
    add(svg, 'text', {x: LEFT + plotWidth / 2, y: height - 6, 'text-anchor': 'middle'}, xLabel);
    return {y: y, band: band, bottom: bottom, barWidth: band > 4 ? band - 1 : band};
  }

  // Reports the tile under the pointer in `output` through describe(tile).
  function hover(svg, tiles, band, output, describe) {
    svg.onmousemove = function (event) {
      var box = svg.getBoundingClientRect();
      var x = (event.clientX - box.left) * WIDTH / box.width;
      var tile = Math.floor((x - LEFT) / band);
      output.textContent = tile >= 0 && tile < tiles ? describe(tile) : '';
    };
    svg.onmouseleave = function () { output.textContent = ''; };
  }

  // view 'addresses': each tile's address space against the capacity and the interleaved
  // boundary; view 'used': the bytes used per region, stacked, scaled to the fullest tile.
  function drawMemory(data, view) {
    var svg = document.getElementById('memory-chart');
    var m = data.memory, capacity = data.capacity, boundary = data.interleaved_start;
    var peak = 0;
    for (var i = 0; i < data.tiles; ++i) peak = Math.max(peak, m.standard[i] + m.interleaved[i]);
    var addresses = view !== 'used';
    var f = frame(svg, 320, addresses ? capacity : Math.max(peak, 1),
                  addresses ? 'tile address (bytes)' : 'bytes used', data.tiles, 'tile');
    if (addresses) {
      add(svg, 'rect', {class: 'region-standard', x: LEFT, width: WIDTH - LEFT - RIGHT,
                        y: f.y(boundary), height: f.y(0) - f.y(boundary)});
      add(svg, 'rect', {class: 'region-interleaved', x: LEFT, width: WIDTH - LEFT - RIGHT,
                        y: f.y(capacity), height: f.y(boundary) - f.y(capacity)});
    }
    for (var t = 0; t < data.tiles; ++t) {
      var x = LEFT + t * f.band;
      var interleavedBase = addresses ? boundary : m.standard[t];
      if (m.standard[t] > 0)
        add(svg, 'rect', {class: 'mem-standard', x: x, width: f.barWidth,
                          y: f.y(m.standard[t]), height: f.y(0) - f.y(m.standard[t])});
      if (m.interleaved[t] > 0)
        add(svg, 'rect', {class: 'mem-interleaved', x: x, width: f.barWidth,
                          y: f.y(interleavedBase + m.interleaved[t]),
                          height: f.y(interleavedBase) - f.y(interleavedBase + m.interleaved[t])});
    }
    if (addresses) {
      add(svg, 'line', {class: 'boundary', x1: LEFT, x2: WIDTH - RIGHT, y1: f.y(boundary), y2: f.y(boundary)});
      add(svg, 'text', {class: 'mark', x: WIDTH - RIGHT - 4, y: f.y(boundary) - 4, 'text-anchor': 'end'},
          'interleaved region from ' + grouped(boundary));
      add(svg, 'line', {class: 'capacity', x1: LEFT, x2: WIDTH - RIGHT, y1: f.y(capacity), y2: f.y(capacity)});
      add(svg, 'text', {class: 'mark', x: WIDTH - RIGHT - 4, y: f.y(capacity) - 5, 'text-anchor': 'end'},
          'capacity ' + grouped(capacity) + ' bytes');
    } else {
      add(svg, 'line', {class: 'device-line', x1: LEFT, x2: WIDTH - RIGHT, y1: f.y(peak), y2: f.y(peak)});
      add(svg, 'text', {class: 'mark', x: WIDTH - RIGHT - 4, y: f.y(peak) - 5, 'text-anchor': 'end'},
          'fullest tile ' + grouped(peak) + ' bytes = ' + (100 * peak / capacity).toFixed(1) + '% of capacity');
    }
    hover(svg, data.tiles, f.band, document.getElementById('memory-hover'), function (tile) {
      var total = m.standard[tile] + m.interleaved[tile];
      return 'tile ' + tile + ': standard ' + grouped(m.standard[tile]) + ' B, interleaved ' +
             grouped(m.interleaved[tile]) + ' B, together ' + grouped(total) + ' B = ' +
             (100 * total / capacity).toFixed(1) + '% of ' + grouped(capacity);
    });
  }

  function drawCycles(data, selection) {
    var svg = document.getElementById('cycles-chart');
    var steps = data.cycles.per_superstep, tiles = data.tiles;
    var shown = selection === 'all' ? steps.map(function (_, k) { return k; }) : [Number(selection)];
    // The device waits for the slowest tile of every superstep: that sum is its compute time.
    var device = shown.reduce(function (sum, k) { return sum + Math.max.apply(null, steps[k].concat([0])); }, 0);
    var f = frame(svg, 300, Math.max(device, 1), 'compute cycles', tiles, 'tile');
    for (var t = 0; t < tiles; ++t) {
      var stacked = 0;
      shown.forEach(function (k) {
        var cycles = steps[k][t];
        if (cycles <= 0) return;
        add(svg, 'rect', {class: 'cyc', 'data-superstep': k, fill: color(k), x: LEFT + t * f.band,
                          width: f.barWidth, y: f.y(stacked + cycles), height: f.y(stacked) - f.y(stacked + cycles)});
        stacked += cycles;
      });
    }
    add(svg, 'line', {class: 'device-line', x1: LEFT, x2: WIDTH - RIGHT, y1: f.y(device), y2: f.y(device)});
    add(svg, 'text', {class: 'mark', x: WIDTH - RIGHT - 4, y: f.y(device) - 5, 'text-anchor': 'end'},
        (shown.length > 1 ? 'device compute (slowest tile of each superstep) ' : 'slowest tile ') +
        grouped(device) + ' cycles');
    hover(svg, tiles, f.band, document.getElementById('cycles-hover'), function (tile) {
      var parts = shown.map(function (k) { return data.supersteps[k] + ' ' + grouped(steps[k][tile]); });
      var total = shown.reduce(function (sum, k) { return sum + steps[k][tile]; }, 0);
      return 'tile ' + tile + ': ' + grouped(total) + ' cycles (' + parts.join(', ') + '), idle ' +
             grouped(device - total) + ' waiting for the slowest tile';
    });
    var legend = document.getElementById('cycles-legend');
    legend.textContent = '';
    shown.forEach(function (k) {
      var item = document.createElement('span');
      var swatch = document.createElement('span');
      swatch.className = 'swatch';
      swatch.style.background = color(k);
      item.appendChild(swatch);
      item.appendChild(document.createTextNode(k + ': ' + data.supersteps[k]));
      legend.appendChild(item);
    });
  }

  function drawExchange(data) {
    var svg = document.getElementById('exchange-chart');
    var phase = data.phase;
    if (!phase) {
      clear(svg);
      svg.setAttribute('viewBox', '0 0 ' + WIDTH + ' 40');
      add(svg, 'text', {x: LEFT, y: 24}, 'This package has no exchange phase with transfers.');
      return;
    }
    var rowHeight = 30, lane = 11, rows = phase.tiles.length, lanesTop = TOP + 30;
    var height = lanesTop + rows * rowHeight + BOTTOM;
    var end = Math.max(phase.horizon, phase.lower_bound, 1) * 1.03;
    var plotWidth = WIDTH - LEFT - RIGHT, bottom = height - BOTTOM;
    var x = function (cycle) { return LEFT + cycle / end * plotWidth; };
    clear(svg);
    svg.setAttribute('viewBox', '0 0 ' + WIDTH + ' ' + height);
    ticks(end, 8).forEach(function (c) {
      add(svg, 'line', {class: 'grid', x1: x(c), x2: x(c), y1: lanesTop, y2: bottom});
      add(svg, 'text', {x: x(c), y: bottom + 14, 'text-anchor': 'middle'}, grouped(c));
    });
    add(svg, 'text', {x: LEFT + plotWidth / 2, y: height - 6, 'text-anchor': 'middle'},
        'cycle of the phase (upper lane: words sent, lower lane: words received, coloured by sender)');
    phase.tiles.forEach(function (row, r) {
      var top = lanesTop + r * rowHeight;
      add(svg, 'text', {class: 'mark', x: LEFT - 6, y: top + lane + 4, 'text-anchor': 'end'}, 'tile ' + row.tile);
      add(svg, 'rect', {class: 'lane', x: LEFT, width: plotWidth, y: top, height: lane});
      add(svg, 'rect', {class: 'lane', x: LEFT, width: plotWidth, y: top + lane + 2, height: lane});
      row.sends.forEach(function (s) {
        var bar = add(svg, 'rect', {class: 'xsend', x: x(s[0]), y: top, height: lane,
                                    width: Math.max(x(s[0] + s[1]) - x(s[0]), 0.5)});
        add(bar, 'title', {}, 'tile ' + row.tile + ' sends ' + grouped(s[1]) + ' words, cycles ' +
            grouped(s[0]) + '-' + grouped(s[0] + s[1] - 1));
      });
      row.receives.forEach(function (v) {
        var bar = add(svg, 'rect', {class: 'xrecv', fill: color(v[2]), x: x(v[0]), y: top + lane + 2, height: lane,
                                    width: Math.max(x(v[0] + v[1]) - x(v[0]), 0.5)});
        add(bar, 'title', {}, 'tile ' + row.tile + ' receives ' + grouped(v[1]) + ' words from tile ' + v[2] +
            ', cycles ' + grouped(v[0]) + '-' + grouped(v[0] + v[1] - 1));
      });
    });
    // One label row each above the lanes, so close lines keep readable labels; a label
    // near the right edge ends at its line instead of starting there.
    function mark(cycle, cls, label, row) {
      var labelY = TOP - 8 + row * 13, anchor = x(cycle) > WIDTH - RIGHT - 190 ? 'end' : 'start';
      add(svg, 'line', {class: cls, x1: x(cycle), x2: x(cycle), y1: labelY - 4, y2: bottom});
      add(svg, 'text', {class: 'mark', x: x(cycle) + (anchor === 'end' ? -4 : 4), y: labelY,
                        'text-anchor': anchor}, label);
    }
    mark(phase.horizon, 'horizon', 'horizon ' + grouped(phase.horizon), 0);
    mark(phase.lower_bound, 'bound', 'lower bound ' + grouped(phase.lower_bound), 1);
    if (phase.endpoint_lower_bound < phase.lower_bound)
      mark(phase.endpoint_lower_bound, 'endpoint-bound', 'endpoint bound ' + grouped(phase.endpoint_lower_bound), 2);
  }

  // Click a header to sort by that column; click again to reverse.
  function sortable(table) {
    var headers = table.tHead.rows[0].cells;
    Array.prototype.forEach.call(headers, function (th, column) {
      th.addEventListener('click', function () {
        var descending = th.getAttribute('data-sort') !== 'descending';
        Array.prototype.forEach.call(headers, function (h) { h.removeAttribute('data-sort'); });
        th.setAttribute('data-sort', descending ? 'descending' : 'ascending');
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        var key = function (row) {
          var text = row.cells[column].textContent.replace(/[,%\s]/g, '');
          var number = Number(text);
          return isNaN(number) ? row.cells[column].textContent : number;
        };
        rows.sort(function (a, b) {
          var ka = key(a), kb = key(b);
          var order = ka < kb ? -1 : ka > kb ? 1 : 0;
          return descending ? -order : order;
        });
        rows.forEach(function (row) { body.appendChild(row); });
      });
    });
  }

  var data = JSON.parse(document.getElementById('report-data').textContent);
  var memoryView = document.getElementById('memory-view');
  drawMemory(data, memoryView.value);
  memoryView.addEventListener('change', function () { drawMemory(data, memoryView.value); });
  var select = document.getElementById('cycles-superstep');
  drawCycles(data, select.value);
  select.addEventListener('change', function () { drawCycles(data, select.value); });
  drawExchange(data);
  Array.prototype.forEach.call(document.querySelectorAll('table.sortable'), sortable);
  window.showReportErrors();
  document.body.setAttribute('data-render', window.reportErrors.length ? 'error' : 'ok');
})();
)JS";

}  // namespace tessera::report
