/* steerable view --edit: correct an episode's annotations on the timeline and over the frame, then save
 * it as a revision. A classic script loaded before app.js; it does nothing unless the server says the
 * session edits (api/dataset "edit": true), so the static export stays read-only.
 *
 * The page keeps the episode's rows as the model (persistent rows, and events as {t, row}); every edit
 * changes the model, records an undo step and redraws the timeline, the overlay and the active rows from
 * it. Times always land on a frame's stored timestamp (S.ep.stamps), which the validator requires. A save
 * sends the whole model, the review status and how many operations of each kind the person made (the
 * edit cost `steerable eval --gold` reports); the server answers with the saved episode, or with every
 * problem the validator found (nothing is written then). */
(function () {
  "use strict";
  var SPAN_STYLES = ["subtask", "plan", "memory", "motion"];
  var MARKER_STYLES = ["interjection", "speech", "vqa", "task_aug"];
  var EDGE_SNAP_PX = 8; // a dragged edge within this many pixels of a keystate lands on it (snap on)
  var KEYS = [
    ["space", "play / pause"], ["\u2190 \u2192", "previous / next frame (shift: 10)"],
    ["\u2191 \u2193", "select the track above / below"], ["click", "select a span or marker (drag its edges / it)"],
    ["S", "split the selected track's span at the playhead"], ["M", "merge the selected span with the next"],
    ["Del", "delete the selected span or event (an interjection with its say)"],
    ["E / Enter", "retype the selection"], ["A", "add a row of the selected track at the playhead"],
    ["[ ]", "move the selected span's start / end to the playhead"], ["K", "snap edges to keystates"],
    ["Ctrl+Z / Ctrl+Shift+Z", "undo / redo"], ["Ctrl+S", "save (a new revision)"],
    ["R / W / U", "status: reviewed / needs work / unreviewed"], ["Esc", "clear the selection"]
  ];

  window.steerableEditor = function () {
    var V = window.steerableView, S = V.state, H = V.hooks, h = V.h, $ = h.$, el = h.el;
    var E = {
      model: null, undo: [], redo: [], ops: {}, sel: null, track: "subtask", dirty: false, snapKeys: false,
      status: "unreviewed", saving: false, timings: [], paints: []
    };
    window.steerableEdit = E;
    document.body.classList.add("editing");
    buildPanel();

    // -- the model and what is drawn from it ---------------------------------------------------------
    function copy(x) { return JSON.parse(JSON.stringify(x)); }
    function snapshot() { return JSON.stringify({ persistent: E.model.persistent, events: E.model.events, status: E.status }); }
    function restore(text) { var m = JSON.parse(text); E.model = { persistent: m.persistent, events: m.events }; E.status = m.status; }
    function frameOf(t) {
      var st = S.ep.stamps, lo = 0, hi = st.length - 1;
      if (!st.length) return 0;
      while (lo < hi) { var mid = (lo + hi) >> 1; if (st[mid] < t) lo = mid + 1; else hi = mid; }
      if (lo > 0 && Math.abs(st[lo - 1] - t) <= Math.abs(st[lo] - t)) lo -= 1;
      return lo;
    }
    function frameT(f) { var st = S.ep.stamps; return st[Math.max(0, Math.min(st.length - 1, f))]; }
    function playheadT() { return frameT(S.frame < 0 ? 0 : S.frame); }
    function kind(row) {
      if (row.style) return row.style;
      return V.speech(row) !== null ? "speech" : "tool";
    }
    function grouped() {
      var by = {};
      E.model.events.forEach(function (e) {
        var f = frameOf(e.t);
        (by[f] = by[f] || { t: frameT(f), frame: f, rows: [] }).rows.push(e.row);
      });
      return Object.keys(by).map(Number).sort(function (a, b) { return a - b; }).map(function (f) { return by[f]; });
    }
    function producer(style) { return ((S.ep && S.ep.producers) || {})[style] || null; }
    // Rows that move and go together: an interjection with the say rows of its frame, a VQA question
    // with its answer on the same camera.
    function partners(j) {
      var ev = E.model.events, e = ev[j], k = kind(e.row), out = [];
      ev.forEach(function (o, i) {
        if (Math.abs(o.t - e.t) > 1e-6) return;
        var ok = kind(o.row);
        if (i === j) out.push(i);
        else if ((k === "interjection" || k === "speech") && (ok === "interjection" || ok === "speech")) out.push(i);
        else if (k === "vqa" && ok === "vqa" && o.row.camera === e.row.camera) out.push(i);
      });
      return out;
    }
    function buildTracks() {
      var P = E.model.persistent, out = [];
      SPAN_STYLES.forEach(function (style) {
        var idx = [];
        P.forEach(function (r, i) { if (r.style === style) idx.push(i); });
        idx.sort(function (a, b) { return P[a].timestamp - P[b].timestamp || a - b; });
        out.push({ style: style, kind: "span", items: idx.map(function (i, k) {
          var start = P[i].timestamp, end = k + 1 < idx.length ? P[idx[k + 1]].timestamp : S.ep.duration;
          return { start: start, end: Math.max(start, end), text: P[i].content || "", ref: i,
                   prev: k > 0 ? idx[k - 1] : null, next: k + 1 < idx.length ? idx[k + 1] : null };
        }) });
      });
      var markers = {};
      MARKER_STYLES.forEach(function (s) { markers[s] = []; });
      P.forEach(function (r, i) {
        if (r.style === "task_aug") markers.task_aug.push({ t: r.timestamp, text: r.content || "", ref: i, persistent: true });
      });
      var seen = {};
      E.model.events.forEach(function (e, j) {
        var k = kind(e.row);
        if (k === "vqa" && e.row.role !== "user") return; // one marker per exchange, labelled with its question
        var item = { t: frameT(frameOf(e.t)), text: (k === "speech" ? V.speech(e.row) : e.row.content) || "", camera: e.row.camera,
                     ref: j, refs: partners(j) };
        (markers[k] = markers[k] || []).push(item);
        seen[j] = true;
      });
      Object.keys(markers).forEach(function (s) {
        markers[s].sort(function (a, b) { return a.t - b.t || a.ref - b.ref; });
        out.push({ style: s, kind: "marker", items: markers[s] });
      });
      out.forEach(function (t) {
        t.producer = producer(t.style);
        t.heuristic = ((S.ep && S.ep.heuristic) || []).indexOf(t.style) >= 0;
      });
      return out;
    }
    function parse(text) { try { return JSON.parse(text); } catch (e) { return null; } }
    function buildVqa() {
      var ev = E.model.events, out = [];
      ev.forEach(function (e, j) {
        if (e.row.style !== "vqa" || e.row.role === "user") return;
        var answer = typeof e.row.content === "string" ? parse(e.row.content) : e.row.content, shapes = [];
        if (answer && typeof answer === "object") {
          if (Array.isArray(answer.point) && answer.point.length === 2) {
            shapes.push({ type: "point", point: answer.point, label: String(answer.label || "") });
          }
          (answer.detections || []).forEach(function (d, i) {
            if (d && Array.isArray(d.bbox) && d.bbox.length === 4) shapes.push({ type: "box", bbox: d.bbox, label: String(d.label || ""), det: i });
          });
        }
        var q = ev.filter(function (o) { return o.row.style === "vqa" && o.row.role === "user" && o.row.camera === e.row.camera && Math.abs(o.t - e.t) < 1e-6; })[0];
        out.push({ t: frameT(frameOf(e.t)), frame: frameOf(e.t), camera: e.row.camera, question: q ? q.row.content : "",
                   answer: answer, shapes: shapes, ref: j });
      });
      return out;
    }
    function apply() {
      S.gen = (S.gen || 0) + 1;
      S.ep.persistent = E.model.persistent;
      S.ep.events = grouped();
      S.ep.tracks = buildTracks();
      S.ep.vqa = buildVqa();
      V.renderTracks();
      V.redrawNow();
      renderPanel();
    }

    // -- undo, redo and the operations counted ------------------------------------------------------
    function commit(op, before) {
      E.undo.push({ state: before, op: op });
      E.redo = [];
      E.ops[op] = (E.ops[op] || 0) + 1;
      E.dirty = true;
      apply();
    }
    function undo() {
      var u = E.undo.pop();
      if (!u) return;
      E.redo.push({ state: snapshot(), op: u.op });
      restore(u.state);
      E.ops[u.op] = Math.max(0, (E.ops[u.op] || 0) - 1);
      E.dirty = E.undo.length > 0;
      E.sel = null;
      apply();
    }
    function redo() {
      var r = E.redo.pop();
      if (!r) return;
      E.undo.push({ state: snapshot(), op: r.op });
      restore(r.state);
      E.ops[r.op] = (E.ops[r.op] || 0) + 1;
      E.dirty = true;
      E.sel = null;
      apply();
    }

    // -- selection ----------------------------------------------------------------------------------
    function select(sel) {
      E.sel = sel;
      if (sel) E.track = sel.style;
      markSelection();
      renderPanel();
    }
    function markSelection() {
      Array.prototype.forEach.call(document.querySelectorAll("#lanes .selected, #track-labels .selected"), function (n) { n.classList.remove("selected"); });
      Array.prototype.forEach.call(document.querySelectorAll("#track-labels .track-label"), function (n) {
        if (n.dataset.style === E.track) n.classList.add("selected");
      });
      if (!E.sel) return;
      var node = document.querySelector("#lanes .lane[data-style='" + E.sel.style + "'] [data-ref='" + E.sel.ref + "']");
      if (node) node.classList.add("selected");
    }
    function selectedItem() {
      if (!E.sel) return null;
      var track = S.ep.tracks.filter(function (t) { return t.style === E.sel.style; })[0];
      return track ? track.items.filter(function (i) { return i.ref === E.sel.ref; })[0] || null : null;
    }
    function trackOf(style) { return S.ep.tracks.filter(function (t) { return t.style === style; })[0]; }

    // -- dragging on the timeline -------------------------------------------------------------------
    function drag(ev, lane, onMove, onEnd) {
      ev.preventDefault();
      ev.stopPropagation();
      var rect = lane.getBoundingClientRect(), moved = false, x0 = ev.clientX;
      function tAt(x) { return S.ep.duration * (x - rect.left) / rect.width; }
      function move(e) { if (Math.abs(e.clientX - x0) > 2) moved = true; if (moved) onMove(tAt(e.clientX), rect); }
      function up(e) {
        document.removeEventListener("mousemove", move);
        document.removeEventListener("mouseup", up);
        onEnd(moved, tAt(e.clientX), rect);
      }
      document.addEventListener("mousemove", move);
      document.addEventListener("mouseup", up);
    }
    function snapped(t, lo, hi, rect) {
      if (E.snapKeys && S.ep.plot && S.ep.plot.keystates) {
        var near = null, best = EDGE_SNAP_PX * S.ep.duration / rect.width;
        S.ep.plot.keystates.forEach(function (k) { if (Math.abs(k.t - t) <= best) { best = Math.abs(k.t - t); near = k.t; } });
        if (near !== null) t = near;
      }
      var f = Math.max(lo, Math.min(hi, frameOf(t)));
      return frameT(f);
    }
    function moveBoundary(rowIndex, lo, hi, ev, lane) {
      var before = snapshot(), row = E.model.persistent[rowIndex], start = row.timestamp;
      drag(ev, lane, function (t, rect) {
        row.timestamp = snapped(t, lo, hi, rect);
        apply();
      }, function (moved) {
        if (moved && row.timestamp !== start) commit("move", before);
      });
    }
    function spanBounds(item) {
      // a span's start stays after the previous span's start and before its own end, a frame apart
      var P = E.model.persistent;
      return {
        startLo: item.prev !== null ? frameOf(P[item.prev].timestamp) + 1 : 0,
        startHi: item.next !== null ? frameOf(P[item.next].timestamp) - 1 : S.ep.stamps.length - 1,
        endLo: frameOf(item.start) + 1,
        endHi: item.next !== null ? nextEndFrame(item.next) - 1 : S.ep.stamps.length - 1
      };
    }
    function nextEndFrame(ref) {
      var track = trackOf(E.model.persistent[ref].style);
      var it = track.items.filter(function (i) { return i.ref === ref; })[0];
      return it && it.next !== null ? frameOf(E.model.persistent[it.next].timestamp) : S.ep.stamps.length;
    }

    H.item = function (node, track, item) {
      node.dataset.ref = item.ref;
      var lane = null;
      function laneOf() { return lane || (lane = node.parentNode); }
      if (track.kind === "span") {
        var a = el("div", "edge edge-start"), b = el("div", "edge edge-end");
        a.title = "drag: move this span's start";
        b.title = "drag: move this span's end (the next span's start)";
        node.appendChild(a);
        if (item.next !== null) node.appendChild(b);
        a.addEventListener("mousedown", function (ev) {
          select({ style: track.style, ref: item.ref, kind: "span" });
          var bnd = spanBounds(item);
          moveBoundary(item.ref, bnd.startLo, bnd.startHi, ev, laneOf());
        });
        b.addEventListener("mousedown", function (ev) {
          select({ style: track.style, ref: item.ref, kind: "span" });
          var bnd = spanBounds(item);
          moveBoundary(item.next, bnd.endLo, bnd.endHi, ev, laneOf());
        });
        node.addEventListener("mousedown", function () { select({ style: track.style, ref: item.ref, kind: "span" }); });
      } else {
        node.addEventListener("mousedown", function (ev) {
          select({ style: track.style, ref: item.ref, kind: "marker" });
          if (item.persistent) return; // task rephrasings sit at t=0
          var before = snapshot(), refs = item.refs.slice(), t0 = E.model.events[item.ref].t;
          drag(ev, laneOf(), function (t, rect) {
            var nt = snapped(t, 0, S.ep.stamps.length - 1, rect);
            refs.forEach(function (j) { E.model.events[j].t = nt; });
            apply();
          }, function (moved) {
            if (moved && E.model.events[item.ref].t !== t0) { commit("move_event", before); V.seek(E.model.events[item.ref].t); }
          });
        });
      }
    };
    H.lane = function (lane, track) {
      lane.addEventListener("mousedown", function () { E.track = track.style; markSelection(); renderPanel(); });
      markSelection();
    };

    // -- VQA boxes and points over the frame --------------------------------------------------------
    H.shape = function (g, s, v) {
      g.classList.add("editable");
      var overlay = $("overlay");
      function point(ev) {
        var p = overlay.createSVGPoint();
        p.x = ev.clientX; p.y = ev.clientY;
        return p.matrixTransform(overlay.getScreenCTM().inverse());
      }
      function store(fn) {
        var before = snapshot(), row = E.model.events[v.ref].row, ans = parse(row.content) || {};
        fn(ans);
        row.content = JSON.stringify(ans);
        commit("box", before);
      }
      function track(ev, onMove, onEnd) {
        ev.preventDefault();
        ev.stopPropagation();
        var p0 = point(ev);
        function move(e) { var p = point(e); onMove(p.x - p0.x, p.y - p0.y); }
        function up(e) {
          document.removeEventListener("mousemove", move);
          document.removeEventListener("mouseup", up);
          var p = point(e);
          onEnd(p.x - p0.x, p.y - p0.y);
        }
        document.addEventListener("mousemove", move);
        document.addEventListener("mouseup", up);
      }
      if (s.type === "box") {
        var rect = g.querySelector("rect.vqa-box"), b = s.bbox.slice();
        var draw = function (box) {
          rect.setAttribute("x", box[0]); rect.setAttribute("y", box[1]);
          rect.setAttribute("width", box[2] - box[0]); rect.setAttribute("height", box[3] - box[1]);
        };
        var moved = function (dx, dy, corner) {
          var nb = b.slice();
          if (corner === null) { nb[0] += dx; nb[2] += dx; nb[1] += dy; nb[3] += dy; }
          else { if (corner & 1) nb[2] += dx; else nb[0] += dx; if (corner & 2) nb[3] += dy; else nb[1] += dy; }
          return [Math.min(nb[0], nb[2]), Math.min(nb[1], nb[3]), Math.max(nb[0], nb[2]), Math.max(nb[1], nb[3])].map(Math.round);
        };
        var finish = function (nb) {
          if (nb.join() === b.join()) return;
          store(function (ans) { if (ans.detections && ans.detections[s.det]) ans.detections[s.det].bbox = nb; });
        };
        rect.addEventListener("mousedown", function (ev) {
          track(ev, function (dx, dy) { draw(moved(dx, dy, null)); }, function (dx, dy) { finish(moved(dx, dy, null)); });
        });
        [0, 1, 2, 3].forEach(function (c) {
          var hx = c & 1 ? b[2] : b[0], hy = c & 2 ? b[3] : b[1];
          var handle = h.svg("rect", { "class": "vqa-handle", x: hx - 3, y: hy - 3, width: 6, height: 6, "data-corner": c });
          handle.addEventListener("mousedown", function (ev) {
            track(ev, function (dx, dy) { draw(moved(dx, dy, c)); }, function (dx, dy) { finish(moved(dx, dy, c)); });
          });
          g.appendChild(handle);
        });
      } else {
        var dot = g.querySelector("circle.vqa-point"), p0 = s.point.slice();
        dot.addEventListener("mousedown", function (ev) {
          track(ev, function (dx, dy) { dot.setAttribute("cx", p0[0] + dx); dot.setAttribute("cy", p0[1] + dy); },
            function (dx, dy) {
              var np = [Math.round(p0[0] + dx), Math.round(p0[1] + dy)];
              if (np.join() !== p0.join()) store(function (ans) { ans.point = np; });
            });
        });
      }
    };

    // -- operations ---------------------------------------------------------------------------------
    function newRow(style, t, text) {
      var like = E.model.persistent.filter(function (r) { return r.style === style; })[0];
      return { role: like ? like.role : (style === "task_aug" ? "user" : "assistant"), content: text, style: style,
               timestamp: t, camera: null, tool_calls: null };
    }
    function split() {
      var track = trackOf(E.track);
      if (!track || track.kind !== "span") return V.status("select a span track (subtask, plan, memory, motion) to split");
      var t = playheadT();
      var it = track.items.filter(function (i) { return i.start < t - 1e-6 && t < i.end - 1e-6; })[0];
      if (!it) return V.status("the playhead is not inside a " + E.track + " span (or sits on its start)");
      var before = snapshot(), row = copy(E.model.persistent[it.ref]);
      row.timestamp = t;
      E.model.persistent.push(row);
      E.sel = { style: E.track, ref: E.model.persistent.length - 1, kind: "span" };
      commit("split", before);
    }
    function merge() {
      var it = selectedItem();
      if (!it || E.sel.kind !== "span" || it.next === null) return V.status("select a span that has a next one to merge with");
      var before = snapshot();
      removePersistent(it.next);
      commit("merge", before);
    }
    function removePersistent(i) {
      E.model.persistent.splice(i, 1);
      if (E.sel && E.sel.ref > i) E.sel.ref -= 1;
    }
    function remove() {
      var it = selectedItem();
      if (!it) return V.status("select a span or a marker to delete");
      var before = snapshot(), op = "delete";
      if (E.sel.kind === "span" || it.persistent) {
        removePersistent(it.ref);
      } else {
        var gone = {};
        it.refs.forEach(function (j) { gone[j] = true; });
        E.model.events = E.model.events.filter(function (e, j) { return !gone[j]; });
        op = "delete_event";
      }
      E.sel = null;
      commit(op, before);
    }
    function add() {
      var style = E.track, before = snapshot();
      if (SPAN_STYLES.indexOf(style) >= 0) {
        var t = playheadT();
        if (E.model.persistent.some(function (r) { return r.style === style && Math.abs(r.timestamp - t) < 1e-6; })) {
          return V.status("a " + style + " row already starts at this frame");
        }
        E.model.persistent.push(newRow(style, t, "new " + style));
      } else if (style === "task_aug") {
        E.model.persistent.push(newRow(style, 0, S.ep.task || "new task rephrasing"));
      } else {
        return V.status("rows are added to persistent tracks; select one (subtask, plan, memory, motion, task_aug)");
      }
      E.sel = { style: style, ref: E.model.persistent.length - 1, kind: style === "task_aug" ? "marker" : "span" };
      commit("add", before);
      retype();
    }
    function toPlayhead(which) {
      var it = selectedItem();
      if (!it || E.sel.kind !== "span") return V.status("select a span first");
      var b = spanBounds(it), f = S.frame, before = snapshot();
      if (which === "start") {
        if (f < b.startLo || f > b.startHi) return V.status("the playhead is outside the range this start can move in");
        E.model.persistent[it.ref].timestamp = frameT(f);
      } else {
        if (it.next === null) return V.status("the last span ends with the episode");
        if (f < b.endLo || f > b.endHi) return V.status("the playhead is outside the range this end can move in");
        E.model.persistent[it.next].timestamp = frameT(f);
      }
      commit("move", before);
    }
    function retype() {
      var it = selectedItem();
      if (!it) return V.status("select a span or a marker to retype");
      var input = $("sel-text");
      input.value = it.text;
      input.focus();
      input.select();
    }
    function applyText() {
      var it = selectedItem(), text = $("sel-text").value;
      if (!it || text === it.text) return;
      var before = snapshot();
      if (E.sel.kind === "span" || it.persistent) {
        E.model.persistent[it.ref].content = text;
      } else {
        var row = E.model.events[it.ref].row;
        if (kind(row) === "speech") row.tool_calls[0]["function"].arguments = { text: text };
        else row.content = text;
      }
      commit("retype", before);
    }
    function setStatus(s) {
      if (s === E.status) return;
      var before = snapshot();
      E.status = s;
      commit("status", before);
    }
    function moveTrack(d) {
      var styles = S.ep.tracks.map(function (t) { return t.style; }), i = styles.indexOf(E.track);
      E.track = styles[Math.max(0, Math.min(styles.length - 1, i + d))];
      E.sel = null;
      markSelection();
      renderPanel();
    }

    H.key = function (ev) {
      var k = ev.key, started = ev.timeStamp, ctrl = ev.ctrlKey || ev.metaKey, done = true;
      if (ctrl && (k === "z" || k === "Z")) { if (ev.shiftKey) redo(); else undo(); }
      else if (ctrl && (k === "y" || k === "Y")) redo();
      else if (ctrl && (k === "s" || k === "S")) save();
      else if (ctrl) return false;
      else if (k === "s") split();
      else if (k === "m") merge();
      else if (k === "Delete" || k === "Backspace") remove();
      else if (k === "e" || k === "Enter") retype();
      else if (k === "a") add();
      else if (k === "[") toPlayhead("start");
      else if (k === "]") toPlayhead("end");
      else if (k === "k") { E.snapKeys = !E.snapKeys; renderPanel(); }
      else if (k === "ArrowUp") moveTrack(-1);
      else if (k === "ArrowDown") moveTrack(1);
      else if (k === "r") setStatus("reviewed");
      else if (k === "w") setStatus("needs work");
      else if (k === "u") setStatus("unreviewed");
      else if (k === "Escape") select(null);
      else done = false;
      if (done) {
        void $("lanes").offsetWidth; // the timeline laid out again: the redraw is done
        E.timings.push(performance.now() - started);
        requestAnimationFrame(function () { E.paints.push(performance.now() - started); });
      }
      return done;
    };
    H.leave = function () { return !E.dirty || window.confirm("this episode has unsaved edits: leave without saving?"); };
    window.addEventListener("beforeunload", function (ev) { if (E.dirty && !E.saving) { ev.preventDefault(); ev.returnValue = ""; } });

    H.episode = function (ep) {
      E.model = { persistent: copy(ep.persistent), events: [] };
      ep.events.forEach(function (e) { e.rows.forEach(function (r) { E.model.events.push({ t: e.t, row: copy(r) }); }); });
      E.status = (ep.review && ep.review.status) || "unreviewed";
      E.undo = []; E.redo = []; E.ops = {}; E.sel = null; E.dirty = false;
      apply();
      loadRevisions();
    };

    // -- saving and revisions -----------------------------------------------------------------------
    function post(url, body) {
      return fetch(url, {
        method: "POST",
        headers: { "Content-Type": "application/json", "X-Steerable-Token": V.token || "" },
        body: JSON.stringify(body)
      }).then(function (r) {
        // A refusal that is not JSON (a proxy, a 403 from the host check) still shows its text.
        return r.text().then(function (text) {
          var b;
          try { b = JSON.parse(text); } catch (e) { b = { error: text.trim() || r.statusText }; }
          b._status = r.status;
          return b;
        });
      });
    }
    function save() {
      if (!S.ep || E.saving) return;
      var n = S.ep.episode_index, started = performance.now();
      E.saving = true;
      $("edit-state").textContent = "saving...";
      var body = {
        version: S.ep.version, persistent: E.model.persistent,
        events: E.model.events.map(function (e) { return { t: e.t, row: e.row }; }),
        ops: E.ops, status: E.status
      };
      return post("api/episodes/" + n + "/language", body).then(function (b) {
        E.saving = false;
        showProblems(b.problems || []);
        if (b._status !== 200) { $("edit-state").textContent = "not saved: " + b.error; return b; }
        E.dirty = false;
        E.lastSave = { ms: performance.now() - started, revision: b.revision };
        var msg = b.revision ? "saved as revision " + b.revision.id : "nothing to save: it is as stored";
        return V.openEpisode(n).then(function () { $("edit-state").textContent = msg; V.reloadDataset(); return b; });
      }).catch(function (e) { E.saving = false; $("edit-state").textContent = "not saved: " + String(e.message || e); });
    }
    function goBack(rev) {
      if (E.dirty && !window.confirm("discard the unsaved edits of this episode?")) return;
      return post("api/revisions/" + rev + "/restore", {}).then(function (b) {
        if (b._status !== 200) { $("edit-state").textContent = "could not go back: " + b.error; return; }
        E.dirty = false;
        var msg = b.revision ? "went back to revision " + rev + " (saved as revision " + b.revision.id + ")" : "already as revision " + rev;
        return V.openEpisode(S.ep.episode_index).then(function () { $("edit-state").textContent = msg; V.reloadDataset(); });
      }).catch(function (e) { $("edit-state").textContent = "could not go back: " + String(e.message || e); });
    }
    function showProblems(problems) {
      var ul = $("edit-problems");
      ul.textContent = "";
      problems.forEach(function (p) { ul.appendChild(el("li", "problem", p)); });
    }
    function opsText(ops) {
      return Object.keys(ops || {}).map(function (k) { return ops[k] + " " + k.replace("_", " "); }).join(", ");
    }
    function loadRevisions() {
      return fetch("api/revisions").then(function (r) { return r.json(); }).then(function (b) {
        var ol = $("revision-list");
        ol.textContent = "";
        b.revisions.concat([{ id: 0, time: "", by: "", episodes: [], ops: {}, message: "the dataset before the first revision" }]).forEach(function (r) {
          var li = el("li", "revision");
          li.dataset.revision = r.id;
          var what = r.message || (r.episodes.length ? "episode " + r.episodes.join(", ") : "");
          li.appendChild(el("span", "rev-id", "r" + r.id));
          li.appendChild(el("span", "rev-what", " " + what + (r.ops && opsText(r.ops) ? " (" + opsText(r.ops) + ")" : "") + " "));
          li.appendChild(el("span", "rev-time", (r.time || "").replace("T", " ").slice(0, 19)));
          var b2 = el("button", "go-back", "go back");
          b2.type = "button";
          b2.title = "make the dataset as it was at revision " + r.id + " (itself saved as a new revision)";
          b2.addEventListener("click", function () { goBack(r.id); });
          li.appendChild(b2);
          if (r.id) li.addEventListener("dblclick", function () { showRevision(r.id); });
          ol.appendChild(li);
        });
      });
    }
    function showRevision(id) {
      fetch("api/revisions/" + id).then(function (r) { return r.json(); }).then(function (b) {
        $("revision-changes").textContent = (b.changes || []).map(function (c) {
          return "episode " + c.episode_index + " " + c.style + ":\n" + c.removed.map(function (x) { return "  - " + x; }).concat(
            c.added.map(function (x) { return "  + " + x; })).join("\n");
        }).join("\n") || "r" + id + " changed no rows (a status)";
      });
    }

    // -- the panel ----------------------------------------------------------------------------------
    function buildPanel() {
      var box = $("editor");
      box.hidden = false;
      box.innerHTML = "";
      var bar = el("div", "edit-bar");
      var save_ = el("button", null, "save");
      save_.id = "save"; save_.type = "button"; save_.title = "Ctrl+S: save this episode as a new revision";
      save_.addEventListener("click", save);
      var undo_ = el("button", null, "undo"); undo_.id = "undo"; undo_.type = "button"; undo_.addEventListener("click", undo);
      var redo_ = el("button", null, "redo"); redo_.id = "redo"; redo_.type = "button"; redo_.addEventListener("click", redo);
      var st = el("select"); st.id = "review-status"; st.title = "R / W / U";
      ["unreviewed", "reviewed", "needs work"].forEach(function (s) { var o = el("option", null, s); o.value = s; st.appendChild(o); });
      st.addEventListener("change", function () { setStatus(st.value); st.blur(); });
      var snap = el("label", "snap"); var cb = el("input"); cb.type = "checkbox"; cb.id = "snap-keys";
      cb.addEventListener("change", function () { E.snapKeys = cb.checked; cb.blur(); });
      snap.appendChild(cb); snap.appendChild(document.createTextNode(" snap edges to keystates (K)"));
      var state = el("span", null, ""); state.id = "edit-state";
      var stl = el("label", null, "status "); stl.appendChild(st);
      [save_, undo_, redo_, stl, snap, state].forEach(function (n) { bar.appendChild(n); bar.appendChild(document.createTextNode(" ")); });
      box.appendChild(bar);
      var selrow = el("div", "edit-sel");
      selrow.appendChild(el("span", null, "selected: "));
      var what = el("span", null, "nothing"); what.id = "sel-what"; selrow.appendChild(what);
      var input = el("input"); input.id = "sel-text"; input.type = "text"; input.placeholder = "E: retype the selection, Enter: apply, Esc: cancel";
      input.addEventListener("keydown", function (ev) {
        if (ev.key === "Enter") { applyText(); input.blur(); ev.preventDefault(); }
        else if (ev.key === "Escape") { input.blur(); renderPanel(); }
        ev.stopPropagation();
      });
      selrow.appendChild(input);
      box.appendChild(selrow);
      var probs = el("ul"); probs.id = "edit-problems"; box.appendChild(probs);
      var cols = el("div", "edit-cols");
      var keys = el("table"); keys.id = "keys";
      KEYS.forEach(function (k) {
        var tr = el("tr"); tr.appendChild(el("td", "key", k[0])); tr.appendChild(el("td", null, k[1])); keys.appendChild(tr);
      });
      cols.appendChild(keys);
      var revs = el("div"); revs.id = "revisions";
      revs.appendChild(el("h4", null, "revisions (double-click: what it changed)"));
      var ol = el("ol"); ol.id = "revision-list"; revs.appendChild(ol);
      var pre = el("pre"); pre.id = "revision-changes"; revs.appendChild(pre);
      cols.appendChild(revs);
      box.appendChild(cols);
    }
    function renderPanel() {
      if (!S.ep) return;
      var it = selectedItem();
      $("sel-what").textContent = it ? E.sel.style + " at " + h.fmt(it.start !== undefined ? it.start : it.t) + ": " : "track " + E.track + " (nothing selected)";
      if (document.activeElement !== $("sel-text")) $("sel-text").value = it ? it.text : "";
      $("review-status").value = E.status;
      $("snap-keys").checked = E.snapKeys;
      $("undo").disabled = !E.undo.length;
      $("redo").disabled = !E.redo.length;
      if (!E.saving) {
        var n = E.undo.length;
        $("edit-state").textContent = E.dirty ? n + " unsaved edit" + (n === 1 ? "" : "s") + " (" + opsText(E.ops) + ")" : $("edit-state").textContent;
      }
    }
  };
})();
