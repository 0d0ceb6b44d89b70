"use strict";
// MST's HTML report. Every text that comes from a run is put in the page
// with textContent (never as markup), and control characters and the marks
// that reorder text are shown as visible escapes. A trial's transcript is
// parsed from its JSON element (id t-CASE-VARIANT-TRIAL) when it is opened,
// not before.
(function () {
  const meta = JSON.parse(document.getElementById("mst-meta").textContent);
  const tpc = Math.max(meta.trialsPerCase || 1, 1);
  const LIMIT = 20000;
  const UNSAFE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff]/g;

  // vis returns s as nodes: text, with each unsafe character as a visible
  // escape; a string longer than LIMIT shows its start and a button for the rest.
  function vis(s, all) {
    s = s == null ? "" : String(s);
    const f = document.createDocumentFragment();
    let shown = s;
    if (!all && s.length > LIMIT) shown = s.slice(0, LIMIT);
    let last = 0;
    shown.replace(UNSAFE, function (ch, at) {
      if (at > last) f.appendChild(document.createTextNode(shown.slice(last, at)));
      const e = document.createElement("span");
      e.className = "esc";
      e.textContent = "\\u" + ch.charCodeAt(0).toString(16).padStart(4, "0");
      e.title = "a control or direction character, shown as an escape";
      f.appendChild(e);
      last = at + ch.length;
      return ch;
    });
    if (last < shown.length) f.appendChild(document.createTextNode(shown.slice(last)));
    if (shown.length < s.length) {
      const b = document.createElement("button");
      b.type = "button";
      b.className = "more";
      b.textContent = " … show all " + s.length + " characters";
      b.addEventListener("click", function () {
        const p = b.parentNode;
        while (p.firstChild) p.removeChild(p.firstChild);
        p.appendChild(vis(s, true));
      });
      f.appendChild(b);
    }
    return f;
  }

  // el makes an element; attrs are properties or attributes; children are
  // nodes or strings (shown with vis).
  function el(tag, attrs) {
    const e = document.createElement(tag);
    if (attrs) for (const k in attrs) {
      if (k === "class") e.className = attrs[k];
      else e.setAttribute(k, attrs[k]);
    }
    for (let i = 2; i < arguments.length; i++) {
      const c = arguments[i];
      if (c == null || c === false) continue;
      e.appendChild(typeof c === "object" ? c : vis(c));
    }
    return e;
  }

  function kv(pairs) {
    const d = el("dl", { class: "kv" });
    for (const [k, v] of pairs) {
      if (v == null || v === "") continue;
      d.appendChild(el("dt", null, k));
      d.appendChild(el("dd", null, String(v)));
    }
    return d;
  }

  function ms(x) {
    if (x == null) return "";
    if (x < 999.5) return Math.round(x) + " ms";
    return (x / 1000).toFixed(1) + " s";
  }

  const cache = new Map();
  function load(id) {
    if (cache.has(id)) return cache.get(id);
    const node = document.getElementById("t-" + id);
    let b = null;
    if (node) {
      try { b = JSON.parse(node.textContent); } catch (e) { b = { broken: String(e) }; }
      // The trial's grade, when it has one, is a document of its own.
      const g = document.getElementById("g-" + id);
      if (g) {
        try { b.grade = JSON.parse(g.textContent); } catch (e) { b.grade = { broken: String(e) }; }
      }
    }
    cache.set(id, b);
    return b;
  }

  function verdict(b) {
    if (!b) return ["missing", "st-other"];
    if (b.grade && b.grade.graded) return b.grade.passed ? ["passed", "st-pass"] : ["failed", "st-fail"];
    return [b.status + (b.cause ? " (" + b.cause + ")" : ""), "st-other"];
  }

  function callCard(c, label) {
    const head = el("div", { class: "head" }, (c.server || "") + " / " + (c.tool || ""));
    const badge = (t, cls) => head.appendChild(el("span", { class: "badge" + (cls ? " " + cls : "") }, t));
    if (c.offeredAs) badge("offered as " + c.offeredAs);
    if (c.simulated) badge("simulated: never reached the server", "warn");
    if (c.injected) badge("injected fault: " + c.injected, "warn");
    if (c.evidence) badge(c.evidence === "server" ? "seen by the proxy" : "reported by the client");
    if (c.isError) badge("tool error", "bad");
    if (c.error) badge("call failed", "bad");
    if (c.durationMs) badge(ms(c.durationMs));
    if (label) badge(label);
    const card = el("div", { class: "call", "data-call": c.id || "" }, head);
    let args = c.arguments;
    if (args !== undefined && args !== null) {
      card.appendChild(el("div", { class: "role" }, "arguments"));
      card.appendChild(el("pre", null, typeof args === "string" ? args : JSON.stringify(args, null, 2)));
    }
    if (c.error) {
      card.appendChild(el("div", { class: "role" }, "error"));
      card.appendChild(el("pre", null, c.error));
    }
    if (c.sameResult) card.appendChild(el("div", { class: "role" }, "result: the same as the proxy's record"));
    else if (c.result) {
      card.appendChild(el("div", { class: "role" }, "result"));
      card.appendChild(el("pre", null, c.result));
    }
    return card;
  }

  function render(id, b) {
    const body = document.getElementById("viewer-body");
    while (body.firstChild) body.removeChild(body.firstChild);
    const parts = id.split("-").map(Number);
    const head = el("h3", { id: "trial-title" }, meta.cases[parts[0]] + " · " + meta.variants[parts[1]] + " · trial " + parts[2]);
    body.appendChild(head);
    if (!b) {
      body.appendChild(el("p", { class: "st-other" }, "No transcript: this trial is missing (mst run --resume runs it)."));
      return;
    }
    if (b.broken) {
      body.appendChild(el("p", { class: "st-fail" }, "This transcript could not be read: " + b.broken));
      return;
    }
    const [word, cls] = verdict(b);
    body.appendChild(el("p", { id: "trial-verdict", class: cls }, el("b", null, word), " — outcome " + b.status + (b.cause ? " (" + b.cause + ")" : "")));
    if (b.detail) body.appendChild(el("pre", { class: "detail" }, b.detail));
    const g = b.grade;
    if (g) {
      body.appendChild(el("h4", null, "Graders"));
      if (g.stale) body.appendChild(el("p", { class: "st-other" }, "This grade is of an earlier transcript of the trial."));
      if (!g.graded) body.appendChild(el("p", null, g.errored ? "Not graded: a grader that decides the trial gave no verdict (" + g.errored + "); mst grade grades it again." : "Not graded: the trial did not run to an end."));
      if (g.failed) body.appendChild(el("p", { class: "st-fail" }, g.failed));
      const ul = el("ul", { id: "trial-grades" });
      let advisory = false;
      for (const r of g.results || []) {
        // An advisory judge (gate: false) never fails a trial: when it did
        // not pass, it gets a neutral mark and says so, never a red cross.
        let mark = "✗ ", cls = "st-fail";
        if (r.passed) { mark = "✓ "; cls = "st-pass"; }
        else if (r.advisory) { mark = "○ "; cls = "st-advisory"; advisory = true; }
        else if (r.error) { mark = "! "; cls = "st-other"; }
        const why = r.error ? "no verdict: " + r.error : r.detail;
        const li = el("li", { class: cls }, mark + r.grader, r.advisory ? el("span", { class: "badge advisory" }, "advisory") : null, why ? el("div", { class: "detail text" }, why) : null);
        if (r.advisory) li.setAttribute("data-advisory", r.passed ? "passed" : "not-passed");
        ul.appendChild(li);
      }
      body.appendChild(ul);
      if (advisory) body.appendChild(el("p", { class: "method", id: "advisory-note" }, "○ advisory: a judge with gate: false; its verdict is recorded and does not decide whether the trial passes."));
    } else {
      body.appendChild(el("p", { class: "st-other" }, "No grade is stored for this trial."));
    }
    const u = b.usage || {}, env = b.environment || {};
    body.appendChild(kv([
      ["client", (b.client || "") + (b.clientVersion ? " " + b.clientVersion : "")],
      ["model", b.model],
      ["ran on", [env.runner, env.os, env.arch].filter(Boolean).join(" / ") + " · shard " + b.shard],
      ["started", b.started], ["ended", b.ended],
      ["duration", ms(b.durationMs) + (b.setupMs ? " (setup " + ms(b.setupMs) + " apart)" : "")],
      ["tokens", (u.inputTokens || 0) + " in, " + (u.outputTokens || 0) + " out" + (u.cachedTokens ? ", " + u.cachedTokens + " cached" : "")],
      ["model calls", u.modelCalls],
      ["cost", u.costUsd ? "$" + u.costUsd.toFixed(4) : ""],
    ]));
    const calls = new Map();
    for (const c of b.clientToolCalls || []) calls.set(c.id, c);
    for (const c of b.toolCalls || []) calls.set(c.id, c);
    const convo = el("div", { id: "trial-messages" });
    if (b.prompt) convo.appendChild(el("div", { class: "msg user" }, el("div", { class: "role" }, "prompt"), el("div", { class: "text" }, b.prompt)));
    for (const m of b.messages || []) {
      if (m.role === "tool" && !m.text && calls.has(m.toolCall)) continue;
      const box = el("div", { class: "msg " + m.role }, el("div", { class: "role" }, m.role + (m.toolCall ? " · result of " + m.toolCall : "")));
      if (m.text) box.appendChild(el("div", { class: "text" }, m.text));
      for (const id of m.toolCalls || []) {
        const c = calls.get(id);
        box.appendChild(c ? callCard(c) : el("div", { class: "call" }, "call " + id + " (not in the record)"));
      }
      convo.appendChild(box);
    }
    body.appendChild(el("h4", null, "Conversation"));
    body.appendChild(convo);
    if (b.answer) {
      body.appendChild(el("h4", null, "Answer"));
      body.appendChild(el("div", { class: "text" }, b.answer));
    }
    body.appendChild(el("h4", null, "Tool calls as the servers got them (" + (b.toolCalls || []).length + ")"));
    const tc = el("div", { id: "trial-calls" });
    for (const c of b.toolCalls || []) tc.appendChild(callCard(c));
    body.appendChild(tc);
    if ((b.clientToolCalls || []).length) {
      body.appendChild(el("h4", null, "The client's own account (" + b.clientToolCalls.length + ")"));
      for (const c of b.clientToolCalls) body.appendChild(callCard(c));
    }
    if ((b.discrepancies || []).length) {
      body.appendChild(el("h4", { class: "st-fail" }, "Where the client's account and the proxy's record disagree"));
      const ul = el("ul", { id: "trial-discrepancies" });
      for (const d of b.discrepancies) ul.appendChild(el("li", null, d.kind + ": " + d.server + " / " + d.tool + " (call " + d.call + ") — " + d.detail));
      body.appendChild(ul);
    }
    if ((b.servers || []).length) {
      body.appendChild(el("h4", null, "Servers"));
      for (const s of b.servers) {
        const renamed = s.offered ? Object.keys(s.offered).map(k => k + " → " + s.offered[k]).join(", ") : "";
        body.appendChild(el("div", { class: "call" }, el("div", { class: "head" }, s.name + " (" + s.transport + ")"), kv([
          ["implementation", s.implementation], ["protocol", s.protocolVersion],
          ["tools offered", (s.tools || []).join(", ")], ["renamed", renamed],
          ["offered tools hash", s.toolsHash], ["server tools hash", s.serverToolsHash],
        ])));
      }
    }
    if (b.clientTelemetry !== undefined) {
      body.appendChild(el("h4", null, "Client telemetry"));
      body.appendChild(el("pre", null, typeof b.clientTelemetry === "string" ? b.clientTelemetry : JSON.stringify(b.clientTelemetry, null, 2)));
    }
  }

  const viewer = document.getElementById("viewer");
  let openCellNode = null;

  function open(ci, vi, n) {
    const title = document.getElementById("viewer-title");
    while (title.firstChild) title.removeChild(title.firstChild);
    title.appendChild(vis(meta.cases[ci] + " · " + meta.variants[vi]));
    const tabs = document.getElementById("viewer-tabs");
    while (tabs.firstChild) tabs.removeChild(tabs.firstChild);
    let first = 0;
    for (let t = 1; t <= tpc; t++) {
      const id = ci + "-" + vi + "-" + t;
      const b = load(id);
      if (b && !first) first = t;
      const [word, cls] = verdict(b);
      const btn = el("button", { type: "button", class: cls, "data-trial": id }, "#" + t + " " + word);
      btn.addEventListener("click", function () { show(id); });
      tabs.appendChild(btn);
    }
    viewer.hidden = false;
    if (openCellNode) openCellNode.classList.remove("open");
    openCellNode = document.querySelector('#cases td.cell[data-c="' + ci + '"][data-v="' + vi + '"]');
    if (openCellNode) openCellNode.classList.add("open");
    show(ci + "-" + vi + "-" + (n || first || 1));
  }

  function show(id) {
    for (const b of document.querySelectorAll("#viewer-tabs button")) b.classList.toggle("on", b.getAttribute("data-trial") === id);
    render(id, load(id));
    if (history.replaceState) history.replaceState(null, "", "#t-" + id);
  }

  function openID(id) {
    const p = id.split("-").map(Number);
    if (p.length === 3 && p.every(Number.isInteger) && meta.cases[p[0]] !== undefined && meta.variants[p[1]] !== undefined) open(p[0], p[1], p[2]);
  }

  function close() {
    viewer.hidden = true;
    if (openCellNode) openCellNode.classList.remove("open");
    if (history.replaceState) history.replaceState(null, "", location.pathname + location.search);
  }

  document.getElementById("viewer-close").addEventListener("click", close);
  document.addEventListener("keydown", function (e) { if (e.key === "Escape" && !viewer.hidden) close(); });

  const grid = document.getElementById("cases");
  grid.addEventListener("click", function (e) {
    const td = e.target.closest("td.cell");
    if (td) open(Number(td.getAttribute("data-c")), Number(td.getAttribute("data-v")));
  });
  grid.addEventListener("keydown", function (e) {
    const td = e.target.closest("td.cell");
    if (td && (e.key === "Enter" || e.key === " ")) { e.preventDefault(); open(Number(td.getAttribute("data-c")), Number(td.getAttribute("data-v"))); }
  });
  document.addEventListener("click", function (e) {
    const a = e.target.closest("a.open[data-trial]");
    if (a) { e.preventDefault(); openID(a.getAttribute("data-trial")); }
  });

  // The grid's filters.
  const onlyDiffer = document.getElementById("only-differ");
  const onlyFailing = document.getElementById("only-failing");
  const filter = document.getElementById("case-filter");
  const rows = Array.from(grid.tBodies[0].rows);
  function applyFilters() {
    const needle = filter.value.toLowerCase();
    let shown = 0;
    for (const r of rows) {
      const ci = Number(r.getAttribute("data-case"));
      let ok = true;
      if (onlyDiffer.checked && !r.classList.contains("differs")) ok = false;
      if (ok && onlyFailing.checked && !r.querySelector(".g0, .g1, .g2, .g3, .ng, .miss")) ok = false;
      if (ok && needle && String(meta.cases[ci]).toLowerCase().indexOf(needle) < 0) ok = false;
      r.hidden = !ok;
      if (ok) shown++;
    }
    document.getElementById("shown").textContent = shown === rows.length ? "" : shown + " of " + rows.length + " cases shown";
  }
  onlyDiffer.addEventListener("change", applyFilters);
  onlyFailing.addEventListener("change", applyFilters);
  filter.addEventListener("input", applyFilters);

  const m = /^#t-(\d+-\d+-\d+)$/.exec(location.hash);
  if (m) openID(m[1]);
  document.documentElement.setAttribute("data-ready", "1");
})();
