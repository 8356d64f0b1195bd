"""The style and the script that every fathom page carries inline (report, comparison, gallery).

The script reads the page's data from the JSON block and builds every node that shows data with
``createElement`` and ``textContent``: no data ever passes through an HTML parser. Changing SCRIPT
changes its hash, which the page's Content-Security-Policy computes from it.
"""

from __future__ import annotations

STYLE = """
:root { --ink: #1d1d1f; --muted: #5f6368; --line: #d9d9d9; --soft: #f5f5f5; color: var(--ink);
  font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }
body { margin: 0 auto; max-width: 1280px; padding: 1rem 1.5rem 3rem; line-height: 1.45; }
h1 { font-size: 1.4rem; margin: .3rem 0; } h2 { font-size: 1.15rem; margin: 2rem 0 .6rem;
  border-bottom: 1px solid var(--line); } h3 { font-size: 1rem; margin: 1.2rem 0 .4rem; }
.muted, .legend, footer { color: var(--muted); font-size: .82rem; }
footer { margin-top: 3rem; }
.facts { display: grid; grid-template-columns: max-content 1fr; gap: .1rem 1rem; font-size: .85rem; }
.facts dt, .sample dt { color: var(--muted); } .facts dd, .sample dd { margin: 0; overflow-wrap: anywhere; }
.headline { display: flex; flex-wrap: wrap; gap: .7rem; margin: .8rem 0; }
.number { border: 1px solid var(--line); border-radius: 6px; padding: .45rem .8rem; min-width: 8rem; }
.number b { display: block; font-size: 1.3rem; } .number span { color: var(--muted); font-size: .78rem; }
.heatmap { display: inline-grid; gap: 2px; font-size: .75rem; margin: .4rem 0; }
.heatmap .cell, .heatmap .gap { min-width: 2.9rem; height: 1.75rem; display: flex; align-items: center;
  justify-content: center; border-radius: 2px; position: relative; }
.heatmap.compact .cell, .heatmap.compact .gap { min-width: 1.7rem; height: 1.05rem; font-size: .58rem; }
.heatmap.compact { font-size: .62rem; }
.cell[data-samples], .heatmap[data-report] .cell { cursor: pointer; }
.cell:focus-visible, .cell.selected { outline: 3px solid #111; outline-offset: -1px; z-index: 1; }
.cell.na, .swatch.na { background-color: #c8c8c8; }
.cell.wide, .swatch.wide { background-image: repeating-linear-gradient(45deg,
  var(--hatch, rgba(0, 0, 0, .28)) 0 1.5px, transparent 1.5px 6px); }
.swatch.wide { background-color: #888; }
.cell.beyond, .swatch.beyond { box-shadow: inset 0 -4px 0 rgba(0, 0, 0, .6); }
.cell.average { font-weight: 600; }
.cell.regressed { outline: 2px solid #67000d; outline-offset: -2px; font-weight: 700; }
.cell.improved { outline: 2px solid #00441b; outline-offset: -2px; font-weight: 700; }
.warning { border-left: 4px solid #b35806; background: #fff4e5; padding: .1rem .8rem; margin: .6rem 0; }
.head { color: var(--muted); display: flex; align-items: center; justify-content: center;
  padding: 0 .35rem; white-space: nowrap; }
.head.row { justify-content: flex-end; } .head.col.beyond { color: var(--ink); font-weight: 700; }
.head.col.beyond::after { content: " ▸"; }
.swatch { display: inline-block; min-width: 1.4em; height: 1.1em; padding: 0 .2em; border-radius: 2px;
  vertical-align: middle; font-size: .72rem; text-align: center; }
table { border-collapse: collapse; font-size: .84rem; margin: .4rem 0; }
th, td { border-bottom: 1px solid var(--line); padding: .2rem .6rem; text-align: right; }
th:first-child, td:first-child, th:nth-child(2), td:nth-child(2) { text-align: left; }
details { margin: .35rem 0; } details details { margin-left: 1.2rem; }
summary { cursor: pointer; }
.sample { border: 1px solid var(--line); border-radius: 6px; padding: .5rem .8rem; margin: .5rem 0; }
.sample.failed { border-left: 4px solid #d73027; } .sample.right { border-left: 4px solid #1a9850; }
.sample dl { display: grid; grid-template-columns: max-content 1fr; gap: .1rem .9rem; font-size: .84rem;
  margin: .4rem 0; }
.sample h4 { font-size: .82rem; margin: .6rem 0 .2rem; color: var(--muted); }
.badge { margin-left: .6rem; font-size: .78rem; color: var(--muted); }
pre { white-space: pre-wrap; overflow-wrap: anywhere; margin: 0; font-size: .8rem; background: var(--soft);
  padding: .35rem .5rem; border-radius: 4px; }
mark { background: #ffe066; }
.empty-output { font-style: italic; color: var(--muted); }
.gallery { display: flex; flex-wrap: wrap; gap: 1.5rem 2rem; }
.gallery figure { margin: 0; } .gallery h2 { margin: 0 0 .2rem; border: 0; }
.gallery figcaption p { margin: 0 0 .2rem; font-size: .8rem; max-width: 22rem; }
.pair { display: flex; flex-wrap: wrap; gap: 0 1.2rem; } .needles p { margin: .3rem 0 0; font-size: .78rem; }
img { max-width: 100%; }
"""

SCRIPT = """
"use strict";
(() => {
  const data = JSON.parse(document.getElementById("fathom-data").textContent);
  const samples = data.samples || [];
  const lists = data.lists || {};
  const labels = data.labels || {};

  function make(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  const percent = (x) => (100 * x).toFixed(1) + "%";

  // The text with every expected answer marked: text nodes and <mark> elements, never markup.
  function marked(text, answers) {
    const pre = make("pre", "context");
    const lower = text.toLowerCase();
    // Lower-casing can change a string's length (a few Unicode letters): then mark nothing.
    const wanted = lower.length === text.length ? answers.filter((a) => a).map((a) => a.toLowerCase()) : [];
    let at = 0;
    for (;;) {
      let first = -1;
      let size = 0;
      for (const answer of wanted) {
        const found = lower.indexOf(answer, at);
        if (found >= 0 && (first < 0 || found < first)) { first = found; size = answer.length; }
      }
      if (first < 0) break;
      pre.append(text.slice(at, first), make("mark", null, text.slice(first, first + size)));
      at = first + size;
    }
    pre.append(text.slice(at));
    return pre;
  }

  function field(list, name, value) {
    const dd = make("dd");
    if (value instanceof Node) dd.append(value); else dd.textContent = String(value);
    list.append(make("dt", null, name), dd);
  }

  function card(s) {
    const article = make("article", "sample " + (s.failure ? "failed" : "right"));
    const head = make("header");
    const verdict = s.failure ? labels[s.failure] : "right";
    head.append(make("code", "sample-id", s.id), make("span", "badge", verdict));
    const facts = make("dl");
    field(facts, "question", s.question);
    field(facts, "expected", s.answers.join(" | "));
    const blank = make("span", "empty-output", "empty output");
    field(facts, "answer", s.output === "" ? blank : make("pre", "output", s.output));
    if (s.extracted !== null) field(facts, "graded as", make("pre", "output", s.extracted));
    if (s.lured.length) field(facts, "also named", s.lured.join(" | "));
    field(facts, "score", s.score + " (" + s.scoring + ")");
    field(facts, "matched", s.matched.length ? s.matched.join(" | ") : "none");
    const beyond = s.beyond ? ", beyond the trained window" : "";
    field(facts, "tokens", s.tokens + " (target " + s.target + ")" + beyond);
    const depths = s.needle_depths.map(percent).join(", ");
    field(facts, "needle depth", depths || "no needles");
    field(facts, "latency", (1000 * s.latency_s).toFixed(1) + " ms, finish: " + s.finish);
    if (s.error !== null) field(facts, "error", s.error);
    article.append(head, facts);
    if (s.context === null) {
      const note = "prompt around the needle: not recorded (the record predates it)";
      article.append(make("p", "muted", note));
    }
    (s.context || []).forEach((text, i) => {
      const title = "prompt around needle " + (i + 1) + " of " + s.context.length;
      article.append(make("h4", null, title), marked(text, s.answers));
    });
    return article;
  }

  function fill(box, name) {
    box.replaceChildren(...(lists[name] || []).map((i) => card(samples[i])));
  }

  const panel = document.getElementById("panel");
  function select(cell) {
    for (const other of document.querySelectorAll(".cell.selected")) other.classList.remove("selected");
    cell.classList.add("selected");
    panel.querySelector(".panel-title").textContent = cell.title;
    fill(panel.querySelector(".samples"), cell.dataset.samples);
    panel.hidden = false;
  }
  for (const cell of document.querySelectorAll(".cell[data-samples]")) {
    cell.addEventListener("click", () => select(cell));
    cell.addEventListener("keydown", (event) => {
      if (event.key === "Enter" || event.key === " ") { event.preventDefault(); select(cell); }
    });
  }

  for (const details of document.querySelectorAll("details[data-samples]")) {
    details.addEventListener("toggle", () => {
      const box = details.querySelector(":scope > .samples");
      if (details.open && !box.childElementCount) fill(box, details.dataset.samples);
    });
  }

  // The gallery: a click opens the archetype's report at that cell.
  for (const map of document.querySelectorAll(".heatmap[data-report]")) {
    for (const cell of map.querySelectorAll(".cell[data-key]")) {
      cell.addEventListener("click", () => {
        window.location.href = map.dataset.report + "#" + encodeURIComponent(cell.dataset.key);
      });
    }
  }
  // A report opened at a cell (report.html#KEY) selects it.
  if (window.location.hash.length > 1) {
    const key = decodeURIComponent(window.location.hash.slice(1));
    const cell = [...document.querySelectorAll(".cell[data-samples]")].find((c) => c.dataset.key === key);
    if (cell) { select(cell); cell.scrollIntoView({ block: "center" }); }
  }
})();
"""
