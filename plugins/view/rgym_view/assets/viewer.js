/* rgym view: the run list and trajectories, rendered from the data embedded in this file.
   No network, no external resources. Trajectories are decoded only when a run is opened
   and their steps are rendered in blocks as they scroll into view. */
(function () {
  "use strict";
  var META = JSON.parse(document.getElementById("rgym-meta").textContent);
  var RUNS = META.runs;
  var app = document.getElementById("app");
  var cache = {};
  var BLOCK = 50;            // steps per lazily rendered block
  var FOLD_LINES = 40;       // outputs longer than this are folded
  var FOLD_CHARS = 4000;
  var state = { sort: "started_at", dir: -1, text: "", task: "", solver: "", status: "", mode: "", flagged: false };

  // ------------------------------------------------------------------ helpers
  function esc(s) {
    return String(s == null ? "" : s).replace(/[&<>"']/g, function (c) {
      return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c];
    });
  }
  function num(v, d) {
    if (v == null || v !== v) return "";
    d = d || 4;
    var a = Math.abs(v);
    if (a !== 0 && (a >= 1e6 || a < 1e-3)) return v.toExponential(2);
    return String(+v.toPrecision(d));
  }
  function dur(s) {
    if (s == null) return "";
    if (s < 60) return s.toFixed(1) + " s";
    if (s < 3600) return Math.floor(s / 60) + "m" + String(Math.floor(s % 60)).padStart(2, "0") + "s";
    return Math.floor(s / 3600) + "h" + String(Math.floor(s % 3600 / 60)).padStart(2, "0") + "m";
  }
  function when(ts) {
    if (!ts) return "";
    var d = new Date(ts * 1000);
    function p(n) { return String(n).padStart(2, "0"); }
    return d.getFullYear() + "-" + p(d.getMonth() + 1) + "-" + p(d.getDate()) + " " + p(d.getHours()) + ":" + p(d.getMinutes());
  }
  function money(v) { return v ? "$" + (v < 0.01 ? v.toFixed(4) : v.toFixed(2)) : ""; }
  function kilo(n) { return n == null ? "" : n >= 10000 ? (n / 1000).toFixed(1) + "k" : String(n); }
  function better(a, b, direction) { return direction === "minimize" ? a < b : a > b; }
  function el(html) { var t = document.createElement("template"); t.innerHTML = html.trim(); return t.content.firstChild; }

  function statusBadge(r) {
    var s = r.state !== "complete" ? r.state : r.status || "?";
    var cls = r.state === "running" ? "info" : r.score != null ? "good" : r.infrastructure ? "warn" : "bad";
    var badge = '<span class="badge ' + cls + '" data-status="' + esc(s) + '">' + esc(s.replace(/_/g, " ")) + "</span>";
    if (r.problem) badge += ' <span class="badge bad" data-status="broken" title="' + esc(r.problem) + '">broken</span>';
    return badge;
  }
  function deltaText(score, base, direction) {
    if (score == null || base == null) return "";
    var good = better(score, base, direction), same = score === base;
    var rel = base !== 0 ? ((direction === "minimize" ? base - score : score - base) / Math.abs(base) * 100) : null;
    var txt = rel == null ? "" : (rel >= 0 ? "+" : "") + rel.toFixed(1) + "%";
    return '<span class="delta ' + (same ? "" : good ? "good" : "bad") + '">' + esc(txt) + "</span>";
  }
  function scoreCell(r) {
    if (r.score == null) return '<span class="muted">–</span>';
    var html = '<span class="score">' + esc(num(r.score)) + "</span>";
    if (r.baseline != null) html += ' <span class="muted small">base ' + esc(num(r.baseline)) + "</span> " + deltaText(r.score, r.baseline, r.direction);
    return html;
  }
  function integrityBadge(r) {
    var i = r.integrity;
    if (!i) return '<span class="muted small">–</span>';
    if (i.flagged) return '<span class="badge bad" title="' + esc((i.kinds || []).join(", ")) + '">flagged: ' + esc((i.kinds || []).join(", ")) + "</span>";
    var w = (i.counts || {}).warning || 0;
    return w ? '<span class="badge warn">' + w + " warning" + (w > 1 ? "s" : "") + "</span>" : '<span class="badge good">ok</span>';
  }

  // ------------------------------------------------------------------ syntax highlighting
  var BASH_KW = /^(if|then|else|elif|fi|for|while|until|do|done|case|esac|in|function|select|time|export|local|return|source|cd|echo|set|unset)$/;
  var PY_KW = /^(False|None|True|and|as|assert|async|await|break|class|continue|def|del|elif|else|except|finally|for|from|global|if|import|in|is|lambda|nonlocal|not|or|pass|raise|return|try|while|with|yield|match|case)$/;
  var PY_BI = /^(print|len|range|open|int|float|str|list|dict|set|tuple|min|max|sum|abs|enumerate|zip|map|filter|sorted|super|self|isinstance|round|type)$/;
  function span(cls, text) { return '<span class="hl-' + cls + '">' + esc(text) + "</span>"; }
  function hlBash(src) {
    var re = /(^|\s)(#[^\n]*)|('(?:[^'])*'?|"(?:[^"\\]|\\.)*"?)|(\$\{[^}]*\}|\$[A-Za-z_][A-Za-z0-9_]*|\$[0-9?@#*$!])|(\|\||&&|;;|[|;&]|[0-9]*>>?|<<-?|<)|(\s--?[A-Za-z0-9][\w.-]*(?:=\S*)?)|(\b\d+(?:\.\d+)?\b)|([A-Za-z_.\/][\w.\/+-]*)|(\n)/g;
    var out = "", last = 0, m, atCmd = true;
    while ((m = re.exec(src))) {
      out += esc(src.slice(last, m.index));
      if (m[2] != null) { out += esc(m[1]) + span("c", m[2]); }
      else if (m[3] != null) { out += span("s", m[3]); atCmd = false; }
      else if (m[4] != null) { out += span("v", m[4]); atCmd = false; }
      else if (m[5] != null) { out += span("o", m[5]); atCmd = true; }
      else if (m[6] != null) { out += span("f", m[6]); }
      else if (m[7] != null) { out += span("n", m[7]); atCmd = false; }
      else if (m[8] != null) {
        if (BASH_KW.test(m[8])) { out += span("k", m[8]); atCmd = true; }
        else if (atCmd) { out += span("b", m[8]); atCmd = /^(sudo|nohup|timeout|env|xargs|time)$/.test(m[8]); }
        else out += esc(m[8]);
      } else if (m[9] != null) { out += m[9]; atCmd = true; }
      last = re.lastIndex;
      if (m[0] === "") re.lastIndex++;
    }
    return out + esc(src.slice(last));
  }
  function hlPython(src) {
    var re = /(#[^\n]*)|("""[\s\S]*?(?:"""|$)|'''[\s\S]*?(?:'''|$)|[rbfuRBFU]{0,2}"(?:[^"\\\n]|\\.)*"?|[rbfuRBFU]{0,2}'(?:[^'\\\n]|\\.)*'?)|(@[\w.]+)|(\b\d[\d_]*(?:\.\d*)?(?:[eE][+-]?\d+)?\b)|([A-Za-z_]\w*)/g;
    var out = "", last = 0, m, prev = "";
    while ((m = re.exec(src))) {
      out += esc(src.slice(last, m.index));
      if (m[1] != null) out += span("c", m[1]);
      else if (m[2] != null) out += span("s", m[2]);
      else if (m[3] != null) out += span("d", m[3]);
      else if (m[4] != null) out += span("n", m[4]);
      else if (m[5] != null) {
        var w = m[5];
        if (PY_KW.test(w)) out += span("k", w);
        else if (prev === "def" || prev === "class") out += span("f", w);
        else if (PY_BI.test(w)) out += span("b", w);
        else out += esc(w);
        prev = w;
      }
      last = re.lastIndex;
    }
    return out + esc(src.slice(last));
  }
  function hlJson(src) {
    return esc(src).replace(/(&quot;(?:[^&]|&(?!quot;))*?&quot;)(\s*:)?|\b(true|false|null)\b|(-?\b\d+(?:\.\d+)?(?:[eE][+-]?\d+)?\b)/g,
      function (all, str, colon, kw, n) {
        if (str) return colon ? '<span class="hl-p">' + str + "</span>" + colon : '<span class="hl-s">' + str + "</span>";
        if (kw) return '<span class="hl-k">' + kw + "</span>";
        return '<span class="hl-n">' + n + "</span>";
      });
  }
  window.rgymHighlight = { bash: hlBash, python: hlPython, json: hlJson };

  // ------------------------------------------------------------------ trajectories (lazy)
  function b64bytes(text) {
    var bin = atob(text.replace(/\s+/g, "")), bytes = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    return bytes;
  }
  function loadTrajectory(id) {
    if (cache[id]) return cache[id];
    var node = document.getElementById("traj-" + id);
    if (!node) return (cache[id] = Promise.resolve(null));
    var enc = node.getAttribute("data-encoding");
    var p;
    if (enc === "json") p = Promise.resolve(JSON.parse(node.textContent));
    else if (typeof DecompressionStream === "undefined") p = Promise.reject(new Error("this browser cannot unpack the embedded data (no DecompressionStream); write the file with rgym view --no-compress"));
    else {
      var stream = new Blob([b64bytes(node.textContent)]).stream().pipeThrough(new DecompressionStream("gzip"));
      p = new Response(stream).text().then(JSON.parse);
    }
    cache[id] = p;
    return p;
  }

  // ------------------------------------------------------------------ the run list
  var COLS = [
    ["task_label", "task"], ["agent", "agent"], ["model", "model"], ["seed", "seed", "num"],
    ["status", "status"], ["score", "score", "num"], ["cost_usd", "cost", "num"], ["steps", "steps", "num"],
    ["duration_s", "duration", "num"], ["modes", "failure modes"], ["integrity", "integrity"],
    ["started_at", "started", "num"]
  ];
  function modeBadges(r) {
    var m = r.modes || [];
    if (!m.length) return "";
    return m.map(function (k) { return '<span class="badge warn" title="rgym analyze found this">' + esc(k.replace(/_/g, " ")) + "</span>"; }).join(" ");
  }
  function distinct(key) {
    var seen = {}, out = [];
    RUNS.forEach(function (r) { var v = r[key]; if (v != null && !seen[v]) { seen[v] = 1; out.push(v); } });
    return out.sort();
  }
  function statusOf(r) { return r.state !== "complete" ? r.state : r.status || "?"; }
  function options(values, all) {
    return '<option value="">' + esc(all) + "</option>" + values.map(function (v) { return '<option value="' + esc(v) + '">' + esc(v) + "</option>"; }).join("");
  }
  function renderList() {
    document.title = META.title;
    var statuses = distinct("status").concat(distinct("state").filter(function (s) { return s !== "complete"; }));
    var modes = [];
    RUNS.forEach(function (r) { (r.modes || []).forEach(function (k) { if (modes.indexOf(k) < 0) modes.push(k); }); });
    modes.sort();
    app.innerHTML =
      '<div class="toolbar" id="list-toolbar">' +
      '<input type="search" id="filter-text" placeholder="Filter runs: task, agent, model, status, path…">' +
      '<select id="filter-task">' + options(distinct("task_label"), "all tasks") + "</select>" +
      '<select id="filter-solver">' + options(distinct("solver"), "all solvers") + "</select>" +
      '<select id="filter-status">' + options(statuses, "all statuses") + "</select>" +
      '<select id="filter-mode">' + options(modes, "any or no failure mode") + "</select>" +
      '<label><input type="checkbox" id="filter-flagged"> flagged only</label>' +
      '<span class="count" id="run-count"></span></div>' +
      '<details id="plots" open><summary><b>Plots</b> <span class="muted small">of the runs listed below (the filters apply)</span></summary><div id="plot-box"></div></details>' +
      '<table id="runs"><colgroup>' + COLS.map(function (c) { return '<col class="col-' + c[0] + '">'; }).join("") + "</colgroup><thead><tr>" + COLS.map(function (c) {
        return '<th class="sortable ' + (c[2] || "") + '" data-key="' + c[0] + '" title="sort by ' + c[1] + '">' + c[1] + "</th>";
      }).join("") + "</tr></thead><tbody></tbody></table>";
    var ids = { "filter-text": "text", "filter-task": "task", "filter-solver": "solver", "filter-status": "status", "filter-mode": "mode" };
    Object.keys(ids).forEach(function (id) {
      var input = document.getElementById(id);
      input.value = state[ids[id]];
      function changed() { if (state[ids[id]] !== input.value) { state[ids[id]] = input.value; fillList(); } }
      input.addEventListener("input", changed);
      input.addEventListener("change", changed);
    });
    var fl = document.getElementById("filter-flagged");
    fl.checked = state.flagged;
    fl.addEventListener("change", function () { state.flagged = fl.checked; fillList(); });
    app.querySelectorAll("th.sortable").forEach(function (th) {
      th.addEventListener("click", function () {
        var key = th.getAttribute("data-key");
        state.dir = state.sort === key ? -state.dir : (th.classList.contains("num") ? -1 : 1);
        state.sort = key;
        fillList();
      });
    });
    document.getElementById("plot-box").addEventListener("click", function (ev) {
      var pt = ev.target.closest("[data-id]");
      if (pt) location.hash = "#run=" + pt.getAttribute("data-id");
    });
    app.querySelector("#runs tbody").addEventListener("click", function (ev) {
      var tr = ev.target.closest("tr.run-row");
      if (tr) location.hash = "#run=" + tr.getAttribute("data-id");
    });
    fillList();
  }
  function sortValue(r, key) {
    if (key === "status") return statusOf(r);
    if (key === "integrity") return r.integrity ? (r.integrity.flagged ? 2 : (r.integrity.counts || {}).warning ? 1 : 0) : -1;
    if (key === "modes") return (r.modes || []).length;
    return r[key];
  }
  function fillList() {
    var words = state.text.toLowerCase().split(/\s+/).filter(Boolean);
    var rows = RUNS.filter(function (r) {
      if (state.task && r.task_label !== state.task) return false;
      if (state.solver && r.solver !== state.solver) return false;
      if (state.status && statusOf(r) !== state.status) return false;
      if (state.flagged && !(r.integrity && r.integrity.flagged)) return false;
      if (state.mode && (r.modes || []).indexOf(state.mode) < 0) return false;
      if (words.length) {
        var hay = [r.task_label, r.agent, r.model, statusOf(r), r.path, r.run_id, r.end_reason, r.seed, (r.modes || []).join(" ")].join(" ").toLowerCase();
        for (var i = 0; i < words.length; i++) if (hay.indexOf(words[i]) < 0) return false;
      }
      return true;
    });
    var key = state.sort, dir = state.dir;
    rows.sort(function (a, b) {
      var x = sortValue(a, key), y = sortValue(b, key);
      if (x == null && y == null) return a.id - b.id;
      if (x == null) return 1;
      if (y == null) return -1;
      if (x < y) return -dir;
      if (x > y) return dir;
      return a.id - b.id;
    });
    app.querySelectorAll("th.sortable").forEach(function (th) {
      th.classList.remove("sorted-asc", "sorted-desc");
      if (th.getAttribute("data-key") === key) th.classList.add(dir > 0 ? "sorted-asc" : "sorted-desc");
    });
    var body = app.querySelector("#runs tbody");
    var html = rows.map(function (r) {
      return '<tr class="run-row" data-id="' + r.id + '" title="' + esc(r.path) + '">' +
        '<td class="task cut" title="' + esc(r.task_label) + '">' + esc(r.task_label) + "</td>" +
        '<td class="agent cut" title="' + esc(r.agent) + '">' + esc(r.agent) + "</td>" +
        '<td class="model cut" title="' + esc(r.model || "") + '">' + esc(r.model || "") + "</td>" +
        '<td class="num">' + esc(r.seed == null ? "" : r.seed) + "</td>" +
        '<td class="status">' + statusBadge(r) + "</td>" +
        '<td class="num score-cell">' + scoreCell(r) + "</td>" +
        '<td class="num">' + money(r.cost_usd) + "</td>" +
        '<td class="num steps">' + r.steps + "</td>" +
        '<td class="num">' + dur(r.duration_s) + "</td>" +
        '<td class="modes">' + modeBadges(r) + "</td>" +
        '<td class="integrity">' + integrityBadge(r) + "</td>" +
        '<td class="num small">' + when(r.started_at) + "</td></tr>";
    }).join("");
    body.innerHTML = html || '<tr><td colspan="12" class="empty">No run matches the filters.</td></tr>';
    document.getElementById("run-count").textContent = rows.length + " of " + RUNS.length + " runs";
    renderPlots(rows);
  }

  // ------------------------------------------------------------------ plots across runs (inline SVG)
  var PALETTE = ["#2f5fd0", "#d0552f", "#16794a", "#8a3fd0", "#a15c00", "#0f8a9d", "#c2185b", "#5d6b7a"];
  var MAX_PLOT_TASKS = 12;
  function byTask(rows) {
    var tasks = {}, order = [];
    rows.forEach(function (r) {
      var k = r.task_label || "?";
      if (!tasks[k]) { tasks[k] = []; order.push(k); }
      tasks[k].push(r);
    });
    order.sort();
    return { tasks: tasks, order: order };
  }
  function colorOf(solvers, name) { return PALETTE[solvers.indexOf(name) % PALETTE.length]; }
  function extent(vals) {
    var lo = Infinity, hi = -Infinity;
    vals.forEach(function (v) { if (v < lo) lo = v; if (v > hi) hi = v; });
    if (lo === hi) { hi += Math.abs(hi) * 0.1 || 1; lo -= Math.abs(lo) * 0.1 || 0; }
    return [lo, hi];
  }
  // one task: each solver a column, each run a dot, the mean a bar
  function scoreStrip(task, runs, solvers) {
    var W = 320, H = 170, L = 46, R = 10, T = 12, B = 40;
    var scored = runs.filter(function (r) { return r.score != null; });
    var cols = [];
    scored.forEach(function (r) { if (cols.indexOf(r.solver) < 0) cols.push(r.solver); });
    cols.sort();
    var title = esc(task) + ": primary score per run";
    if (!scored.length) return '<div class="chart card plot-score"><div class="title cut" title="' + esc(task) + '">' + title + '</div><div class="muted small">no scored run</div></div>';
    var ys = scored.map(function (r) { return r.score; });
    scored.forEach(function (r) { if (r.baseline != null) ys.push(r.baseline); });
    var e = extent(ys), y0 = e[0], y1 = e[1];
    function Y(v) { return H - B - (v - y0) / (y1 - y0) * (H - T - B); }
    var cw = (W - L - R) / cols.length;
    var svg = '<svg viewBox="0 0 ' + W + " " + H + '" role="img" aria-label="' + title + '">';
    svg += '<line class="axis" x1="' + L + '" y1="' + (H - B) + '" x2="' + (W - R) + '" y2="' + (H - B) + '"/><line class="axis" x1="' + L + '" y1="' + T + '" x2="' + L + '" y2="' + (H - B) + '"/>';
    svg += '<text x="' + (L - 4) + '" y="' + (T + 8) + '" text-anchor="end">' + esc(num(y1, 3)) + '</text><text x="' + (L - 4) + '" y="' + (H - B) + '" text-anchor="end">' + esc(num(y0, 3)) + "</text>";
    var base = scored.filter(function (r) { return r.baseline != null; })[0];
    if (base) svg += '<line class="base" x1="' + L + '" x2="' + (W - R) + '" y1="' + Y(base.baseline).toFixed(1) + '" y2="' + Y(base.baseline).toFixed(1) + '"><title>baseline ' + esc(num(base.baseline)) + "</title></line>";
    cols.forEach(function (solver, ci) {
      var cx = L + cw * (ci + 0.5), pts = scored.filter(function (r) { return r.solver === solver; }), sum = 0;
      pts.forEach(function (r, k) {
        sum += r.score;
        var jitter = pts.length > 1 ? (k / (pts.length - 1) - 0.5) * Math.min(cw * 0.5, 40) : 0;
        svg += '<circle class="run-pt" r="3.5" fill="' + colorOf(solvers, solver) + '" cx="' + (cx + jitter).toFixed(1) + '" cy="' + Y(r.score).toFixed(1) + '" data-id="' + r.id + '"><title>' + esc(solver) + (r.seed != null ? " seed " + esc(r.seed) : "") + ": " + esc(num(r.score, 6)) + "</title></circle>";
      });
      var mean = sum / pts.length;
      svg += '<line class="mean" x1="' + (cx - cw * 0.35).toFixed(1) + '" x2="' + (cx + cw * 0.35).toFixed(1) + '" y1="' + Y(mean).toFixed(1) + '" y2="' + Y(mean).toFixed(1) + '"><title>mean ' + esc(num(mean, 6)) + " over " + pts.length + " runs</title></line>";
      var label = solver.length > 24 ? solver.slice(0, 23) + "…" : solver;
      svg += '<text x="' + cx.toFixed(1) + '" y="' + (H - B + 14) + '" text-anchor="middle">' + esc(label) + "<title>" + esc(solver) + "</title></text>";
      svg += '<text x="' + cx.toFixed(1) + '" y="' + (H - B + 26) + '" text-anchor="middle">n=' + pts.length + "</text>";
    });
    svg += "</svg>";
    return '<div class="chart card plot-score"><div class="title cut" title="' + esc(task) + '">' + title + "</div>" + svg + "</div>";
  }
  // one task: each run's validation score by step, a line per run coloured by solver
  function scoreSteps(task, runs, solvers) {
    var W = 320, H = 170, L = 46, R = 10, T = 12, B = 24;
    var withCurve = runs.filter(function (r) { return r.curve && r.curve.length; });
    var title = esc(task) + ": validation score by step";
    if (!withCurve.length) return '<div class="chart card plot-steps"><div class="title cut" title="' + esc(task) + '">' + title + '</div><div class="muted small">no validation scores</div></div>';
    var xs = [], ys = [];
    withCurve.forEach(function (r) { r.curve.forEach(function (p) { xs.push(p[0]); ys.push(p[1]); }); });
    var ex = extent(xs.concat([0])), ey = extent(ys);
    function X(v) { return L + (v - ex[0]) / (ex[1] - ex[0]) * (W - L - R); }
    function Y(v) { return H - B - (v - ey[0]) / (ey[1] - ey[0]) * (H - T - B); }
    var svg = '<svg viewBox="0 0 ' + W + " " + H + '" role="img" aria-label="' + title + '">';
    svg += '<line class="axis" x1="' + L + '" y1="' + (H - B) + '" x2="' + (W - R) + '" y2="' + (H - B) + '"/><line class="axis" x1="' + L + '" y1="' + T + '" x2="' + L + '" y2="' + (H - B) + '"/>';
    svg += '<text x="' + (L - 4) + '" y="' + (T + 8) + '" text-anchor="end">' + esc(num(ey[1], 3)) + '</text><text x="' + (L - 4) + '" y="' + (H - B) + '" text-anchor="end">' + esc(num(ey[0], 3)) + "</text>";
    svg += '<text x="' + L + '" y="' + (H - 8) + '">step ' + esc(num(ex[0], 4)) + '</text><text x="' + (W - R) + '" y="' + (H - 8) + '" text-anchor="end">' + esc(num(ex[1], 4)) + "</text>";
    withCurve.forEach(function (r) {
      var color = colorOf(solvers, r.solver), pts = r.curve.map(function (p) { return X(p[0]).toFixed(1) + "," + Y(p[1]).toFixed(1); });
      svg += '<polyline class="run-curve" fill="none" stroke="' + color + '" points="' + pts.join(" ") + '" data-id="' + r.id + '"><title>' + esc(r.solver) + (r.seed != null ? " seed " + esc(r.seed) : "") + "</title></polyline>";
      r.curve.forEach(function (p) { svg += '<circle class="run-pt" r="2.5" fill="' + color + '" cx="' + X(p[0]).toFixed(1) + '" cy="' + Y(p[1]).toFixed(1) + '" data-id="' + r.id + '"><title>step ' + esc(p[0]) + ": " + esc(num(p[1], 6)) + "</title></circle>"; });
    });
    svg += "</svg>";
    return '<div class="chart card plot-steps"><div class="title cut" title="' + esc(task) + '">' + title + "</div>" + svg + "</div>";
  }
  function renderPlots(rows) {
    var box = document.getElementById("plot-box");
    if (!box) return;
    var solvers = [];
    RUNS.forEach(function (r) { if (solvers.indexOf(r.solver) < 0) solvers.push(r.solver); });
    solvers.sort();
    var g = byTask(rows), shown = g.order.slice(0, MAX_PLOT_TASKS), html = "";
    var legend = solvers.filter(function (sv) { return rows.some(function (r) { return r.solver === sv; }); }).map(function (sv) {
      return '<span class="legend-item cut" title="' + esc(sv) + '"><span class="swatch" style="background:' + colorOf(solvers, sv) + '"></span>' + esc(sv) + "</span>";
    }).join("");
    shown.forEach(function (task) { html += scoreStrip(task, g.tasks[task], solvers) + scoreSteps(task, g.tasks[task], solvers); });
    box.innerHTML = rows.length ? '<div class="legend small">' + legend + "</div>" + '<div class="charts plots">' + html + "</div>" +
      (g.order.length > shown.length ? '<div class="muted small">' + (g.order.length - shown.length) + " more tasks not plotted: choose one with the task filter</div>" : "")
      : '<div class="muted small">no run to plot</div>';
  }

  // ------------------------------------------------------------------ one run
  var current = null;   // {run, traj, order (filtered step positions), observer}

  function kv(pairs) {
    return '<div class="kv">' + pairs.filter(function (p) { return p[1] !== "" && p[1] != null; }).map(function (p) {
      return "<div>" + esc(p[0]) + "</div><div>" + p[1] + "</div>";
    }).join("") + "</div>";
  }
  function scoresText(scores) {
    return Object.keys(scores || {}).map(function (k) { return esc(k) + " = " + esc(num(scores[k], 6)); }).join(", ");
  }
  function chart(title, pts, opts) {
    opts = opts || {};
    var W = 320, H = 150, L = 46, R = 10, T = 10, B = 24;
    var id = opts.id ? ' id="' + opts.id + '"' : "";
    if (!pts.length) return '<div class="chart card"' + id + '><div class="title">' + esc(title) + '</div><div class="muted small">no data</div></div>';
    var xs = pts.map(function (p) { return p[0]; }), ys = pts.map(function (p) { return p[1]; });
    if (opts.limit != null) ys.push(opts.limit);
    if (opts.base != null) ys.push(opts.base);
    // a loop, not Math.min.apply: a run of 100,000+ steps would pass too many arguments
    function lo(a) { var m = Infinity; for (var i = 0; i < a.length; i++) if (a[i] < m) m = a[i]; return m; }
    function hi(a) { var m = -Infinity; for (var i = 0; i < a.length; i++) if (a[i] > m) m = a[i]; return m; }
    var x0 = lo(xs), x1 = hi(xs), y0 = lo(ys), y1 = hi(ys);
    if (opts.zero) y0 = Math.min(0, y0);
    if (x1 === x0) x1 = x0 + 1;
    if (y1 === y0) { y1 += Math.abs(y1) * 0.1 || 1; y0 -= Math.abs(y0) * 0.1 || 0; }
    function X(v) { return L + (v - x0) / (x1 - x0) * (W - L - R); }
    function Y(v) { return H - B - (v - y0) / (y1 - y0) * (H - T - B); }
    var svg = '<svg viewBox="0 0 ' + W + " " + H + '" role="img" aria-label="' + esc(title) + '">';
    svg += '<line class="axis" x1="' + L + '" y1="' + (H - B) + '" x2="' + (W - R) + '" y2="' + (H - B) + '"/>';
    svg += '<line class="axis" x1="' + L + '" y1="' + T + '" x2="' + L + '" y2="' + (H - B) + '"/>';
    svg += '<text x="' + (L - 4) + '" y="' + (T + 8) + '" text-anchor="end">' + esc(num(y1, 3)) + "</text>";
    svg += '<text x="' + (L - 4) + '" y="' + (H - B) + '" text-anchor="end">' + esc(num(y0, 3)) + "</text>";
    svg += '<text x="' + L + '" y="' + (H - 8) + '">' + esc(num(x0, 4)) + "</text>";
    svg += '<text x="' + (W - R) + '" y="' + (H - 8) + '" text-anchor="end">' + esc(num(x1, 4) + (opts.xlabel ? " " + opts.xlabel : "")) + "</text>";
    if (opts.limit != null) svg += '<line class="limit" x1="' + L + '" x2="' + (W - R) + '" y1="' + Y(opts.limit) + '" y2="' + Y(opts.limit) + '"><title>limit ' + esc(num(opts.limit)) + "</title></line>";
    if (opts.base != null) svg += '<line class="base" x1="' + L + '" x2="' + (W - R) + '" y1="' + Y(opts.base) + '" y2="' + Y(opts.base) + '"><title>baseline ' + esc(num(opts.base)) + "</title></line>";
    if (!opts.points) {
      // thin very long curves to about one point per pixel column
      var stride = Math.max(1, Math.floor(pts.length / 600));
      var poly = [];
      for (var i = 0; i < pts.length; i += stride) poly.push(X(pts[i][0]).toFixed(1) + "," + Y(pts[i][1]).toFixed(1));
      var lastP = pts[pts.length - 1];
      poly.push(X(lastP[0]).toFixed(1) + "," + Y(lastP[1]).toFixed(1));
      svg += '<polyline class="curve" points="' + poly.join(" ") + '"/>';
    } else {
      pts.forEach(function (p) {
        svg += '<circle class="pt' + (p[3] ? " invalid" : "") + '" r="3.5" cx="' + X(p[0]).toFixed(1) + '" cy="' + Y(p[1]).toFixed(1) + '" data-step="' + p[2] + '"><title>step ' + p[2] + ": " + esc(num(p[1], 6)) + "</title></circle>";
      });
    }
    svg += "</svg>";
    return '<div class="chart card"' + id + '><div class="title">' + esc(title) + "</div>" + svg + "</div>";
  }

  function renderRun(id, stepTarget) {
    var run = RUNS[id];
    if (!run) { location.hash = ""; return; }
    document.title = run.task_label + " · " + run.solver + " — rgym";
    app.innerHTML = '<div class="toolbar"><a id="back" href="#">← all runs</a><span class="muted small">' + esc(run.path) + '</span></div><div class="empty" id="loading">Loading trajectory…</div>';
    loadTrajectory(id).then(function (traj) {
      if (!traj) { document.getElementById("loading").textContent = "This file holds no trajectory for the run (written with --no-steps)."; return; }
      showRun(run, traj, stepTarget);
    }).catch(function (err) {
      var n = document.getElementById("loading");
      if (n) n.textContent = "Cannot read the trajectory: " + err.message;
    });
  }

  function showRun(run, traj, stepTarget) {
    var res = traj.result || {};
    var budget = traj.budget || {};
    var steps = traj.steps;
    var metric = run.primary_metric;
    var head = '<div class="toolbar"><a id="back" href="#">← all runs</a><span class="muted small">' + esc(run.path) + "</span></div>";
    head += '<h2 id="run-title">' + esc(run.task_label) + ' <span class="muted">·</span> ' + esc(run.solver) +
      (run.seed != null ? ' <span class="muted">· seed ' + esc(run.seed) + "</span>" : "") + " " + statusBadge(run) + "</h2>";
    if (traj.problem) head += '<div class="card" style="border-color:var(--bad)">' + esc(traj.problem) + "</div>";
    // final result
    var finalScores = res.final_scores ? Object.keys(res.final_scores).map(function (k) {
      var v = res.final_scores[k], b = (res.baseline_scores || {})[k], dir = (res.metrics || {})[k] || "maximize";
      return "<tr><td>" + esc(k) + (k === metric ? " ★" : "") + '</td><td class="num">' + esc(num(v, 6)) + '</td><td class="num muted">' + esc(num(b, 6)) + '</td><td class="num">' + deltaText(v, b, dir) + "</td></tr>";
    }).join("") : "";
    var resultCard = '<div class="card" id="final-result"><h3>Final result</h3>' + kv([
      ["status", statusBadge(run)], ["ended because", esc(res.why || run.end_reason || (run.state !== "complete" ? run.state : ""))],
      ["score", scoreCell(run) + (metric ? ' <span class="muted small">(' + esc(metric) + ", " + esc(run.direction) + ")</span>" : "")],
      ["best validation", esc(num(run.best_validation, 6))],
      ["error", res.error ? '<span style="color:var(--bad)">' + esc(res.error) + "</span>" : ""],
      ["agent error", esc(res.agent_error || "")]
    ]) + (finalScores ? '<table class="small" style="margin-top:6px"><tr><th>metric</th><th class="num">final</th><th class="num">baseline</th><th class="num">Δ</th></tr>' + finalScores + "</table>" : "") + "</div>";
    // budget
    var tokens = (run.input_tokens || 0) + (run.output_tokens || 0);
    function used(v, limit, fmt) { return esc(fmt(v)) + (limit ? ' <span class="muted">of ' + esc(fmt(limit)) + " (" + Math.round(v / limit * 100) + "%)</span>" : ""); }
    var nCalls = 0, latency = 0, nRetries = 0;
    steps.forEach(function (s) { nRetries += s.rt || 0; (s.m || []).forEach(function (c) { nCalls++; latency += c[4] || 0; }); });
    var budgetCard = '<div class="card" id="budget"><h3>Budget used</h3>' + kv([
      ["steps", used(run.steps, budget.max_steps, String)],
      ["time", used(run.duration_s || 0, budget.time_limit_s, dur)],
      ["cost", used(run.cost_usd || 0, budget.cost_limit_usd, function (v) { return "$" + (+v).toFixed(4); })],
      ["tokens", used(tokens, budget.token_limit, String) + ' <span class="muted small">(' + (run.input_tokens || 0) + " in / " + (run.output_tokens || 0) + " out)</span>"],
      ["model calls", nCalls ? nCalls + ' <span class="muted small">mean latency ' + (latency / nCalls).toFixed(2) + " s" + (nRetries ? " · " + nRetries + " retried attempt" + (nRetries > 1 ? "s" : "") : "") + "</span>" : "none"],
      ["identity", esc([run.sandbox, run.run_id].filter(Boolean).join(" · "))]
    ]) + "</div>";
    // validations
    var vals = traj.gradings;
    var metrics = [];
    vals.forEach(function (g) { Object.keys(g.scores || {}).forEach(function (k) { if (metrics.indexOf(k) < 0) metrics.push(k); }); });
    var valCard = '<div class="card" id="validations"><h3>Gradings (' + vals.length + ")</h3>" + (vals.length ?
      '<table class="small"><tr><th>step</th><th>kind</th>' + metrics.map(function (m) { return '<th class="num">' + esc(m) + "</th>"; }).join("") + "<th></th></tr>" +
      vals.map(function (g) {
        return '<tr class="grading ' + (g.valid ? "" : "invalid") + '"><td><a class="step-link" data-step="' + g.step + '">#' + esc(g.step) + "</a></td><td>" + esc(g.kind) + "</td>" +
          metrics.map(function (m) { return '<td class="num">' + esc(num((g.scores || {})[m], 6)) + "</td>"; }).join("") +
          "<td>" + (g.valid ? "" : '<span class="badge bad" title="' + esc(g.error || "") + '">invalid</span> <span class="small">' + esc((g.error || "").slice(0, 120)) + "</span>") + "</td></tr>";
      }).join("") + "</table>" : '<div class="muted">no grading</div>') + "</div>";
    // integrity and events
    var integ = run.integrity;
    var findings = integ && integ.findings && integ.findings.length ? '<ul class="findings">' + integ.findings.map(function (f) {
      return '<li><span class="badge ' + (f.severity === "error" ? "bad" : f.severity === "warning" ? "warn" : "info") + '">' + esc(f.severity) + "</span> <b>" + esc(f.kind) + "</b> " +
        (f.steps || []).map(function (s) { return '<a class="step-link" data-step="' + s + '">#' + s + "</a>"; }).join(" ") + ": " + esc(f.message) + "</li>";
    }).join("") + "</ul>" : "";
    var intCard = '<div class="card" id="integrity"><h3>Integrity</h3>' + (integ ? integrityBadge(run) + findings : '<span class="muted">no integrity report</span>') +
      (traj.events.length ? '<h3 style="margin-top:8px">Events</h3><ul class="small">' + traj.events.map(function (e) {
        return "<li><b>" + esc(e.type) + "</b> " + esc(e.error || e.reason || e.message || e.hook || "") + "</li>";
      }).join("") + "</ul>" : "") + "</div>";
    // charts: the budget over time and the validation scores
    var costPts = [], tokPts = [], timePts = [], scorePts = [];
    var c = 0, t = 0;
    steps.forEach(function (s) {
      c += s.c || 0; t += (s.ti || 0) + (s.to || 0);
      costPts.push([s.i, c]); tokPts.push([s.i, t]);
      timePts.push([s.i, (s.el || 0) + (s.d || 0)]);
    });
    vals.forEach(function (g) {
      if (g.kind === "validate" && g.valid && metric && (g.scores || {})[metric] != null) scorePts.push([g.step, g.scores[metric], g.step, false]);
    });
    var charts = '<div class="charts">' +
      chart("validation " + (metric || "score") + " by step", scorePts, { points: true, base: run.baseline, id: "chart-score" }) +
      chart("elapsed time (s) by step", timePts, { limit: budget.time_limit_s, zero: true, id: "chart-time" }) +
      chart("cumulative cost (USD) by step", costPts, { limit: budget.cost_limit_usd, zero: true, id: "chart-cost" }) +
      chart("cumulative tokens by step", tokPts, { limit: budget.token_limit, zero: true, id: "chart-tokens" }) + "</div>";
    var prompt = traj.prompt && traj.prompt.length ? '<details class="prompt card"><summary>The model\'s first prompt (' + traj.prompt.length + " messages)</summary>" +
      traj.prompt.map(function (m) { return '<div class="label">' + esc(m.role) + "</div><pre>" + esc(m.content) + "</pre>"; }).join("") + "</details>" : "";
    var tools = {};
    steps.forEach(function (s) { tools[s.t] = (tools[s.t] || 0) + 1; });
    var toolbar = '<div class="toolbar" id="step-toolbar"><b>Trajectory</b>' +
      '<input type="search" id="step-filter" placeholder="Search commands, outputs, thoughts…">' +
      '<select id="step-tool"><option value="">all tools</option>' + Object.keys(tools).sort().map(function (k) { return '<option value="' + esc(k) + '">' + esc(k) + " (" + tools[k] + ")</option>"; }).join("") + "</select>" +
      '<label><input type="checkbox" id="step-errors"> errors only</label>' +
      '<label><input type="checkbox" id="step-vals"> gradings only</label>' +
      '<label>go to step <input type="number" id="step-goto" min="1" style="width:90px"></label>' +
      '<span class="count" id="step-count"></span></div>';
    // what rgym analyze finds in this trajectory (debug loops, premature submits...)
    var an = traj.analysis;
    var modeCard = an ? '<div class="card" id="failure-modes"><h3>Failure modes</h3>' + (an.findings.length ? '<ul class="findings">' + an.findings.map(function (f) {
      return '<li><span class="badge ' + (f.severity === "warning" ? "warn" : "info") + '">' + esc(f.severity) + "</span> <b>" + esc(f.kind.replace(/_/g, " ")) + "</b> " +
        (f.steps || []).slice(0, 20).map(function (s) { return '<a class="step-link" data-step="' + s + '">#' + s + "</a>"; }).join(" ") + ((f.steps || []).length > 20 ? " …" : "") + ": " + esc(f.message) + "</li>";
    }).join("") + "</ul>" : '<span class="badge good">none found</span>') + "</div>" : "";
    // the background jobs rgym analyze traced (rgym_view.longruns), and the time after the best score
    var lr = an && an.long_run;
    var jobsCard = lr && ((lr.jobs || []).length || lr.after_best) ? '<div class="card" id="long-run"><h3>' + ((lr.jobs || []).length ? "Background jobs" : "After the best score") + "</h3>" +
      ((lr.jobs || []).length ? '<table class="jobs"><tr><th>job</th><th>state</th><th>started</th><th>ran</th><th>writes</th><th>command</th></tr>' + lr.jobs.map(function (j) {
        var ran = j.started_at != null && j.ended_at != null ? (j.ended_at - j.started_at).toFixed(0) + " s" : "";
        return "<tr><td><b>" + esc(j.name) + "</b></td><td>" + (j.failure ? '<span class="badge warn" title="' + esc(j.failure) + '">' + esc(j.state) + "</span>" : esc(j.state)) + "</td>" +
          '<td><a class="step-link" data-step="' + j.step + '">#' + j.step + "</a></td><td>" + ran + "</td><td>" + esc((j.writes || []).join(", ")) + "</td><td><code>" + esc(j.command.slice(0, 120)) + "</code></td></tr>";
      }).join("") + "</table>" : "") +
      (lr.after_best ? '<p class="muted small">after the last improving validation (step ' + lr.after_best.last_improvement_step + "): " + lr.after_best.after_best_s.toFixed(0) + " s of " + lr.after_best.episode_s.toFixed(0) + " s, " + lr.after_best.steps_after + " steps, " + lr.after_best.validations_after + " validations</p>" : "") + "</div>" : "";
    var ws = traj.workspace;
    var wsCard = ws ? '<details class="card" id="workspace-diff"' + ((ws.files || []).length <= 20 ? " open" : "") + '><summary><b>Final workspace against the starter files</b> <span class="muted small">' + (ws.files || []).length + " files differ</span></summary>" +
      treeDiffHtml(ws, "the final workspace is the starter, unchanged") + "</details>" : "";
    app.innerHTML = head + '<div class="cards">' + resultCard + budgetCard + valCard + intCard + modeCard + jobsCard + "</div>" + charts + wsCard + prompt + toolbar + '<div class="steps" id="steps"></div>';
    current = { run: run, traj: traj, order: null, observer: null, blocks: [] };
    var filt = { text: "", tool: "", errors: false, vals: false };
    function refilter() {
      var words = filt.text.toLowerCase();
      var order = [];
      for (var i = 0; i < steps.length; i++) {
        var s = steps[i];
        if (filt.tool && s.t !== filt.tool) continue;
        if (filt.errors && !(s.e || (s.x != null && s.x !== 0) || s.rj)) continue;
        if (filt.vals && !(s.v || s.t === "submit" || s.t === "validate")) continue;
        if (words) {
          var hay = (s.t + " " + JSON.stringify(s.a) + " " + (s.th || "") + " " + (s.o || "") + (s.df ? " " + JSON.stringify(s.df) : "")).toLowerCase();
          if (hay.indexOf(words) < 0) continue;
        }
        order.push(i);
      }
      layoutSteps(order);
    }
    var timer = null;
    document.getElementById("step-filter").addEventListener("input", function (ev) {
      clearTimeout(timer); timer = setTimeout(function () { filt.text = ev.target.value; refilter(); }, 150);
    });
    document.getElementById("step-tool").addEventListener("change", function (ev) { filt.tool = ev.target.value; refilter(); });
    document.getElementById("step-errors").addEventListener("change", function (ev) { filt.errors = ev.target.checked; refilter(); });
    document.getElementById("step-vals").addEventListener("change", function (ev) { filt.vals = ev.target.checked; refilter(); });
    document.getElementById("step-goto").addEventListener("change", function (ev) { goToStep(parseInt(ev.target.value, 10)); });
    refilter();
    if (stepTarget) goToStep(stepTarget);
  }

  function layoutSteps(order) {
    var box = document.getElementById("steps");
    if (current.observer) current.observer.disconnect();
    current.order = order;
    current.blocks = [];
    box.innerHTML = "";
    document.getElementById("step-count").textContent = order.length === current.traj.steps.length ?
      order.length + " steps" : order.length + " of " + current.traj.steps.length + " steps";
    if (!order.length) { box.innerHTML = '<div class="empty">No step matches.</div>'; return; }
    var observer = new IntersectionObserver(function (entries) {
      entries.forEach(function (en) { if (en.isIntersecting) fillBlock(en.target); });
    }, { rootMargin: "1200px 0px" });
    current.observer = observer;
    var frag = document.createDocumentFragment();
    for (var b = 0; b * BLOCK < order.length; b++) {
      var div = document.createElement("div");
      div.className = "block";
      div.setAttribute("data-block", b);
      var n = Math.min(BLOCK, order.length - b * BLOCK);
      div.style.minHeight = (n * 150) + "px";
      frag.appendChild(div);
      current.blocks.push(div);
      observer.observe(div);
    }
    box.appendChild(frag);
  }
  function fillBlock(div) {
    if (div.getAttribute("data-filled")) return;
    div.setAttribute("data-filled", "1");
    var b = +div.getAttribute("data-block");
    var order = current.order, steps = current.traj.steps;
    var html = [];
    for (var k = b * BLOCK; k < Math.min(order.length, (b + 1) * BLOCK); k++) html.push(stepHtml(steps[order[k]]));
    div.innerHTML = html.join("");
    div.style.minHeight = "";
    current.observer.unobserve(div);
  }
  function goToStep(n) {
    if (!current || !n) return;
    var steps = current.traj.steps, pos = -1;
    for (var k = 0; k < current.order.length; k++) if (steps[current.order[k]].i >= n) { pos = k; break; }
    if (pos < 0) pos = current.order.length - 1;
    if (pos < 0) return;
    var b = Math.floor(pos / BLOCK);
    for (var j = Math.max(0, b - 1); j <= Math.min(current.blocks.length - 1, b + 1); j++) fillBlock(current.blocks[j]);
    var target = document.getElementById("step-" + steps[current.order[pos]].i);
    if (target) {
      document.querySelectorAll(".step.target").forEach(function (x) { x.classList.remove("target"); });
      target.classList.add("target");
      target.scrollIntoView({ block: "start" });
    }
  }

  function actionHtml(s) {
    var a = s.a || {};
    var tool = s.t;
    if (tool === "bash" && typeof a.command === "string") return '<pre class="action lang-bash">' + hlBash(a.command) + "</pre>";
    var inline = [], blocks = [];
    Object.keys(a).forEach(function (k) {
      var v = a[k];
      if (typeof v === "string" && (v.indexOf("\n") >= 0 || v.length > 80)) blocks.push([k, v]);
      else inline.push(k + "=" + (typeof v === "string" ? v : JSON.stringify(v)));
    });
    var path = String(a.path || a.file || "");
    var html = '<pre class="action lang-tool"><span class="hl-b">' + esc(tool) + "</span>" + (inline.length ? " " + hlJson(inline.join(" ")) : "") + "</pre>";
    blocks.forEach(function (kv2) {
      var code = kv2[1], py = /\.py$/.test(path) || (!path && /^(edit|insert|create)$/.test(tool)) || /python|code/.test(kv2[0]);
      html += '<div class="label">' + esc(kv2[0]) + '</div><pre class="action lang-' + (py ? "python" : "text") + '">' + (py ? hlPython(code) : esc(code)) + "</pre>";
    });
    return html;
  }
  function outputHtml(s) {
    var text = s.o || "";
    var lines = text.replace(/\n$/, "").split("\n");  // a final newline ends the last line
    if (lines.length <= FOLD_LINES && text.length <= FOLD_CHARS) return '<pre class="output">' + esc(text) + "</pre>";
    var head = lines.slice(0, 15).join("\n"), tail = lines.slice(-10).join("\n");
    if (head.length > FOLD_CHARS / 2) head = head.slice(0, FOLD_CHARS / 2);
    if (tail.length > FOLD_CHARS / 2) tail = tail.slice(-FOLD_CHARS / 2);
    var hidden = text.length - head.length - tail.length;
    return '<pre class="output folded" data-step="' + s.i + '">' + esc(head) +
      '<span class="fold-note">… ' + lines.length + " lines, " + hidden.toLocaleString() + ' characters folded … <button class="unfold" data-step="' + s.i + '">show all ' + lines.length + " lines</button></span>" +
      esc(tail) + "</pre>";
  }
  // ------------------------------------------------------------------ diffs
  var DIFF_FOLD_LINES = 60;  // a diff longer than this starts collapsed
  function diffCounts(text) {
    var add = 0, del = 0;
    String(text || "").split("\n").forEach(function (l) {
      if (l[0] === "+" && l.slice(0, 4) !== "+++ ") add++;
      else if (l[0] === "-" && l.slice(0, 4) !== "--- ") del++;
    });
    return [add, del];
  }
  function diffPre(text) {
    return '<pre class="diff">' + String(text || "").replace(/\n$/, "").split("\n").map(function (l) {
      var c = l.slice(0, 3) === "+++" || l.slice(0, 3) === "---" ? "dh" : l[0] === "+" ? "da" : l[0] === "-" ? "dd" : l.slice(0, 2) === "@@" ? "dk" : l[0] === "[" ? "dn" : "";
      return c ? '<span class="' + c + '">' + esc(l) + "</span>" : esc(l);
    }).join("\n") + "</pre>";
  }
  // one file's change: a <details> open when the diff is short
  function fileDiffHtml(f) {
    var what = f.change || (f.new ? "added" : "changed");
    var label = '<span class="badge ' + (what === "added" ? "good" : what === "removed" ? "bad" : "info") + '">' + esc(what) + "</span> " +
      '<span class="path" title="' + esc(f.path) + '">' + esc(f.path) + "</span>";
    if (f.link) return '<div class="file-diff small">' + label + ' <span class="muted">a link (not followed)</span></div>';
    if (f.special) return '<div class="file-diff small">' + label + ' <span class="muted">not a regular file</span></div>';
    if (f.binary) return '<div class="file-diff small">' + label + ' <span class="muted">binary or larger than the viewer diffs' + (f.size != null ? " · " + esc(f.size) + " bytes" : "") + "</span></div>";
    if (f.diff == null) return '<div class="file-diff small">' + label + ' <span class="muted">' + esc(f.note || "no diff") + "</span></div>";
    var n = diffCounts(f.diff), lines = f.diff.split("\n").length;
    return '<details class="file-diff"' + (lines <= DIFF_FOLD_LINES ? " open" : "") + "><summary>" + label +
      ' <span class="da">+' + n[0] + '</span> <span class="dd">−' + n[1] + "</span>" + (lines > DIFF_FOLD_LINES ? ' <span class="muted small">(' + lines + " lines, click to show)</span>" : "") +
      "</summary>" + diffPre(f.diff) + "</details>";
  }
  function treeDiffHtml(w, empty) {
    if (!w) return "";
    var html = "";
    if (w.error) html += '<div class="small" style="color:var(--bad)">' + esc(w.error) + "</div>";
    if (w.note) html += '<div class="small muted">' + esc(w.note) + "</div>";
    var counts = { added: 0, removed: 0, changed: 0 };
    (w.files || []).forEach(function (f) { counts[f.change] = (counts[f.change] || 0) + 1; });
    html += '<div class="small diff-summary">' + counts.added + " added · " + counts.removed + " removed · " + counts.changed + " changed · " + (w.same || 0) + " unchanged" +
      (w.more ? " · " + w.more + " more not listed" : "") + ' <span class="muted">(against ' + esc(w.against) + ")</span></div>";
    html += (w.files || []).length ? w.files.map(fileDiffHtml).join("") : '<div class="muted small">' + esc(empty) + "</div>";
    return html;
  }

  function stepHtml(s) {
    var bad = s.e || (s.x != null && s.x !== 0) || s.rj;
    var cls = "step" + (bad ? " err" : "") + (s.v && s.v.valid ? " val" : "");
    var bits = ['<span class="idx">#' + s.i + "</span>", '<span class="tool">' + esc(s.t) + "</span>"];
    if (s.x != null) bits.push('<span class="badge ' + (s.x === 0 ? "" : "bad") + ' exit">exit ' + esc(s.x) + "</span>");
    if (s.e && s.x == null) bits.push('<span class="badge bad">error</span>');
    if (s.rj) bits.push('<span class="badge bad">edit refused</span>');
    if (s.to_) bits.push('<span class="badge bad">timed out</span>');
    if (s.tr) bits.push('<span class="badge warn">output truncated</span>');
    if (s.d != null) bits.push("<span>" + dur(s.d) + "</span>");
    if (s.el != null) bits.push('<span title="elapsed since the start">t+' + dur(s.el) + "</span>");
    if (s.ti || s.to) bits.push("<span>" + kilo(s.ti || 0) + " in / " + kilo(s.to || 0) + " out tok</span>");
    if (s.c) bits.push("<span>" + money(s.c) + "</span>");
    if (s.rt) bits.push('<span class="badge warn retries" title="failed model-call attempts that were retried">' + s.rt + " retr" + (s.rt > 1 ? "ies" : "y") + "</span>");
    var html = '<div class="' + cls + '" id="step-' + s.i + '" data-tool="' + esc(s.t) + '"><div class="head">' + bits.join("") + "</div>";
    if (s.th) {
      var th = s.th;
      html += th.length > 800 ? '<details class="thought"><summary>' + esc(th.slice(0, 300)) + "…</summary>" + esc(th) + "</details>" : '<div class="thought">' + esc(th) + "</div>";
    }
    html += actionHtml(s);
    if (s.df && s.df.length) html += '<div class="label">file change</div><div class="step-diff">' + s.df.map(fileDiffHtml).join("") + "</div>";
    if (s.ws) html += '<div class="label">workspace change ' + (s.ws.since ? "since the snapshot of step #" + esc(s.ws.since) : "since the start") + ' (the files the grader reads)</div><div class="step-diff snapshot-diff">' + treeDiffHtml(s.ws, "no change") + "</div>";
    if (s.v) {
      html += s.v.valid ? '<div class="validation good">validation: ' + scoresText(s.v.scores) + "</div>"
        : '<div class="validation bad">validation failed: ' + esc(s.v.error || "") + "</div>";
    }
    html += '<div class="label">observation</div>' + outputHtml(s);
    if (s.m && s.m.length) {
      var tin = 0, tout = 0, lat = 0, cost = 0;
      s.m.forEach(function (m) { tin += m[1]; tout += m[2]; cost += m[3] || 0; lat += m[4] || 0; });
      html += '<details class="calls"><summary>' + s.m.length + " model call" + (s.m.length > 1 ? "s" : "") + " · " + tin + " in / " + tout + " out tokens · " + lat.toFixed(2) + " s" + (cost ? " · " + money(cost) : "") + (s.rt ? " · " + s.rt + " failed attempt" + (s.rt > 1 ? "s" : "") + " retried" : "") + "</summary>" +
        s.m.map(function (m) {
          var retries = m[7] && m[7].length ? '<div class="small retries">' + (m[7].length + 1) + " attempts: " + m[7].map(function (r) {
            return "#" + esc(r[0]) + " " + (r[1] ? "HTTP " + esc(r[1]) + " " : "") + esc(r[2]) + (r[3] != null ? ", waited " + (+r[3]).toFixed(2) + " s" : "");
          }).join("; ") + "; #" + (m[7].length + 1) + " answered</div>" : "";
          return '<div class="small">' + esc(m[0] || "model") + " · " + m[1] + " in / " + m[2] + " out · " + (m[4] != null ? m[4] + " s" : "") + (m[5] ? " · stop: " + esc(m[5]) : "") + "</div>" + retries + (m[6] ? "<pre>" + esc(m[6]) + "</pre>" : "");
        }).join("") + "</details>";
    } else if (s.r) {
      html += '<details class="calls"><summary>raw agent output</summary><pre>' + esc(s.r) + "</pre></details>";
    }
    return html + "</div>";
  }

  app.addEventListener("click", function (ev) {
    var t = ev.target;
    if (t.classList.contains("unfold")) {
      var i = +t.getAttribute("data-step");
      var s = current.traj.steps.find(function (x) { return x.i === i; });
      var pre = t.closest("pre");
      pre.classList.remove("folded");
      pre.classList.add("unfolded");
      pre.innerHTML = esc(s.o);
      ev.preventDefault();
      return;
    }
    var link = t.closest(".step-link, circle.pt");
    if (link && current) { goToStep(+link.getAttribute("data-step")); ev.preventDefault(); }
  });

  // ------------------------------------------------------------------ routing and live refresh
  function route() {
    var m = /^#run=(\d+)(?:&step=(\d+))?/.exec(location.hash);
    if (m) renderRun(+m[1], m[2] ? +m[2] : null);
    else { current = null; renderList(); }
  }
  window.addEventListener("hashchange", route);
  document.getElementById("source").textContent = META.source + " · " + RUNS.length + " runs · written " + when(META.generated);
  if (META.live && /^https?:$/.test(location.protocol)) {
    document.getElementById("live").textContent = "● live";
    var y = sessionStorage.getItem("rgym-scroll");
    if (y) { sessionStorage.removeItem("rgym-scroll"); setTimeout(function () { window.scrollTo(0, +y); }, 50); }
    setInterval(function () {
      fetch("version", { cache: "no-store" }).then(function (r) { return r.text(); }).then(function (v) {
        if (v.trim() && v.trim() !== META.version) { sessionStorage.setItem("rgym-scroll", String(window.scrollY)); location.reload(); }
      }).catch(function () {});
    }, (META.poll_s || 2) * 1000);
  }
  route();
})();
