// Draws the report's charts with uPlot from the JSON in #report-data. Each chart: drag to zoom,
// double-click to reset, values under the cursor in its legend, an optional log y axis, and for
// noisy lines a smoothing slider (TensorBoard's debiased exponential moving average).
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("report-data").textContent);
  // Overlaid runs: a run is a colour in every chart, and its lines (train, val) differ by dash.
  var DASHES = [[], [8, 4], [2, 3], [8, 3, 2, 3]];
  var palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
                 "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];

  // Debiased EMA: the first points are not pulled towards zero. Gaps (null) stay gaps.
  function smooth(ys, weight) {
    var out = new Array(ys.length), last = 0, count = 0;
    for (var i = 0; i < ys.length; i++) {
      var y = ys[i];
      if (y === null || !isFinite(y)) { out[i] = null; continue; }
      last = last * weight + (1 - weight) * y;
      count++;
      out[i] = last / (1 - Math.pow(weight, count));
    }
    return out;
  }

  // Four significant digits without trailing zeros; exponents only for the very small or large.
  function fmt(v) {
    if (v === null || v === undefined || !isFinite(v)) return "–";
    var a = Math.abs(v);
    if (a !== 0 && (a < 1e-3 || a >= 1e7)) return v.toExponential(2);
    return a >= 1000 ? Math.round(v).toLocaleString("en-US") : String(Number(v.toPrecision(4)));
  }

  // Steps and epochs are whole numbers: ticks at 1, 2, 5 × 10^k only.
  var wholeIncrs = [];
  for (var p = 1; p <= 1e9; p *= 10) { wholeIncrs.push(p, 2 * p, 5 * p); }

  function build(chart, box) {
    var head = document.createElement("div");
    head.className = "chart-head";
    var title = document.createElement("h3");
    title.textContent = chart.title;
    head.appendChild(title);
    var controls = document.createElement("span");
    controls.className = "controls";
    head.appendChild(controls);
    box.appendChild(head);
    var plotDiv = document.createElement("div");
    box.appendChild(plotDiv);

    var state = { log: false, weight: chart.smoothing ? 0.6 : 0 };
    var plot = null;
    if (chart.logScale) {
      var label = document.createElement("label");
      var box1 = document.createElement("input");
      box1.type = "checkbox";
      box1.addEventListener("change", function () { state.log = box1.checked; draw(); });
      label.appendChild(box1);
      label.appendChild(document.createTextNode(" log scale"));
      controls.appendChild(label);
    }
    if (chart.smoothing) {
      var slabel = document.createElement("label");
      var slider = document.createElement("input");
      slider.type = "range"; slider.min = "0"; slider.max = "0.99"; slider.step = "0.01";
      slider.value = String(state.weight);
      var shown = document.createElement("span");
      shown.textContent = state.weight.toFixed(2);
      slider.addEventListener("input", function () {
        state.weight = parseFloat(slider.value);
        shown.textContent = state.weight.toFixed(2);
        draw();
      });
      slabel.appendChild(document.createTextNode(" smoothing "));
      slabel.appendChild(slider);
      slabel.appendChild(shown);
      controls.appendChild(slabel);
    }

    function draw() {
      // One x axis for all lines: uPlot.join merges the series' x values, gaps where one has none.
      var tables = chart.series.map(function (s) { return [s.x, s.y]; });
      var joined = uPlot.join(tables);
      var series = [{ label: chart.xLabel, value: function (u, v) { return fmt(v); } }];
      var columns = [joined[0]];
      chart.series.forEach(function (s, i) {
        var color = palette[s.colour % palette.length];
        var dash = DASHES[s.dashed % DASHES.length];
        var ys = joined[i + 1].map(function (y) {
          return y === null || !isFinite(y) || (state.log && y <= 0) ? null : y;
        });
        if (state.weight > 0) {
          series.push({ label: s.label + " (raw)", stroke: color + "44", width: 1,
                        spanGaps: true, value: function (u, v) { return fmt(v); } });
          columns.push(ys);
          series.push({ label: s.label + " (smoothed)", stroke: color, width: 2, dash: dash,
                        spanGaps: true, value: function (u, v) { return fmt(v); } });
          columns.push(smooth(ys, state.weight));
        } else {
          series.push({ label: s.label, stroke: color, width: 2, dash: dash, spanGaps: true,
                        points: { show: s.x.length <= 60 },
                        value: function (u, v) { return fmt(v); } });
          columns.push(ys);
        }
      });
      var opts = {
        width: Math.max(320, box.clientWidth - 8),
        height: 300,
        scales: { x: { time: false }, y: { distr: state.log ? 3 : 1 } },
        axes: [
          { label: chart.xLabel, incrs: wholeIncrs, values: function (u, splits) {
              return splits.map(fmt); } },
          { label: chart.yLabel, size: 70,
            values: function (u, splits) { return splits.map(fmt); } }
        ],
        series: series,
        cursor: { drag: { x: true, y: false } },
        legend: { live: true }
      };
      if (plot) plot.destroy();
      plot = new uPlot(opts, columns, plotDiv);
    }

    draw();
    window.addEventListener("resize", function () {
      plot.setSize({ width: Math.max(320, box.clientWidth - 8), height: 300 });
    });
  }

  var holder = document.getElementById("charts");
  data.charts.forEach(function (chart) {
    var box = document.createElement("section");
    box.className = "chart";
    box.id = "chart-" + chart.id;
    holder.appendChild(box);
    build(chart, box);
  });
})();
