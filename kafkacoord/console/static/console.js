// kafkacoord console: confirmations, the refresh guard and the lag chart.
// No inline script anywhere (the CSP forbids it): everything is wired up here.
(function () {
  "use strict";

  // Every write form asks first: its data-confirm text says what will happen.
  document.addEventListener("submit", function (event) {
    var form = event.target;
    var question = form.getAttribute("data-confirm");
    if (question && !window.confirm(question)) {
      event.preventDefault();
    }
  }, true);

  // The live refresh replaces #main; never while someone is filling in a form or a
  // reset plan waits for its confirmation.
  document.addEventListener("htmx:beforeRequest", function (event) {
    var main = document.getElementById("main");
    var active = document.activeElement;
    var editing = main && active && main.contains(active) && active.form;
    if (editing || document.getElementById("reset-plan")) {
      event.preventDefault();
    }
  });

  function drawLag(box) {
    var url = box.getAttribute("data-url");
    var plot = null;
    function load() {
      fetch(url, { headers: { Accept: "application/json" } })
        .then(function (r) { return r.json(); })
        .then(function (series) {
          var data = [series.t, series.lag];
          box.setAttribute("data-points", String(series.t.length));
          box.setAttribute("data-stored", String(series.stored || 0));
          box.setAttribute("data-last-lag", series.lag.length ? String(series.lag[series.lag.length - 1]) : "");
          if (plot === null) {
            plot = new uPlot({
              width: Math.max(320, box.clientWidth - 16), height: 240,
              series: [{}, { label: "lag (records)", stroke: "#2f6fdd", width: 2, fill: "rgba(47,111,221,0.12)" }],
              axes: [{}, { label: "records" }],
              scales: { x: { time: true } },
            }, data, box);
          } else {
            plot.setData(data);
          }
        })
        .catch(function () { /* the next tick tries again */ });
    }
    load();
    setInterval(load, 5000);
  }

  document.addEventListener("DOMContentLoaded", function () {
    var box = document.getElementById("lag-chart");
    if (box && window.uPlot) {
      drawLag(box);
    }
  });
})();
