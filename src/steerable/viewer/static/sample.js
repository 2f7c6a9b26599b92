/* steerable view: one rendered recipe sample as messages (a classic script, loaded before app.js):
 * the component, each message with its stream and whether it is a target, `say` calls as speech. */
(function () {
  "use strict";
  function contentText(c) {
    if (c === null || c === undefined) return "";
    if (typeof c === "string") return c;
    return c.map(function (b) { return b.type === "text" ? b.text : "[" + b.type + (b.feature ? " " + b.feature : "") + "]"; }).join(" ");
  }

  /* Show sample `r` (an API/export render reply) in `box`; `h` = the app's {el, speech}. */
  window.steerableSample = function (box, r, h) {
    var el = h.el;
    box.textContent = "";
    if (r.error) { box.appendChild(el("div", "none", r.error)); return; }
    box.appendChild(el("div", "component", "component: " + (r.component || "-")));
    if (!r.messages) { box.appendChild(el("div", "none", "the recipe renders nothing at this frame")); return; }
    r.messages.forEach(function (m, i) {
      var target = (r.target_message_indices || []).indexOf(i) >= 0;
      var node = el("div", "msg " + m.role + (target ? " target" : ""));
      node.appendChild(el("span", "msg-role", m.role + " [" + (r.message_streams || [])[i] + (target ? ", target" : "") + "]"));
      node.appendChild(el("span", "msg-content", contentText(m.content)));
      (m.tool_calls || []).forEach(function (c) {
        var said = h.speech({ tool_calls: [c] });
        node.appendChild(el("span", "msg-tool", said !== null ? " says: \u201c" + said + "\u201d" : " " + JSON.stringify(c)));
      });
      box.appendChild(node);
    });
  };
})();
