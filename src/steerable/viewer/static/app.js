/* steerable view: classic scripts (they run from a server and from file://), no dependencies; the
 * plot (plot.js) and the recipe sample (sample.js) load first.
 * Data comes from the JSON API when served, or from window.STEERABLE_EXPORT (script files) when
 * exported. Player time = episode time + the camera's offset inside its video file. */
(function () {
  "use strict";
  var EXPORT = window.STEERABLE_EXPORT || null;
  var SPAN_STYLES = ["subtask", "plan", "memory", "motion"];
  var VQA_HOLD_S = 1.0; // a VQA answer stays drawn this long after its frame
  var RECENT_S = 2.0;
  // Chromium truncates a seek target to whole microseconds while frame times round: a seek to exactly
  // a frame's time can land a hair before it and show the previous frame. Aim 1 ms into the frame.
  var SEEK_INTO_FRAME_S = 0.001;
  var SVGNS = "http://www.w3.org/2000/svg";
  var $ = function (id) { return document.getElementById(id); };
  // `steerable view --edit` prints the page's URL with its session token in the fragment (never sent to
  // the server); writes carry it in a header. It stays in the fragment, so a reload keeps it.
  var TOKEN = (/(?:^#|&)token=([^&]+)/.exec(location.hash) || [])[1] || null;
  var video = $("video");
  var S = { dataset: null, ep: null, camera: null, zoom: 1, recipe: null, frame: -1, renderSeq: 0, order: null };
  // The editor (edit.js, `steerable view --edit`) plugs in here: item(node, track, item), lane(node, track),
  // shape(g, shape, vqa), episode(ep) after an episode opens, leave() -> false to stay on unsaved edits.
  var H = {};

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = text;
    return e;
  }
  function svg(tag, attrs) {
    var e = document.createElementNS(SVGNS, tag);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    return e;
  }
  function fmt(t) { return (Math.round(t * 100) / 100).toFixed(2) + " s"; }
  // Who wrote a style in this episode (the provenance file); a heuristic's rows get a badge saying so.
  function heuristicOf(style) {
    var ep = S.ep || {};
    return (ep.heuristic || []).indexOf(style) >= 0 ? (ep.producers || {})[style] : null;
  }
  function badge(producer) {
    var b = el("span", "heuristic", "heuristic");
    b.title = "written by " + producer + ": rules, not a model";
    return b;
  }
  function status(text) { $("status").textContent = text || ""; }

  // -- data access: API or exported scripts --------------------------------------------------------
  function getJSON(url) {
    return fetch(url).then(function (r) {
      return r.json().then(function (body) {
        if (!r.ok) throw new Error(body.error || r.statusText);
        return body;
      });
    });
  }
  function loadScript(src) {
    return new Promise(function (resolve, reject) {
      var s = document.createElement("script");
      s.src = src;
      s.onload = resolve;
      s.onerror = function () { reject(new Error("cannot load " + src)); };
      document.body.appendChild(s);
    });
  }
  function pad6(n) { return ("000000" + n).slice(-6); }
  var api = {
    dataset: function () { return EXPORT ? Promise.resolve(EXPORT.dataset) : getJSON("api/dataset"); },
    episode: function (n) {
      if (!EXPORT) return getJSON("api/episodes/" + n);
      if (EXPORT.episodes[n]) return Promise.resolve(EXPORT.episodes[n]);
      return loadScript("data/episode_" + pad6(n) + ".js").then(function () { return EXPORT.episodes[n]; });
    },
    render: function (recipe, ep, frame) {
      if (!EXPORT) {
        return getJSON("api/render?recipe=" + encodeURIComponent(recipe) + "&episode=" + ep.episode_index + "&frame=" + frame);
      }
      var r = (ep.renders || {})[recipe];
      if (!r) return Promise.resolve({ error: "not rendered in this export" });
      if (r.error) return Promise.resolve(r);
      return Promise.resolve(r.samples[r.frames[Math.min(frame, r.frames.length - 1)]]);
    }
  };

  // -- episode list --------------------------------------------------------------------------------
  function orderedEpisodes() {
    var eps = S.dataset.episodes.slice();
    if ($("episode-sort").value === "uncertain" && S.order) {
      var rank = {};
      S.order.forEach(function (u, i) { rank[u.episode_index] = i; });
      eps.sort(function (a, b) { return (rank[a.episode_index] || 0) - (rank[b.episode_index] || 0); });
    }
    return eps;
  }
  function renderList() {
    var list = $("episode-list");
    list.textContent = "";
    var q = $("filter").value.trim().toLowerCase();
    var want = $("status-filter").value;
    var scores = {};
    (S.order || []).forEach(function (u) { scores[u.episode_index] = u; });
    var shown = 0;
    orderedEpisodes().forEach(function (e) {
      var hay = ("episode " + e.episode_index + " " + e.task + " " + Object.keys(e.counts).join(" ") + " " + (e.status || "")).toLowerCase();
      if (q && hay.indexOf(q) < 0) return;
      if (want && (e.status || "unreviewed") !== want) return;
      shown += 1;
      var li = el("li", "episode" + (S.ep && S.ep.episode_index === e.episode_index ? " current" : ""));
      li.dataset.episode = e.episode_index;
      li.dataset.status = e.status || "unreviewed";
      var head = el("div", "ep-head", "#" + e.episode_index + "  " + e.length + " frames, " + fmt(e.duration));
      if (e.status && e.status !== "unreviewed") head.appendChild(el("span", "ep-status " + e.status.replace(" ", "-"), e.status));
      if (e.human) head.appendChild(el("span", "ep-human", "edited"));
      var u = scores[e.episode_index];
      if (u) {
        var b = el("span", "ep-score", u.score.toFixed(2));
        b.title = u.reasons.length ? u.reasons.join("\n") : "nothing disagrees";
        head.appendChild(b);
      }
      li.appendChild(head);
      li.appendChild(el("div", "ep-task", e.task));
      var counts = el("div", "ep-counts");
      Object.keys(e.counts).forEach(function (k) { counts.appendChild(el("span", "count " + k, k + " " + e.counts[k])); });
      li.appendChild(counts);
      li.addEventListener("click", function () { if (!H.leave || H.leave()) openEpisode(e.episode_index); });
      list.appendChild(li);
    });
    $("episode-count").textContent = shown + " of " + S.dataset.episodes.length + " episodes";
  }

  // -- video and cameras ---------------------------------------------------------------------------
  function cam() { return S.ep.cameras.filter(function (c) { return c.key === S.camera; })[0]; }
  function epTime() {
    var c = cam();
    return Math.max(0, Math.min(S.ep.duration, video.currentTime - (c ? c.offset : 0)));
  }
  function seek(t) {
    var c = cam();
    t = Math.max(0, Math.min(t, Math.max(0, S.ep.duration - 0.5 / S.ep.fps)));
    if (c && c.url) video.currentTime = c.offset + t + SEEK_INTO_FRAME_S;
    update(t);
  }
  function setCamera(key, keepTime) {
    var t = keepTime === undefined ? 0 : keepTime;
    S.camera = key;
    Array.prototype.forEach.call(document.querySelectorAll(".camera-btn"), function (b) {
      b.classList.toggle("active", b.dataset.camera === key);
    });
    var c = cam();
    $("video-note").textContent = c && c.error ? c.error : "";
    if (!c || !c.url) { video.removeAttribute("src"); video.load(); update(t); return; }
    video.dataset.camera = key;
    video.src = c.url;
    video.addEventListener("loadedmetadata", function once() {
      video.removeEventListener("loadedmetadata", once);
      $("overlay").setAttribute("viewBox", "0 0 " + video.videoWidth + " " + video.videoHeight);
      seek(t);
      document.body.dataset.ready = "1";
    });
  }
  function renderCameras() {
    var box = $("camera-switch");
    box.textContent = "";
    S.ep.cameras.forEach(function (c) {
      var b = el("button", "camera-btn", c.key.replace(/^observation\.images\./, ""));
      b.type = "button";
      b.dataset.camera = c.key;
      b.title = c.key;
      b.addEventListener("click", function () { setCamera(c.key, epTime()); });
      box.appendChild(b);
    });
  }

  // -- timeline ------------------------------------------------------------------------------------
  function pct(t) { return (100 * t / Math.max(S.ep.duration, 1e-6)) + "%"; }
  function renderTracks() {
    var labels = $("track-labels"), lanes = $("lanes");
    labels.textContent = "";
    Array.prototype.slice.call(lanes.querySelectorAll(".lane")).forEach(function (n) { n.remove(); });
    S.ep.tracks.forEach(function (track) {
      var label = el("div", "track-label " + track.style, track.style + " (" + track.items.length + ")");
      label.dataset.style = track.style;
      if (track.heuristic) label.appendChild(badge(track.producer));
      labels.appendChild(label);
      var lane = el("div", "lane lane-" + track.kind);
      lane.dataset.style = track.style;
      var sameTime = {}; // markers at one time (e.g. one VQA per camera) sit side by side
      track.items.forEach(function (item) {
        var node;
        if (track.kind === "span") {
          node = el("div", "span " + track.style, item.text);
          node.style.left = pct(item.start);
          node.style.width = pct(item.end - item.start);
          node.dataset.start = item.start;
          node.dataset.t = item.start;
        } else {
          node = el("div", "marker " + track.style);
          node.style.left = pct(item.t);
          var k = sameTime[item.t] = (sameTime[item.t] || 0) + 1;
          if (k > 1) node.style.marginLeft = (-4 + 10 * (k - 1)) + "px";
          node.dataset.t = item.t;
          if (item.camera) node.dataset.camera = item.camera;
        }
        node.dataset.style = track.style;
        node.title = (track.kind === "span" ? fmt(item.start) + "-" + fmt(item.end) : fmt(item.t)) + "  " + item.text;
        node.addEventListener("click", function (ev) {
          ev.stopPropagation();
          if (item.camera && item.camera !== S.camera) setCamera(item.camera, +node.dataset.t);
          else seek(+node.dataset.t);
        });
        if (H.item) H.item(node, track, item);
        lane.appendChild(node);
      });
      if (H.lane) H.lane(lane, track);
      lane.addEventListener("click", function (ev) {
        var r = lane.getBoundingClientRect();
        seek(S.ep.duration * (ev.clientX - r.left) / r.width);
      });
      lanes.appendChild(lane);
    });
    applyZoom();
  }
  function applyZoom() {
    $("lanes").style.width = (100 * S.zoom) + "%";
    $("zoom-level").textContent = S.zoom + "x";
  }

  // -- the current frame: rows, events, overlay, plot, recipe --------------------------------------
  function frameAt(t) { return Math.max(0, Math.min(S.ep.length - 1, Math.floor(t * S.ep.fps + 1e-3))); }
  function speech(row) {
    var calls = row.tool_calls || [];
    for (var i = 0; i < calls.length; i++) {
      var f = calls[i] && calls[i]["function"];
      if (f && f.name === "say") {
        var a = f.arguments;
        if (typeof a === "string") { try { a = JSON.parse(a); } catch (e) { return a; } }
        return a && a.text !== undefined ? String(a.text) : "";
      }
    }
    return null;
  }
  function rowNode(row, t) {
    var said = speech(row);
    var node;
    if (said !== null) {
      node = el("div", "row say", "says: \u201c" + said + "\u201d");
    } else {
      var style = row.style || "tool";
      node = el("div", "row " + style);
      node.appendChild(el("span", "tag " + style, style + (row.camera ? " @" + row.camera.replace(/^observation\.images\./, "") : "")));
      if (heuristicOf(style)) node.appendChild(badge(heuristicOf(style)));
      node.appendChild(el("span", "role", row.role + ": "));
      node.appendChild(el("span", "content", row.content || ""));
    }
    if (t !== undefined) node.appendChild(el("span", "when", " " + fmt(t)));
    return node;
  }
  function update(t) {
    if (!S.ep) return;
    if (t === undefined) t = epTime();
    var f = frameAt(t);
    $("clock").textContent = fmt(t) + " / " + fmt(S.ep.duration) + "  frame " + f;
    $("playhead").style.left = pct(t);
    if (S.zoom > 1) { // keep the playhead in view when zoomed in
      var sc = $("lanes-scroll"), x = sc.scrollWidth * t / Math.max(S.ep.duration, 1e-6);
      if (x < sc.scrollLeft || x > sc.scrollLeft + sc.clientWidth) sc.scrollLeft = Math.max(0, x - sc.clientWidth / 4);
    }
    var ph = document.querySelectorAll(".plot-playhead");
    var x = 1000 * t / Math.max(S.ep.duration, 1e-6);
    Array.prototype.forEach.call(ph, function (l) { l.setAttribute("x1", x); l.setAttribute("x2", x); });
    drawOverlay(t);
    if (f !== S.frame) {
      S.frame = f;
      drawNow(t, f);
      if (video.paused) renderRecipe();
    }
  }
  function drawNow(t, f) {
    var active = {};
    S.ep.persistent.forEach(function (r) {
      if ((r.timestamp || 0) <= t + 1e-4 && r.style !== "task_aug") active[r.style] = r;
    });
    var dl = $("active");
    dl.textContent = "";
    SPAN_STYLES.concat(Object.keys(active).filter(function (s) { return SPAN_STYLES.indexOf(s) < 0; })).forEach(function (s) {
      if (!active[s]) return;
      var dt = el("dt", "tag " + s, s);
      if (heuristicOf(s)) dt.appendChild(badge(heuristicOf(s)));
      dl.appendChild(dt);
      var dd = el("dd", "active-row " + s, active[s].content || "");
      dd.dataset.style = s;
      dl.appendChild(dd);
    });
    var here = $("events"), recent = $("recent");
    here.textContent = "";
    recent.textContent = "";
    S.ep.events.forEach(function (e) {
      if (e.frame === f) e.rows.forEach(function (r) { here.appendChild(rowNode(r)); });
      else if (e.t < t && e.t >= t - RECENT_S) e.rows.forEach(function (r) { recent.appendChild(rowNode(r, e.t)); });
    });
    if (!here.childNodes.length) here.appendChild(el("div", "none", "none"));
  }
  function drawOverlay(t) {
    var o = $("overlay");
    var half = 0.5 / S.ep.fps;
    var shown = S.ep.vqa.filter(function (v) { return v.camera === S.camera && t >= v.t - half && t < v.t + VQA_HOLD_S; });
    // Redrawn only when what it shows changes: a shape being dragged in the editor stays the same node.
    var key = (S.gen || 0) + JSON.stringify(shown); // S.gen: bumped by the editor on every change of its model
    if (o.dataset.key === key && o.dataset.ep === String(S.ep.episode_index)) return;
    o.dataset.key = key;
    o.dataset.ep = S.ep.episode_index;
    o.textContent = "";
    shown.forEach(function (v) {
      (v.shapes || []).forEach(function (s) {
        var g = svg("g", { "class": "vqa-shape" });
        var lx, ly;
        if (s.type === "box") {
          var b = s.bbox;
          g.appendChild(svg("rect", { "class": "vqa-box", x: b[0], y: b[1], width: b[2] - b[0], height: b[3] - b[1] }));
          lx = b[0]; ly = b[1] - 2;
        } else {
          g.appendChild(svg("circle", { "class": "vqa-point", cx: s.point[0], cy: s.point[1], r: 3 }));
          lx = s.point[0] + 4; ly = s.point[1] - 4;
        }
        var label = svg("text", { "class": "vqa-label", x: lx, y: Math.max(8, ly) });
        label.textContent = s.label;
        g.appendChild(label);
        if (H.shape) H.shape(g, s, v);
        o.appendChild(g);
      });
    });
  }

  function renderPlot() { window.steerablePlot($("plot"), S.ep, seek, { el: el, svg: svg, fmt: fmt }); }

  function renderRecipes() {
    var sel = $("recipe");
    sel.textContent = "";
    S.dataset.recipes.forEach(function (r) {
      var o = el("option", null, r.name + (r.error ? " (unavailable)" : ""));
      o.value = r.name;
      o.disabled = !!r.error;
      o.title = r.error || "";
      sel.appendChild(o);
    });
    var first = S.dataset.recipes.filter(function (r) { return !r.error; })[0];
    var pick = S.dataset.recipes.filter(function (r) { return r.name === "subtask_mem" && !r.error; })[0] || first;
    if (pick) { sel.value = pick.name; S.recipe = pick.name; }
    sel.addEventListener("change", function () { S.recipe = sel.value; renderRecipe(); });
  }
  function renderRecipe() {
    if (!S.ep || !S.recipe) return;
    var seq = ++S.renderSeq, f = S.frame < 0 ? 0 : S.frame, ep = S.ep;
    $("recipe-where").textContent = "episode " + ep.episode_index + ", frame " + f;
    api.render(S.recipe, ep, f).then(function (r) {
      if (seq === S.renderSeq) window.steerableSample($("recipe-sample"), r, { el: el, speech: speech });
    }).catch(function (e) { $("recipe-sample").textContent = String(e.message || e); });
  }

  // -- episodes ------------------------------------------------------------------------------------
  function openEpisode(n) {
    status("loading episode " + n + "...");
    document.body.dataset.ready = "";
    return api.episode(n).then(function (ep) {
      var t0 = S.ep && S.ep.episode_index === n ? epTime() : 0;
      var keepCam = S.camera;
      S.ep = ep;
      S.frame = -1;
      $("episode-title").textContent = "episode " + ep.episode_index + ": " + ep.task;
      history.replaceState(null, "", "#" + (TOKEN ? "token=" + TOKEN + "&" : "") + "episode=" + n);
      renderList();
      renderCameras();
      renderTracks();
      renderPlot();
      if (H.episode) H.episode(ep);
      var have = ep.cameras.filter(function (c) { return c.url; });
      var key = ep.cameras.some(function (c) { return c.key === keepCam && c.url; }) ? keepCam : (have[0] || ep.cameras[0] || {}).key;
      setCamera(key, t0);
      if (!have.length) document.body.dataset.ready = "1";
      status("");
    }).catch(function (e) { status(String(e.message || e)); });
  }

  function togglePlay() {
    if (!S.ep) return;
    if (video.paused) {
      if (epTime() >= S.ep.duration - 1.0 / S.ep.fps) seek(0);
      video.play();
    } else video.pause();
  }
  function step(n) {
    if (!S.ep) return;
    video.pause();
    var f = Math.max(0, Math.min(S.ep.length - 1, S.frame + n));
    seek((S.ep.stamps ? S.ep.stamps[f] : f / S.ep.fps));
  }
  function typing(ev) {
    var t = ev.target;
    return t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA" || t.tagName === "SELECT" || t.isContentEditable);
  }
  function onKey(ev) {
    if (typing(ev) || ev.altKey) return;
    if (H.key && H.key(ev)) { ev.preventDefault(); return; }
    if (ev.ctrlKey || ev.metaKey) return;
    if (ev.key === " ") togglePlay();
    else if (ev.key === "ArrowLeft") step(ev.shiftKey ? -10 : -1);
    else if (ev.key === "ArrowRight") step(ev.shiftKey ? 10 : 1);
    else return;
    ev.preventDefault();
  }

  function tick() {
    update();
    if (!video.paused) requestAnimationFrame(tick);
  }
  function wire() {
    $("filter").addEventListener("input", renderList);
    $("episode-sort").addEventListener("change", renderList);
    $("status-filter").addEventListener("change", renderList);
    document.addEventListener("keydown", onKey);
    $("zoom-in").addEventListener("click", function () { S.zoom = Math.min(64, S.zoom * 2); applyZoom(); });
    $("zoom-out").addEventListener("click", function () { S.zoom = Math.max(1, S.zoom / 2); applyZoom(); });
    $("lanes-scroll").addEventListener("wheel", function (ev) {
      if (!ev.ctrlKey) return;
      ev.preventDefault();
      S.zoom = ev.deltaY < 0 ? Math.min(64, S.zoom * 2) : Math.max(1, S.zoom / 2);
      applyZoom();
    }, { passive: false });
    $("play").addEventListener("click", togglePlay);
    $("prev-frame").addEventListener("click", function () { step(-1); });
    $("next-frame").addEventListener("click", function () { step(1); });
    video.addEventListener("play", function () { $("play").textContent = "pause"; requestAnimationFrame(tick); });
    video.addEventListener("pause", function () { $("play").textContent = "play"; renderRecipe(); });
    video.addEventListener("seeked", function () { update(); });
    video.addEventListener("timeupdate", function () {
      var c = S.ep && cam();
      if (c && video.currentTime - c.offset >= S.ep.duration) { video.pause(); seek(S.ep.duration); }
      update();
    });
  }

  function loadOrder() {
    if (EXPORT) return Promise.resolve(null);
    return getJSON("api/uncertainty").then(function (order) { S.order = order; renderList(); return order; })
      .catch(function (e) { status("review order: " + String(e.message || e)); });
  }
  function reloadDataset() {
    return api.dataset().then(function (d) { S.dataset = d; renderList(); loadOrder(); return d; });
  }

  window.steerableView = {
    seek: seek, state: S, openEpisode: openEpisode, setCamera: function (k) { setCamera(k, epTime()); },
    hooks: H, token: TOKEN, renderTracks: renderTracks, renderList: renderList, update: update, epTime: epTime, frameAt: frameAt,
    drawOverlay: function () { drawOverlay(epTime()); }, redrawNow: function () { var t = epTime(); drawNow(t, frameAt(t)); drawOverlay(t); },
    status: status, reloadDataset: reloadDataset, loadOrder: loadOrder, speech: speech, video: video,
    h: { el: el, svg: svg, fmt: fmt, $: $ }
  };
  wire();
  api.dataset().then(function (d) {
    S.dataset = d;
    $("dataset-name").textContent = d.name + " (" + d.episodes.length + " episodes, " + d.fps + " fps)";
    document.title = "steerable view: " + d.name;
    renderRecipes();
    renderList();
    loadOrder();
    if (d.edit && window.steerableEditor) window.steerableEditor();
    var m = /episode=(\d+)/.exec(location.hash);
    var want = m ? +m[1] : null;
    var first = d.episodes.filter(function (e) { return e.episode_index === want; })[0] || d.episodes[0];
    if (first) openEpisode(first.episode_index);
    else status("the dataset has no episodes");
  }).catch(function (e) { status(String(e.message || e)); });
})();
