/* mpcoa dashboard: charts (vendored Chart.js), live campaign progress, small form helpers.
   No inline scripts: page data comes from <script type="application/json"> blocks. */
(function () {
  "use strict";

  var COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
                "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"];

  function fmt(x, digits) {
    return (x === null || x === undefined) ? "—" : Number(x).toFixed(digits);
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
          x: {type: "linear", min: 0, max: Math.ceil(hi),
              title: {display: true, text: "buffer size (MiB)"}},
          y: {beginAtZero: true, title: {display: true, text: "throughput (Mbit/s)"}}
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
