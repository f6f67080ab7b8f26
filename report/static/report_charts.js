// vigil's replay report: draws each chart spec (the JSON in #vigil-charts, made by report/charts.py)
// with uPlot, inlined in the page with this file: the report opens offline. Every figure the charts
// show was computed in Python: the y range and its labels, the step lines, where each trade marker
// sits (on the drawn equity line, or as a tick under the time axis when they would crowd it).
"use strict";
(() => {
  const specs = JSON.parse(document.getElementById("vigil-charts").textContent);
  const utc = (ts) => uPlot.tzDate(new Date(ts * 1e3), "Etc/UTC");
  const charts = [];
  // UTC on the time axis: dates over a long span, day and hour within a few days, hours in one
  const formats = [[86400, uPlot.fmtDate("{HH}:{mm}")], [4 * 86400, uPlot.fmtDate("{MM}-{DD} {HH}:{mm}")],
    [Infinity, uPlot.fmtDate("{YYYY}-{MM}-{DD}")]];
  const timeLabels = (u, splits) => {
    const span = u.scales.x.max - u.scales.x.min;
    const format = formats.find(([most]) => span <= most)[1];
    return splits.map((ts) => format(utc(ts)));
  };
  // the hovered instant in the legend, 24 h UTC as everywhere else (uPlot's default is 12 h)
  const hoverFormat = uPlot.fmtDate("{YYYY}-{MM}-{DD} {HH}:{mm}");
  const timeValue = (u, ts) => (ts === null || ts === undefined ? "-" : hoverFormat(utc(ts)));

  function series(spec, s) {
    const out = { label: s.label, stroke: s.colour, width: s.width, spanGaps: true, points: { show: false } };
    if (s.step) out.paths = uPlot.paths.stepped({ align: 1 });
    if (s.fill) out.fill = s.fill;
    if (s.dash) out.dash = s.dash;
    out.value = (u, v) => (v === null || v === undefined ? "-" : v.toLocaleString("en-US", { maximumFractionDigits: 2 }) + spec.unit);
    return out;
  }

  // the trade markers: a triangle on the drawn line (up: buy, down: sell), or a 2 px tick in a
  // strip under the time axis (buys in the upper row, sells in the lower)
  function markers(spec) {
    const m = spec.markers;
    return (u) => {
      if (!m || !m.groups.length) return;
      const ctx = u.ctx, pr = uPlot.pxRatio, half = (m.size_px / 2) * pr;
      ctx.save();
      for (const g of m.groups) {
        const x = u.valToPos(g.at_ms / 1000, "x", true);
        ctx.fillStyle = g.side === "buy" ? m.buy_colour : m.sell_colour;
        if (m.mode === "ticks") {
          const top = u.bbox.top + u.bbox.height + (3 + (g.side === "buy" ? 0 : m.tick_height_px + 2)) * pr;
          ctx.fillRect(x - (m.tick_width_px / 2) * pr, top, m.tick_width_px * pr, m.tick_height_px * pr);
          continue;
        }
        const y = u.valToPos(g.value, "y", true), buy = g.side === "buy";
        const tip = y + (buy ? -7 : 7) * pr, base = y + (buy ? 3 : -3) * pr;
        ctx.beginPath();
        ctx.moveTo(x, tip);
        ctx.lineTo(x - half, base);
        ctx.lineTo(x + half, base);
        ctx.closePath();
        ctx.fill();
      }
      ctx.restore();
    };
  }

  // hovering a marker's column shows its fills (ticker, side, quantity, price, time) as the title
  function hover(u, spec, box) {
    const left = u.cursor.left, groups = spec.markers ? spec.markers.groups : [];
    let best = null, distance = spec.markers ? spec.markers.size_px / 2 + 1 : 0;
    if (left !== null && left !== undefined && left >= 0) {
      for (const g of groups) {
        const d = Math.abs(u.valToPos(g.at_ms / 1000, "x") - left);
        if (d <= distance) { best = g; distance = d; }
      }
    }
    box.title = best ? best.title : "";
  }

  function make(spec) {
    const box = document.getElementById(spec.id);
    const width = () => Math.min(spec.width, box.clientWidth || spec.width);
    const ticks = spec.y_ticks.map((t) => t[0]);
    const opts = {
      width: width(),
      height: spec.height,
      tzDate: utc,
      padding: [spec.top_px, spec.right_px, 0, 0],
      legend: { live: true },
      cursor: { points: { show: false } },
      scales: { x: { time: true, range: () => spec.x_range }, y: { range: () => spec.y_range } },
      axes: [
        { size: spec.bottom_px, values: timeLabels, space: 110, gap: spec.markers && spec.markers.mode === "ticks" ? 20 : 5 },
        { size: spec.left_px, splits: () => ticks, values: () => spec.y_ticks.map((t) => t[1]) },
      ],
      series: [{ label: "UTC", value: timeValue }, ...spec.series.map((s) => series(spec, s))],
      hooks: { draw: [markers(spec)], setCursor: [(u) => hover(u, spec, box)] },
    };
    const data = [spec.x, ...spec.series.map((s) => s.values)];
    charts.push([new uPlot(opts, data, box), width, spec.height]);
  }

  specs.forEach(make);
  window.addEventListener("resize", () => charts.forEach(([u, width, height]) => u.setSize({ width: width(), height })));
})();
