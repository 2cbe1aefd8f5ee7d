// The front end of gpututor.ui.live_figure.LiveFigure: line and stacked-bar charts drawn on
// canvases, a few kilobytes of JavaScript instead of plotly.js (about 5 MB, parsed and laid out
// for every new FigureWidget). Each chart is {title, xlabel, kind: "lines" | "bars" | "spans",
// categories (bars), rows (spans), series: [{name, x, y, dash, color?}] or, for spans (a Gantt chart),
// [{name, color, row, start, length, label}]}; null values are "not measured": nothing drawn.
// The figure is redrawn when the kernel changes "charts"; the time spent drawing is sent back in
// "draw_ms" (150 ms after the last redraw) so the kernel can say what the view cost.

const COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
                "#7f7f7f", "#bcbd22", "#17becf"];
const DASHES = { solid: [], dash: [6, 4], dot: [2, 3], dashdot: [6, 3, 2, 3], longdash: [10, 4] };
const WIDTH = 420, HEIGHT = 210, PAD = { left: 58, right: 12, top: 8, bottom: 34 };

function niceTicks(lo, hi, count, integers) {
  if (!(hi > lo)) { hi = lo + 1; }
  const raw = (hi - lo) / count, mag = Math.pow(10, Math.floor(Math.log10(raw)));
  let step = [1, 2, 2.5, 5, 10].map(m => m * mag).find(s => s >= raw);
  if (integers) { step = Math.max(1, Math.round(step)); }   // steps, ranks: whole numbers
  const ticks = [];
  for (let t = Math.ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) { ticks.push(t); }
  return ticks;
}

function label(v) {
  const a = Math.abs(v);
  if (a >= 1e6) { return (v / 1e6).toFixed(a >= 1e7 ? 0 : 1) + "M"; }
  if (a >= 1e4) { return (v / 1e3).toFixed(0) + "k"; }
  if (a >= 100 || v === 0) { return v.toFixed(0); }
  return v.toPrecision(3).replace(/\.?0+$/, "");
}

function axes(ctx, xlo, xhi, ylo, yhi, xlabels) {
  const w = WIDTH - PAD.left - PAD.right, h = HEIGHT - PAD.top - PAD.bottom;
  const X = x => PAD.left + (xhi > xlo ? (x - xlo) / (xhi - xlo) : 0.5) * w;
  const Y = y => PAD.top + h - (yhi > ylo ? (y - ylo) / (yhi - ylo) : 0.5) * h;
  ctx.strokeStyle = "#e5e5e5"; ctx.fillStyle = "#444"; ctx.lineWidth = 1;
  ctx.font = "11px sans-serif"; ctx.textAlign = "right"; ctx.textBaseline = "middle";
  for (const t of niceTicks(ylo, yhi, 4)) {
    ctx.beginPath(); ctx.moveTo(PAD.left, Y(t)); ctx.lineTo(PAD.left + w, Y(t)); ctx.stroke();
    ctx.fillText(label(t), PAD.left - 6, Y(t));
  }
  ctx.textAlign = "center"; ctx.textBaseline = "top";
  if (xlabels) {
    xlabels.forEach((name, i) => ctx.fillText(name, X(i), PAD.top + h + 6));
  } else {
    const whole = Number.isInteger(xlo) && Number.isInteger(xhi);
    for (const t of niceTicks(xlo, xhi, 6, whole)) { ctx.fillText(label(t), X(t), PAD.top + h + 6); }
  }
  ctx.strokeStyle = "#999";
  ctx.beginPath(); ctx.moveTo(PAD.left, PAD.top); ctx.lineTo(PAD.left, PAD.top + h);
  ctx.lineTo(PAD.left + w, PAD.top + h); ctx.stroke();
  return { X, Y, w };
}

function finite(values) { return values.filter(v => v !== null && Number.isFinite(v)); }

function drawLines(ctx, chart) {
  const xs = finite(chart.series.flatMap(s => s.x)), ys = finite(chart.series.flatMap(s => s.y));
  if (!ys.length) { return 0; }
  let ylo = Math.min(...ys), yhi = Math.max(...ys);
  const pad = (yhi - ylo) * 0.08 || Math.abs(yhi) * 0.1 || 1;
  ylo -= pad; yhi += pad;
  const { X, Y } = axes(ctx, Math.min(...xs), Math.max(...xs), ylo, yhi, null);
  chart.series.forEach((s, k) => {
    ctx.strokeStyle = ctx.fillStyle = s.color || COLORS[k % COLORS.length]; ctx.lineWidth = 1.6;
    ctx.setLineDash(DASHES[s.dash] || []);   // equal curves lie on top of each other: dash them
    ctx.beginPath();
    let drawing = false;
    s.x.forEach((x, i) => {
      const y = s.y[i];
      if (y === null || !Number.isFinite(y)) { drawing = false; return; }
      if (drawing) { ctx.lineTo(X(x), Y(y)); } else { ctx.moveTo(X(x), Y(y)); drawing = true; }
    });
    ctx.stroke();
    ctx.setLineDash([]);
    if (s.x.length <= 60) {
      s.x.forEach((x, i) => {
        if (s.y[i] !== null && Number.isFinite(s.y[i])) { ctx.fillRect(X(x) - 1.5, Y(s.y[i]) - 1.5, 3, 3); }
      });
    }
  });
  return ys.length;
}

function drawBars(ctx, chart) {
  const n = chart.categories.length, marks = chart.marks || [];
  const totals = chart.categories.map((_, i) =>
    chart.series.reduce((sum, s) => sum + (Number.isFinite(s.y[i]) ? s.y[i] : 0), 0));
  const top = Math.max(...totals, ...finite(marks.flatMap(m => m.y)), 1e-9) * 1.08;
  const { X, Y, w } = axes(ctx, -0.5, n - 0.5, 0, top, chart.categories);
  const width = Math.min(60, (w / n) * 0.6);
  chart.categories.forEach((_, i) => {
    let base = 0;
    chart.series.forEach((s, k) => {
      const v = s.y[i];
      if (v === null || !Number.isFinite(v) || v <= 0) { return; }
      ctx.fillStyle = COLORS[k % COLORS.length];
      ctx.fillRect(X(i) - width / 2, Y(base + v), width, Y(base) - Y(base + v));
      base += v;
    });
  });
  marks.forEach((m, k) => {   // a value drawn over each bar (e.g. a formula's), as a thick tick
    ctx.strokeStyle = COLORS[(chart.series.length + k) % COLORS.length]; ctx.lineWidth = 3;
    m.y.forEach((v, i) => {
      if (v === null || !Number.isFinite(v)) { return; }
      ctx.beginPath(); ctx.moveTo(X(i) - width / 2 - 4, Y(v)); ctx.lineTo(X(i) + width / 2 + 4, Y(v));
      ctx.stroke();
    });
  });
  return totals.length;
}

function drawSpans(ctx, chart) {
  const rows = chart.rows || [], n = Math.max(rows.length, 1), lo_hi = [];
  chart.series.forEach(s => s.start.forEach((b, i) => {
    const l = s.length[i];
    if (Number.isFinite(b) && Number.isFinite(l)) { lo_hi.push(b, b + l); }
  }));
  if (!lo_hi.length) { return 0; }
  const lo = Math.min(...lo_hi), hi = Math.max(...lo_hi);
  const w = WIDTH - PAD.left - PAD.right, h = HEIGHT - PAD.top - PAD.bottom, rowH = h / n;
  const X = x => PAD.left + (hi > lo ? (x - lo) / (hi - lo) : 0.5) * w;
  ctx.font = "11px sans-serif"; ctx.fillStyle = "#444"; ctx.strokeStyle = "#e5e5e5";
  ctx.lineWidth = 1; ctx.textAlign = "center"; ctx.textBaseline = "top";
  for (const t of niceTicks(lo, hi, 6, false)) {
    ctx.beginPath(); ctx.moveTo(X(t), PAD.top); ctx.lineTo(X(t), PAD.top + h); ctx.stroke();
    ctx.fillText(label(t), X(t), PAD.top + h + 6);
  }
  ctx.textAlign = "right"; ctx.textBaseline = "middle";
  rows.forEach((r, i) => ctx.fillText(r, PAD.left - 6, PAD.top + rowH * (i + 0.5)));
  ctx.strokeStyle = "#999";
  ctx.beginPath(); ctx.moveTo(PAD.left, PAD.top); ctx.lineTo(PAD.left, PAD.top + h);
  ctx.lineTo(PAD.left + w, PAD.top + h); ctx.stroke();
  let count = 0;
  chart.series.forEach((s, k) => {
    const color = s.color || COLORS[k % COLORS.length];
    s.row.forEach((r, i) => {
      const b = s.start[i], l = s.length[i], row = rows.indexOf(r);
      if (row < 0 || !Number.isFinite(b) || !Number.isFinite(l)) { return; }
      const x0 = X(b), x1 = X(b + l), y0 = PAD.top + rowH * (row + 0.15);
      ctx.fillStyle = color;
      ctx.fillRect(x0, y0, Math.max(1, x1 - x0 - 1), rowH * 0.7);   // 1 px apart
      const text = (s.label || [])[i];
      if (text && x1 - x0 > 12) {   // the micro-batch, inside its bar where it fits
        ctx.fillStyle = "#fff"; ctx.textAlign = "center"; ctx.textBaseline = "middle";
        ctx.fillText(text, (x0 + x1) / 2, y0 + rowH * 0.35);
      }
      count += 1;
    });
  });
  return count;
}

function cell(root) {
  const box = document.createElement("div");
  const title = document.createElement("div");
  title.className = "gpututor-live-title";
  title.style.cssText = "font-weight:600;margin:0 0 2px 4px";
  const canvas = document.createElement("canvas");
  const ratio = window.devicePixelRatio || 1;
  canvas.width = WIDTH * ratio; canvas.height = HEIGHT * ratio;
  canvas.style.cssText = `width:${WIDTH}px;height:${HEIGHT}px;display:block`;
  canvas.getContext("2d").scale(ratio, ratio);
  const xlabel = document.createElement("div");
  xlabel.style.cssText = `width:${WIDTH}px;text-align:center;color:#444;margin-top:-4px`;
  const legend = document.createElement("div");
  legend.className = "gpututor-live-legend";
  legend.style.cssText = `width:${WIDTH}px;display:flex;flex-wrap:wrap;gap:2px 12px;margin-left:4px`;
  box.append(title, canvas, xlabel, legend);
  root.appendChild(box);
  return { box, title, canvas, xlabel, legend, keys: "" };
}

function render({ model, el }) {
  const root = document.createElement("div");
  root.className = "gpututor-live";
  root.style.cssText = "display:grid;grid-template-columns:repeat(auto-fill,minmax(430px,1fr));" +
    "gap:10px 16px;font:12px sans-serif;color:#222;padding:4px 0";
  const heading = document.createElement("div");
  heading.style.cssText = "grid-column:1/-1;font-size:14px;font-weight:600";
  root.appendChild(heading);
  el.appendChild(root);
  const cells = [];
  let spent = 0, timer = null;

  function report() {
    timer = null;
    model.set("draw_ms", Math.round(spent * 10) / 10);
    model.save_changes();
  }

  function draw() {
    const started = performance.now();
    const charts = model.get("charts") || [];
    heading.textContent = model.get("title") || "";
    while (cells.length < charts.length) { cells.push(cell(root)); }
    while (cells.length > charts.length) { cells.pop().box.remove(); }
    let points = 0;
    charts.forEach((chart, i) => {
      const c = cells[i], ctx = c.canvas.getContext("2d");
      ctx.clearRect(0, 0, WIDTH, HEIGHT);
      if (c.title.textContent !== chart.title) { c.title.textContent = chart.title; }
      if (c.xlabel.textContent !== (chart.xlabel || "")) { c.xlabel.textContent = chart.xlabel || ""; }
      const named = chart.series.concat(chart.marks || []);
      const keys = named.map(s => s.name).join("\n");
      if (c.keys !== keys) {   // the legend is HTML: rebuilt only when its names change
        c.keys = keys;
        c.legend.replaceChildren(...named.map((s, k) => {
          const item = document.createElement("span");
          const swatch = document.createElement("span");
          swatch.style.cssText = `display:inline-block;width:10px;height:10px;margin-right:4px;` +
            `background:${s.color || COLORS[k % COLORS.length]}`;
          item.append(swatch, s.name);
          return item;
        }));
      }
      const drawn = chart.kind === "bars" ? drawBars(ctx, chart)
        : chart.kind === "spans" ? drawSpans(ctx, chart) : drawLines(ctx, chart);
      if (i === 0) {
        points = chart.kind === "spans" ? drawn
          : chart.series.length ? finite(chart.series[0].y).length : 0;
      }
      c.canvas.dataset.points = String(drawn);
    });
    root.dataset.points = String(points);     // what the browser tests read: points of chart 0
    root.dataset.draws = String(Number(root.dataset.draws || 0) + 1);
    spent += performance.now() - started;
    if (timer !== null) { clearTimeout(timer); }
    timer = setTimeout(report, 150);   // one message a moment after the last redraw
  }

  // A show() that changes both "charts" and "title" fires two change events: draw once, at
  // the next frame (and not at all while the page is hidden).
  let frame = null;
  function schedule() {
    if (frame === null) { frame = requestAnimationFrame(() => { frame = null; draw(); }); }
  }
  model.on("change:charts", schedule);
  model.on("change:title", schedule);
  draw();
  return () => {
    model.off("change:charts", schedule);
    model.off("change:title", schedule);
    if (frame !== null) { cancelAnimationFrame(frame); }
    if (timer !== null) { clearTimeout(timer); }
  };
}

export default { render };
