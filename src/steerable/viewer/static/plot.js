/* steerable view: the state/action plot of one episode (a classic script, loaded before app.js).
 * Each dim is drawn on the range the server sends (the dataset's, from meta/stats.json, else the
 * episode's); a dim marked flat (idle: it moves less than 1% of that range, or its range is tiny next to
 * its feature's other dims of the same quantity) is drawn as a level line, dotted, named "(flat)". */
(function () {
  "use strict";
  var H = 120; // viewBox height; the width is 1000

  function y(v, lo, hi) {
    return (H - 4 - (H - 8) * (hi > lo ? (v - lo) / (hi - lo) : 0.5)).toFixed(1);
  }
  function median(col) {
    var xs = col.filter(function (v) { return v !== null; }).sort(function (a, b) { return a - b; });
    return xs.length ? xs[xs.length >> 1] : null;
  }

  function dimLine(s, d, p, dur, h) {
    var col = s.values[d], range = s.range[d] || [null, null], lo = range[0], hi = range[1];
    var flat = s.flat.indexOf(d) >= 0, grip = s.gripper.indexOf(d) >= 0, level = median(col);
    if (lo === null || hi === null) { lo = level; hi = level; }
    var pts = [];
    col.forEach(function (v, i) {
      if (v === null) return;
      pts.push((1000 * p.t[i] / dur).toFixed(1) + "," + y(flat ? level : v, lo, hi));
    });
    var line = h.svg("polyline", {
      points: pts.join(" "), "class": "dim" + (grip ? " gripper" : "") + (flat ? " flat" : ""), "data-dim": s.names[d]
    });
    line.style.stroke = grip ? "" : "hsl(" + Math.round(360 * d / Math.max(1, s.values.length)) + ",60%,45%)";
    var tip = h.svg("title", {});
    tip.textContent = s.names[d] + (grip ? " (gripper)" : "") + (flat ? " (flat)" : "") + ": range " +
      (lo === null ? "-" : lo.toFixed(3) + " .. " + hi.toFixed(3));
    line.appendChild(tip);
    return line;
  }

  function figure(s, p, dur, seek, h) {
    var fig = h.el("figure", "plot-figure");
    fig.appendChild(h.el("figcaption", null, s.key));
    var g = h.svg("svg", { viewBox: "0 0 1000 " + H, preserveAspectRatio: "none", "class": "plot-svg" });
    g.dataset.feature = s.key;
    s.values.forEach(function (col, d) { g.appendChild(dimLine(s, d, p, dur, h)); });
    p.keystates.forEach(function (k) {
      var x = 1000 * k.t / dur;
      var l = h.svg("line", { x1: x, x2: x, y1: 0, y2: H, "class": "keystate " + k.kind });
      var tip = h.svg("title", {});
      tip.textContent = k.kind + (k.source ? " (" + k.source + ")" : "") + " at " + h.fmt(k.t);
      l.appendChild(tip);
      g.appendChild(l);
    });
    g.appendChild(h.svg("line", { x1: 0, x2: 0, y1: 0, y2: H, "class": "plot-playhead" }));
    g.addEventListener("click", function (ev) {
      var r = g.getBoundingClientRect();
      seek(dur * (ev.clientX - r.left) / r.width);
    });
    fig.appendChild(g);
    var legend = h.el("div", "legend");
    s.names.forEach(function (name, d) {
      var grip = s.gripper.indexOf(d) >= 0, flat = s.flat.indexOf(d) >= 0;
      legend.appendChild(h.el("span", "legend-item" + (grip ? " gripper" : "") + (flat ? " flat" : ""),
        name + (grip ? " (gripper)" : "") + (flat ? " (flat)" : "")));
    });
    fig.appendChild(legend);
    return fig;
  }

  /* Draw episode `ep`'s plot into `box`; a click seeks with `seek(t)`; `h` = the app's {el, svg, fmt}. */
  window.steerablePlot = function (box, ep, seek, h) {
    box.textContent = "";
    var p = ep.plot;
    if (!p.series.length || !p.t.length) { box.appendChild(h.el("div", "none", "no state/action features")); return; }
    var dur = Math.max(ep.duration, 1e-6);
    p.series.forEach(function (s) { box.appendChild(figure(s, p, dur, seek, h)); });
    box.appendChild(h.el("div", "legend", "keystates: " + p.keystates.length + " (gripper close/open, pause)" +
      "; each dim on the dataset's range, idle dims flat"));
  };
})();
