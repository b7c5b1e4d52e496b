/* rageval report: filter the cases table and open a case, from the page's own data block.
   No framework, nothing fetched; every text is written with textContent. */
(function () {
  "use strict";
  var root = document.documentElement;
  root.classList.remove("no-js");
  root.classList.add("js");
  var table = document.getElementById("case-table");
  var rows = table ? Array.prototype.slice.call(table.tBodies[0].rows) : [];
  var gate = root.getAttribute("data-mode") === "gate";
  var data = null, byId = {}, hay = [], opened = null;
  var PAGE = 200;                         // rows shown at a time: a long table stays quick to lay out
  var state = { q: "", status: "", slice: "", check: "", rank: null, limit: PAGE };

  function fold(s) {
    return String(s).normalize("NFD").replace(/[\u0300-\u036f]/g, "").replace(/[đĐ]/g, "d").toLowerCase();
  }

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) { node.className = cls; }
    if (text !== undefined && text !== null) { node.textContent = String(text); }
    return node;
  }

  function load() {
    var block = document.getElementById("rageval-data");
    var text = block.textContent;
    if (block.getAttribute("data-encoding") !== "gzip-base64") {
      return Promise.resolve(JSON.parse(text));
    }
    if (typeof DecompressionStream === "undefined") {
      return Promise.reject(new Error("this browser cannot read the compressed case data (it needs " +
        "DecompressionStream: Chrome 80, Firefox 113, Safari 16.4 or later)"));
    }
    var binary = atob(text), bytes = new Uint8Array(binary.length);
    for (var i = 0; i < binary.length; i++) { bytes[i] = binary.charCodeAt(i); }
    var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return new Response(stream).text().then(JSON.parse);
  }

  function sideOf(c) { return c.after || c.before; }

  function failing(side) {
    return side ? side.checks.filter(function (k) { return k[1] === "fail" || k[1] === "error"; })
      .map(function (k) { return k[0]; }) : [];
  }

  function level(rank, top) {
    if (rank === null || rank === undefined) { return "—"; }
    return top && rank >= 10 ? "10+" : String(rank);
  }

  function matches(c, i) {
    var side = sideOf(c);
    if (state.q && hay[i].indexOf(state.q) < 0) { return false; }
    if (state.slice && c.slice.indexOf(state.slice) < 0) { return false; }
    if (state.check && failing(side).indexOf(state.check) < 0) { return false; }
    if (state.status === "failing" && !(c.after && (c.after.status === "fail" || c.after.status === "error"))) { return false; }
    if (state.status === "error" && !((c.after && c.after.status === "error") || (c.before && c.before.status === "error"))) { return false; }
    if (state.status && ["failing", "error"].indexOf(state.status) < 0 && c.change !== state.status) { return false; }
    if (state.rank) {
      if (!c.before || !c.after) { return false; }
      var top = state.rank.top;
      if (level(c.before.rank, top) !== state.rank.before || level(c.after.rank, top) !== state.rank.after) { return false; }
    }
    return true;
  }

  function apply() {
    var matched = 0, shown = 0;
    rows.forEach(function (row) {
      var i = +row.getAttribute("data-i");
      var isOpen = opened !== null && opened.row === row;
      var hit = matches(data.cases[i], i);
      if (hit) { matched++; }
      var ok = isOpen || (hit && matched <= state.limit);
      if (row.hidden === ok) { row.hidden = !ok; }
      if (ok) { shown++; }
    });
    if (opened) { opened.detail.hidden = opened.row.hidden; }
    var count = document.getElementById("f-count");
    if (shown >= matched) {
      count.textContent = matched === rows.length ? rows.length + " cases" : "showing " + matched + " of " + rows.length + " cases";
    } else {
      count.textContent = "showing " + shown + " of " + matched + " matching cases (" + rows.length + " in all)";
    }
    var more = document.getElementById("f-more");
    more.hidden = matched <= state.limit;
    more.textContent = "Show " + Math.min(PAGE, Math.max(0, matched - state.limit)) + " more cases";
  }

  function marked(text, marks) {
    var p = el("p", "answer");
    var at = 0;
    (marks || []).forEach(function (m) {
      if (m[0] < at) { return; }
      p.appendChild(document.createTextNode(text.slice(at, m[0])));
      var mk = el("mark", null, text.slice(m[0], m[1]));
      mk.title = "this number differs from the other answer";
      p.appendChild(mk);
      at = m[1];
    });
    p.appendChild(document.createTextNode(text.slice(at)));
    return p;
  }

  function chunkList(side, expected) {
    var list = el("ol", "chunks");
    side.retrieved.forEach(function (item) {
      var chunk = data.chunks[item[0]];
      var relevant = chunk.sections.some(function (s) { return expected.indexOf(s) >= 0; });
      var li = el("li", relevant ? "rel" : "");
      li.appendChild(el("code", null, chunk.id));
      if (item[1] !== null) { li.appendChild(document.createTextNode(" · score " + item[1].toFixed(3) + " · ")); }
      chunk.sections.forEach(function (s) {
        var chip = el("span", expected.indexOf(s) >= 0 ? "chip exp" : "chip", expected.indexOf(s) >= 0 ? s + " ✓" : s);
        if (expected.indexOf(s) >= 0) { chip.title = "an expected section"; }
        li.appendChild(chip);
      });
      var more = el("details");
      more.appendChild(el("summary", null, chunk.text.slice(0, 90) + (chunk.text.length > 90 ? "…" : "")));
      more.appendChild(el("div", "chunk-text", chunk.text));
      li.appendChild(more);
      list.appendChild(li);
    });
    return list;
  }

  function sideView(title, side, c, other) {
    var box = el("section", "side");
    var h = el("h4", null, title + " ");
    box.appendChild(h);
    if (!side) {
      box.appendChild(el("p", null, gate ? "Not in this run." : ""));
      return box;
    }
    h.appendChild(el("span", "st st-" + side.status.replace("/", ""), side.status));
    box.appendChild(el("p", null, "First relevant rank: " + (side.rank === null ? "not retrieved" : side.rank)));
    if (side.error) { box.appendChild(el("p", "error-banner", "Error: " + side.error)); }
    if (side.answer === null) {
      box.appendChild(el("p", "answer", "(no answer: retrieval-only case)"));
    } else {
      box.appendChild(marked(side.answer, side.marks));
      if (side.differ.length) {
        box.appendChild(el("p", "footnote", "Numbers " + (gate ? "only in this answer" : "the expected answer does not state") +
          ": " + side.differ.join(", ")));
      }
    }
    box.appendChild(el("h5", null, "Checks"));
    var checks = el("table", "checks"), body = el("tbody");
    side.checks.forEach(function (k) {
      var tr = el("tr");
      tr.appendChild(el("th", null, k[0]));
      var td = el("td");
      td.appendChild(el("span", "st st-" + k[1], k[1]));
      tr.appendChild(td);
      tr.appendChild(el("td", null, k[2]));
      body.appendChild(tr);
    });
    checks.appendChild(body);
    box.appendChild(checks);
    if (side.retrieved) {
      box.appendChild(el("h5", null, "Retrieved chunks (" + side.retrieved.length + ")"));
      box.appendChild(chunkList(side, c.sections));
    }
    return box;
  }

  function detailView(c) {
    var art = el("article", "case-detail");
    var close = el("button", "close", "Close (Esc)");
    close.type = "button";
    close.addEventListener("click", function () { shut(true); });
    art.appendChild(close);
    var h = el("h3", null, c.id);
    h.tabIndex = -1;
    art.appendChild(h);
    art.appendChild(el("p", null, "Question: " + c.question));
    if (c.expected) { art.appendChild(el("p", null, "Expected: " + c.expected)); }
    var secs = el("p", null, "Expected sections: ");
    c.sections.forEach(function (s) { secs.appendChild(el("span", "chip exp", s)); });
    if (!c.sections.length) { secs.appendChild(document.createTextNode("none (out of scope)")); }
    art.appendChild(secs);
    if (c.slice.length) { art.appendChild(el("p", "footnote", "Slice: " + c.slice.join(", "))); }
    var sides = el("div", "sides");
    if (gate) { sides.appendChild(sideView("Baseline", c.before, c, c.after)); }
    sides.appendChild(sideView(gate ? "PR" : "Answer", c.after, c, c.before));
    art.appendChild(sides);
    return art;
  }

  function shut(restoreFocus, reopening) {
    if (!opened) { return; }
    var row = opened.row;
    opened.detail.remove();
    row.classList.remove("open");
    opened = null;
    if (location.hash.indexOf("#case=") === 0) { history.replaceState(null, "", location.pathname + location.search); }
    if (restoreFocus) { row.querySelector("a").focus(); }
    if (!reopening) { apply(); }
  }

  function open(id) {
    var i = byId[id];
    if (i === undefined) { return false; }
    shut(false, true);
    var row = rows[i];
    var tr = el("tr", "detail"), td = el("td");
    td.colSpan = row.cells.length;
    td.appendChild(detailView(data.cases[i]));
    tr.appendChild(td);
    row.parentNode.insertBefore(tr, row.nextSibling);
    row.classList.add("open");
    opened = { row: row, detail: tr };
    if (row.hidden) { apply(); }
    td.querySelector("h3").focus();          // and scrolled into view: one layout, not two
    return true;
  }

  function route() {
    var m = /^#case=(.*)$/.exec(location.hash);
    if (m) { open(decodeURIComponent(m[1])); }
  }

  function setRank(before, after, top) {
    var holder = document.getElementById("f-rank");
    holder.textContent = "";
    document.querySelectorAll(".grid .cell.active").forEach(function (c) { c.classList.remove("active"); });
    state.rank = before === null ? null : { before: before, after: after, top: top };
    state.limit = PAGE;
    if (state.rank) {
      var b = el("button", null, "rank " + before + " → " + after + " ✕");
      b.type = "button";
      b.title = "show every rank again";
      b.addEventListener("click", function () { setRank(null); });
      holder.appendChild(b);
    }
    holder.hidden = !state.rank;
    apply();
  }

  function wire() {
    var grid = document.querySelector(".grid");
    var top = grid ? Array.prototype.some.call(grid.querySelectorAll(".cell"), function (c) {
      return c.getAttribute("data-before") === "10+" || c.getAttribute("data-after") === "10+";
    }) : false;
    [["f-q", "q", "input"], ["f-status", "status", "change"], ["f-slice", "slice", "change"], ["f-check", "check", "change"]]
      .forEach(function (spec) {
        var input = document.getElementById(spec[0]);
        input.addEventListener(spec[2], function () {
          state[spec[1]] = spec[1] === "q" ? fold(input.value.trim()) : input.value;
          state.limit = PAGE;
          apply();
        });
      });
    if (table) {
      table.tBodies[0].addEventListener("click", function (ev) {
        var row = ev.target.closest("tr[data-i]");
        if (!row || ev.target.closest("a")) { return; }
        location.hash = "case=" + encodeURIComponent(data.cases[+row.getAttribute("data-i")].id);
      });
    }
    if (grid) {
      grid.addEventListener("click", function (ev) {
        var dot = ev.target.closest("circle[data-case]");
        if (dot) { location.hash = "case=" + encodeURIComponent(dot.getAttribute("data-case")); ev.preventDefault(); return; }
        var cell = ev.target.closest(".cell");
        if (cell) {
          ev.preventDefault();
          setRank(cell.getAttribute("data-before"), cell.getAttribute("data-after"), top);
          cell.classList.add("active");
          table.scrollIntoView({ block: "start" });
        }
      });
      grid.addEventListener("mouseover", function (ev) {
        var dot = ev.target.closest("circle[data-case]");
        if (dot && !dot.firstChild) {
          var t = document.createElementNS("http://www.w3.org/2000/svg", "title");
          t.textContent = dot.getAttribute("data-case");
          dot.appendChild(t);
        }
      });
    }
    document.getElementById("f-more").addEventListener("click", function () {
      state.limit += PAGE;
      apply();
    });
    document.addEventListener("keydown", function (ev) { if (ev.key === "Escape" && opened) { shut(true); } });
    window.addEventListener("hashchange", route);
  }

  function fail(err) {
    console.error("rageval report: " + err.message);
    var banner = el("p", "error-banner", "The case data could not be read: " + err.message);
    var cases = document.getElementById("cases");
    if (cases) { cases.insertBefore(banner, cases.children[1] || null); }
    root.setAttribute("data-ready", "error");
  }

  load().then(function (d) {
    data = d;
    data.cases.forEach(function (c, i) {
      byId[c.id] = i;
      var parts = [c.id, c.question, c.expected, c.slice.join(" ")];
      [c.before, c.after].forEach(function (s) {
        if (s) { parts.push(s.answer || "", s.error || ""); s.checks.forEach(function (k) { parts.push(k[0], k[2]); }); }
      });
      hay.push(fold(parts.join("\n")));
    });
    wire();
    apply();
    route();
    root.setAttribute("data-ready-ms", String(Math.round(performance.now())));   // since navigation started
    root.setAttribute("data-ready", "1");
  }).catch(fail);
})();
