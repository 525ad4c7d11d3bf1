/* mpcoa dashboard: charts (vendored Chart.js), live campaign progress, small form helpers.
   No inline scripts: page data comes from <script type="application/json"> blocks. */
(function () {
  "use strict";

  var COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
                "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"];

  function fmt(x, digits) {
    return (x === null || x === undefined) ? "—" : Number(x).toFixed(digits);
  }

  /* --- shared axes: service/flows/takeaways/figures.py defines them for the report too ------ */
  var ASINH_SCALE = 1;
  function symlog(v, t) { return Math.sign(v) * Math.log10(1 + Math.abs(v) / t); }
  function unsymlog(u, t) { return Math.sign(u) * t * (Math.pow(10, Math.abs(u)) - 1); }
  function axisOptions(axis, extra) {
    /* "log" is Chart.js's logarithmic axis; "symlog" is drawn on a linear axis of transformed
       values (symlog() below), its ticks labelled with the value they stand for */
    var out = {type: axis.scale === "log" ? "logarithmic" : "linear",
               title: {display: true, text: axis.label}};
    if (axis.scale === "symlog") {
      var t = axis.linthresh || ASINH_SCALE;
      out.ticks = {callback: function (u) { return Number(unsymlog(u, t).toPrecision(2)); }};
    }
    Object.keys(extra || {}).forEach(function (k) { out[k] = extra[k]; });
    return out;
  }
  function axisValue(axis, v) {
    return (v === null || axis.scale !== "symlog") ? v : symlog(v, axis.linthresh || ASINH_SCALE);
  }

  /* --- campaign picker: submit on change ----------------------------------------------------- */
  document.querySelectorAll("select[data-autosubmit]").forEach(function (select) {
    select.addEventListener("change", function () { select.form.submit(); });
  });

  /* --- Figure 5: measured points, fitted curves, T* and the delta band ---------------------- */
  function drawFit(canvas, data) {
    var datasets = [];
    var lo = data.bs_min, hi = data.bs_max;
    if (data.target !== null && data.t_star !== null) {
      datasets.push({
        label: "(1 − δ)·T* = " + fmt(data.target, 2),
        data: [{x: lo, y: data.target}, {x: hi, y: data.target}],
        showLine: true, pointRadius: 0, borderColor: "rgba(120,120,120,0.9)", borderWidth: 1,
        borderDash: [6, 4], fill: false, order: 10
      });
      datasets.push({
        label: "δ band up to T* = " + fmt(data.t_star.tp, 2),
        data: [{x: lo, y: data.t_star.tp}, {x: hi, y: data.t_star.tp}],
        showLine: true, pointRadius: 0, borderColor: "rgba(120,120,120,0.9)", borderWidth: 1,
        backgroundColor: "rgba(255,196,0,0.18)", fill: "-1", order: 10
      });
    }
    data.series.forEach(function (s, k) {
      var color = COLORS[k % COLORS.length];
      datasets.push({
        label: s.cc, kind: "curve",
        data: s.curve.map(function (p) { return {x: p[0], y: p[1]}; }),
        showLine: true, pointRadius: 0, borderColor: color, backgroundColor: color,
        borderWidth: 2, fill: false, order: 2
      });
      datasets.push({
        label: s.cc + " measured", kind: "points",
        data: s.points.map(function (p) { return {x: p.bs, y: p.tp, n: p.n, min: p.min, max: p.max}; }),
        showLine: false, pointRadius: 3, pointHoverRadius: 5, borderColor: color,
        backgroundColor: color + "99", order: 3
      });
    });
    if (data.t_star !== null && data.t_star.here) {
      datasets.push({
        label: "T* peak (" + data.t_star.cc + ")",
        data: [{x: data.t_star.bs, y: data.t_star.tp}],
        pointStyle: "star", pointRadius: 12, borderWidth: 2, borderColor: "#111",
        backgroundColor: "#111", showLine: false, order: 0
      });
    }
    if (data.chosen) {
      datasets.push({
        label: "OBS " + fmt(data.chosen.bs, 2) + " MiB (" + data.chosen.cc + ")",
        data: [{x: data.chosen.bs, y: data.chosen.tp}],
        pointStyle: "triangle", pointRadius: 9, borderWidth: 2, borderColor: "#000",
        backgroundColor: "#ffd400", showLine: false, order: 0
      });
    }
    return new window.Chart(canvas, {
      type: "scatter",
      data: {datasets: datasets},
      options: {
        animation: false, responsive: true, maintainAspectRatio: false, parsing: true,
        interaction: {mode: "nearest", intersect: false},
        scales: {
          x: axisOptions(data.axes.x, {min: lo, max: hi}),
          y: axisOptions(data.axes.y, {beginAtZero: true})
        },
        plugins: {
          legend: {
            position: "bottom",
            labels: {boxWidth: 14, filter: function (item, chart) {
              return chart.datasets[item.datasetIndex].kind !== "points";
            }}
          },
          tooltip: {callbacks: {label: function (ctx) {
            var r = ctx.raw;
            var text = ctx.dataset.label + ": " + fmt(r.y, 2) + " Mbit/s at " + fmt(r.x, 2) + " MiB";
            if (r.n !== undefined) { text += " (" + r.n + " runs, " + fmt(r.min, 1) + "–" + fmt(r.max, 1) + ")"; }
            return text;
          }}}
        }
      }
    });
  }

  var charts = document.querySelectorAll("canvas.fit-chart");
  if (charts.length && typeof window.Chart !== "function") {
    console.error("mpcoa: Chart.js did not load");
  }
  charts.forEach(function (canvas) {
    var source = document.getElementById(canvas.id + "-data");
    if (!source || typeof window.Chart !== "function") { return; }
    var chart = drawFit(canvas, JSON.parse(source.textContent));
    canvas.dataset.rendered = chart ? "yes" : "no";
  });

  /* --- Ω per subflow and CC with its interval (report page 2): SP* members filled ---------- */
  var intervalWhiskers = {
    id: "intervalWhiskers",
    afterDatasetsDraw: function (chart) {
      var ctx = chart.ctx, y = chart.scales.y;
      chart.data.datasets.forEach(function (ds, i) {
        if (!ds.intervals) { return; }
        chart.getDatasetMeta(i).data.forEach(function (bar, j) {
          var iv = ds.intervals[j];
          if (!iv || iv[0] === null || iv[1] === null) { return; }
          var top = y.getPixelForValue(iv[1]), bottom = y.getPixelForValue(iv[0]);
          ctx.save();
          ctx.strokeStyle = "#000"; ctx.lineWidth = 1;
          ctx.beginPath();
          ctx.moveTo(bar.x, top); ctx.lineTo(bar.x, bottom);
          ctx.moveTo(bar.x - 4, top); ctx.lineTo(bar.x + 4, top);
          ctx.moveTo(bar.x - 4, bottom); ctx.lineTo(bar.x + 4, bottom);
          ctx.stroke();
          ctx.restore();
        });
      });
    }
  };

  function drawOmega(canvas, data) {
    var ya = data.axes.y;
    var datasets = data.ccs.map(function (cc, k) {
      var color = COLORS[k % COLORS.length];
      var bars = data.subflows.map(function (sf) {
        return data.bars.filter(function (b) { return b.cc === cc && b.subflow === sf; })[0] || null;
      });
      return {
        label: cc, bars: bars,
        data: bars.map(function (b) { return b ? axisValue(ya, b.omega) : null; }),
        intervals: bars.map(function (b) {
          return b ? [axisValue(ya, b.low), axisValue(ya, b.high)] : null;
        }),
        backgroundColor: bars.map(function (b) { return b && b.in_subset ? color : "#ffffff"; }),
        borderColor: color, borderWidth: 1.5
      };
    });
    return new window.Chart(canvas, {
      type: "bar",
      data: {labels: data.subflows, datasets: datasets},
      plugins: [intervalWhiskers],
      options: {
        animation: false, responsive: true, maintainAspectRatio: false,
        scales: {x: axisOptions(data.axes.x, {type: "category"}), y: axisOptions(ya)},
        plugins: {
          legend: {position: "bottom", labels: {boxWidth: 14}},
          tooltip: {callbacks: {label: function (ctx) {
            var b = ctx.dataset.bars[ctx.dataIndex];
            if (!b) { return ctx.dataset.label + ": —"; }
            var text = b.cc + ": Ω = " + fmt(b.omega, 3);
            if (b.low !== null && b.high !== null) { text += " [" + fmt(b.low, 3) + ", " + fmt(b.high, 3) + "]"; }
            return text + (b.in_subset ? " (in SP*)" : " (standby)");
          }}}
        }
      }
    });
  }

  /* --- stream campaigns and answers: frame delay CDF, head-of-line timeline, p99 per buffer -- */
  function linearChart(canvas, datasets, xTitle, yTitle, yMax, tooltip) {
    return new window.Chart(canvas, {
      type: "scatter",
      data: {datasets: datasets},
      options: {
        animation: false, responsive: true, maintainAspectRatio: false,
        interaction: {mode: "nearest", intersect: false},
        scales: {
          x: {type: "linear", beginAtZero: true, title: {display: true, text: xTitle}},
          y: {beginAtZero: true, max: yMax, title: {display: true, text: yTitle}}
        },
        plugins: {
          legend: {position: "bottom", labels: {boxWidth: 14}},
          tooltip: {callbacks: {label: tooltip}}
        }
      }
    });
  }

  function drawCdf(canvas, data) {
    var datasets = data.series.map(function (s, k) {
      var color = COLORS[k % COLORS.length];
      return {
        label: fmt(s.bs, 3) + " MiB (" + s.runs + " runs, " + Math.round(100 * s.reached) + " % arrived)",
        data: s.points.map(function (p) { return {x: p[0], y: p[1]}; }),
        showLine: true, stepped: true, pointRadius: 0, borderColor: color,
        backgroundColor: color, borderWidth: 2, fill: false
      };
    });
    return linearChart(canvas, datasets, "frame delay (ms)", "share of frames sent", 1,
      function (ctx) {
        return ctx.dataset.label + ": " + Math.round(100 * ctx.raw.y) + " % within " + fmt(ctx.raw.x, 1) + " ms";
      });
  }

  function drawTimeline(canvas, data) {
    var top = data.points.reduce(function (m, p) { return Math.max(m, p[1]); }, 0);
    var datasets = [{
      label: "head-of-line wait per frame",
      data: data.points.map(function (p) { return {x: p[0], y: p[1]}; }),
      showLine: true, pointRadius: 1.5, borderColor: COLORS[0], backgroundColor: COLORS[0],
      borderWidth: 1, fill: false
    }];
    if (data.lost.length) {
      datasets.push({
        label: "lost frame (" + data.lost.length + ")",
        data: data.lost.map(function (t) { return {x: t, y: top}; }),
        showLine: false, pointStyle: "crossRot", pointRadius: 7, borderWidth: 2,
        borderColor: "#d62728", backgroundColor: "#d62728"
      });
    }
    return linearChart(canvas, datasets, "send time after the warm-up (s)", "head-of-line wait (ms)",
      undefined, function (ctx) {
        return ctx.dataset.label + " at " + fmt(ctx.raw.x, 2) + " s: " + fmt(ctx.raw.y, 1) + " ms";
      });
  }

  function drawP99(canvas, data) {
    var datasets = [];
    var xs = [];
    data.series.forEach(function (s, k) {
      var color = COLORS[k % COLORS.length];
      var chosen = s.arm === data.chosen;
      var pts = s.points.filter(function (p) { return p.p99 !== null; });
      pts.forEach(function (p) { xs.push(p.bs); });
      datasets.push({
        label: s.arm + (chosen ? " (the answer)" : ""),
        data: pts.map(function (p) { return {x: p.bs, y: p.p99, runs: p.runs, carries: p.carries}; }),
        showLine: true, borderColor: color, backgroundColor: pts.map(function (p) {
          return p.carries ? color : "#ffffff";
        }),
        pointRadius: 4, borderWidth: chosen ? 3 : 1.5, fill: false
      });
    });
    if (data.limit !== null && xs.length) {
      var lo = Math.min.apply(null, xs), hi = Math.max.apply(null, xs);
      datasets.push({
        label: "(1 + δ)·best = " + fmt(data.limit, 1) + " ms",
        data: [{x: lo, y: data.limit}, {x: hi, y: data.limit}],
        showLine: true, pointRadius: 0, borderColor: "rgba(120,120,120,0.9)", borderWidth: 1,
        borderDash: [6, 4], fill: false
      });
    }
    if (data.obs !== null && data.p99 !== null) {
      datasets.push({
        label: "OBS " + fmt(data.obs, 3) + " MiB",
        data: [{x: data.obs, y: data.p99}],
        pointStyle: "triangle", pointRadius: 9, borderWidth: 2, borderColor: "#000",
        backgroundColor: "#ffd400", showLine: false
      });
    }
    return linearChart(canvas, datasets, "buffer size (MiB)", "p99 frame delay (ms)", undefined,
      function (ctx) {
        var r = ctx.raw;
        var text = ctx.dataset.label + ": " + fmt(r.y, 1) + " ms at " + fmt(r.x, 3) + " MiB";
        if (r.runs !== undefined) { text += " (" + r.runs + " runs" + (r.carries ? "" : ", does not carry") + ")"; }
        return text;
      });
  }

  var STREAM_CHARTS = {cdf: drawCdf, timeline: drawTimeline, p99: drawP99};
  var streamCharts = document.querySelectorAll("canvas.stream-chart");
  if (streamCharts.length && typeof window.Chart !== "function") {
    console.error("mpcoa: Chart.js did not load");
  }
  streamCharts.forEach(function (canvas) {
    var source = document.getElementById(canvas.id + "-data");
    var draw = STREAM_CHARTS[canvas.getAttribute("data-chart")];
    if (!source || !draw || typeof window.Chart !== "function") { return; }
    var chart = draw(canvas, JSON.parse(source.textContent));
    canvas.dataset.rendered = chart ? "yes" : "no";
  });

  /* --- one probe: a value over time per stream, or one bar per subflow ------------------- */
  function drawSeries(canvas, data) {
    var datasets = data.series.map(function (s, k) {
      var color = COLORS[k % COLORS.length];
      return {
        label: s.label, data: s.points.map(function (p) { return {x: p[0], y: p[1]}; }),
        showLine: true, pointRadius: 2, borderColor: color, backgroundColor: color,
        borderWidth: 1.5, fill: false
      };
    });
    return new window.Chart(canvas, {
      type: "scatter",
      data: {datasets: datasets},
      options: {
        animation: false, responsive: true, maintainAspectRatio: false,
        interaction: {mode: "nearest", intersect: false},
        scales: {x: axisOptions(data.axes.x, {beginAtZero: true}),
                 y: axisOptions(data.axes.y, {beginAtZero: true})},
        plugins: {legend: {position: "bottom", labels: {boxWidth: 14}}}
      }
    });
  }

  function drawBars(canvas, data) {
    return new window.Chart(canvas, {
      type: "bar",
      data: {labels: data.labels, datasets: [{
        label: data.axes.y.label, data: data.values,
        backgroundColor: data.labels.map(function (_, k) { return COLORS[k % COLORS.length]; })
      }]},
      options: {
        animation: false, responsive: true, maintainAspectRatio: false,
        scales: {x: axisOptions(data.axes.x, {type: "category"}),
                 y: axisOptions(data.axes.y, {beginAtZero: true})},
        plugins: {legend: {display: false}}
      }
    });
  }

  var FIGURES = {omega: drawOmega, series: drawSeries, bars: drawBars};
  var figures = document.querySelectorAll("canvas.figure-chart");
  if (figures.length && typeof window.Chart !== "function") {
    console.error("mpcoa: Chart.js did not load");
  }
  figures.forEach(function (canvas) {
    var source = document.getElementById(canvas.id + "-data");
    var draw = FIGURES[canvas.getAttribute("data-chart")];
    if (!source || !draw || typeof window.Chart !== "function") { return; }
    var chart = draw(canvas, JSON.parse(source.textContent));
    canvas.dataset.rendered = chart ? "yes" : "no";
  });

  /* --- live campaign progress: poll GET /campaigns/{id} while queued or running ------------ */
  var pollSeconds = Number(document.body.getAttribute("data-poll-seconds")) || 3;
  document.querySelectorAll("[data-campaign-poll]").forEach(function (box) {
    var url = box.getAttribute("data-campaign-poll");
    var bar = box.querySelector("[data-role=bar]");
    var text = box.querySelector("[data-role=text]");
    var state = box.querySelector("[data-role=state]");
    var live = box.querySelector("[data-role=live]");
    function active(s) { return s === "queued" || s === "running"; }
    function tick() {
      fetch(url, {headers: {"Accept": "application/json"}, credentials: "same-origin"})
        .then(function (response) {
          if (!response.ok) { throw new Error("HTTP " + response.status); }
          return response.json();
        })
        .then(function (c) {
          bar.value = c.progress;
          text.textContent = c.probes_done + " / " + c.probes_total + " probes (" +
            Math.round(100 * c.progress) + " %)";
          state.textContent = c.state;
          state.className = "state state-" + c.state;
          box.setAttribute("data-state", c.state);
          box.setAttribute("data-polled", String(Number(box.getAttribute("data-polled") || 0) + 1));
          if (active(c.state)) {
            window.setTimeout(tick, pollSeconds * 1000);
          } else if (live) {
            live.textContent = "finished: reload for the results";
            live.className = "muted";
          }
        })
        .catch(function (err) {
          if (live) { live.textContent = "progress unavailable (" + err.message + ")"; }
          window.setTimeout(tick, pollSeconds * 4000);
        });
    }
    if (active(box.getAttribute("data-state"))) {
      window.setTimeout(tick, pollSeconds * 1000);
    }
  });
})();
