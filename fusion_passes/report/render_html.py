"""One self-contained HTML page for a ``FusionReport``: inline CSS and JS, nothing fetched.

Sections (each a ``<section id=...>``): ``summary`` (the headline bytes figure), ``graphs``, ``matches``,
``near-misses``, ``graph-breaks``, ``op-counts``, ``diffs`` (one collapsible ``<details class="diff">`` per
graph and hook, unified diff coloured line by line), ``errors`` when a family failed. The report's JSON
(``report.to_dict(code=False)``) is embedded in ``<script type="application/json" id="report-data">`` for tools.
"""

from __future__ import annotations

import html
import json

from .model import FusionReport, GraphBreak, format_bytes
from .render_text import headline, ops_summary, short_source

__all__ = ["render_html"]

_CSS = """
:root { --fg:#1d2330; --muted:#5f6b7a; --line:#d9dee5; --bg:#ffffff; --alt:#f5f7fa; --accent:#2458c6;
        --add:#e6f6ea; --add-fg:#17692f; --del:#fbe9ea; --del-fg:#9b1c24; --warn:#fff4d6; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg); background: var(--bg);
       margin: 0 auto; max-width: 1200px; padding: 24px; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 18px; margin: 28px 0 8px; border-bottom: 1px solid var(--line); }
.meta, .note { color: var(--muted); } .note { font-size: 13px; }
nav a { margin-right: 12px; color: var(--accent); text-decoration: none; }
.headline { margin: 16px 0; padding: 14px 18px; background: var(--alt); border-left: 4px solid var(--accent); }
.headline .big { font-size: 26px; font-weight: 600; margin-right: 8px; }
.cards { display: flex; gap: 12px; flex-wrap: wrap; margin: 8px 0 0; }
.card { padding: 6px 12px; border: 1px solid var(--line); border-radius: 6px; background: #fff; }
.card b { font-size: 16px; }
table { border-collapse: collapse; width: 100%; margin: 6px 0 12px; font-size: 13px; }
th, td { text-align: left; padding: 5px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { background: var(--alt); font-weight: 600; } tbody tr:hover { background: #fafbfd; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
code, pre { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12px; }
pre { margin: 0; padding: 8px; background: var(--alt); overflow-x: auto; }
pre.diff span { display: block; white-space: pre; }
pre.diff .add { background: var(--add); color: var(--add-fg); } pre.diff .del { background: var(--del); color: var(--del-fg); }
pre.diff .hunk { color: var(--accent); } pre.diff .file { color: var(--muted); font-weight: 600; }
details { margin: 6px 0; border: 1px solid var(--line); border-radius: 6px; }
details > summary { cursor: pointer; padding: 6px 10px; background: var(--alt); }
details > *:not(summary) { margin: 8px 10px; }
.break-detail ul { margin: 4px 0 4px 18px; padding: 0; }
.blocked { background: var(--warn); padding: 2px 6px; border-radius: 4px; }
.toolbar { margin: 8px 0; } .toolbar button { margin-right: 6px; } .toolbar input { margin-left: 12px; padding: 3px 6px; }
.empty { color: var(--muted); font-style: italic; }
"""

_JS = """
(function () {
  "use strict";
  function setAll(open) {
    document.querySelectorAll("details.diff").forEach(function (d) { d.open = open; });
  }
  var expand = document.getElementById("expand-all");
  var collapse = document.getElementById("collapse-all");
  if (expand) { expand.addEventListener("click", function () { setAll(true); }); }
  if (collapse) { collapse.addEventListener("click", function () { setAll(false); }); }
  var filter = document.getElementById("filter");
  if (filter) {
    filter.addEventListener("input", function () {
      var q = filter.value.toLowerCase();
      document.querySelectorAll("table.data tbody tr").forEach(function (tr) {
        tr.style.display = tr.textContent.toLowerCase().indexOf(q) >= 0 ? "" : "none";
      });
    });
  }
  var data = document.getElementById("report-data");
  if (data) { window.fusionReport = JSON.parse(data.textContent); }
  document.documentElement.setAttribute("data-ready", "1");  // the page's script ran to the end
})();
"""

e = html.escape


def _table(headers: list[str], rows: list[list[str]], cls: str, num_cols: tuple[int, ...] = ()) -> str:
    """Cells in ``rows`` are already HTML; headers are text."""
    head = "".join(f'<th{" class=num" if i in num_cols else ""}>{e(h)}</th>' for i, h in enumerate(headers))
    body = "".join(
        "<tr>" + "".join(f'<td{" class=num" if i in num_cols else ""}>{c}</td>' for i, c in enumerate(r)) + "</tr>"
        for r in rows
    )
    return f'<table class="data {cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _section(sid: str, title: str, body: str, empty: str) -> str:
    return f'<section id="{sid}"><h2>{e(title)}</h2>{body or f"<p class=empty>{e(empty)}</p>"}</section>'


def _diff_id(graph_id: int, hook: str) -> str:
    return f"diff-g{graph_id}-{hook}"


def _graph_link(rep: FusionReport, graph_id) -> str:
    if graph_id is None:
        return "–"
    for g in rep.graphs:
        if g.graph_id == graph_id:
            changed = [s for s in g.stages if s.changed]
            if changed:
                return f'<a href="#{_diff_id(graph_id, changed[0].hook)}">{graph_id}</a>'
    return str(graph_id)


def _summary(rep: FusionReport) -> str:
    cards = [("graphs", len(rep.graphs)), ("graph breaks", len(rep.breaks)), ("matches", len(rep.matches)),
             ("near misses", len(rep.near_misses)), ("pass errors", len(rep.errors)),
             ("kernels", "–" if rep.kernels is None else rep.kernels)]
    cards_html = "".join(f'<span class="card"><b>{e(str(v))}</b> {e(k)}</span>' for k, v in cards)
    return (f'<section id="summary"><div class="headline"><span class="big" id="saved-bytes">'
            f'{e(format_bytes(rep.saved_bytes))}</span>of intermediate tensors no longer materialised per call '
            f'<span class="note">(sum of the matches\' saved bytes, from tensor metadata)</span>'
            f'<div class="cards">{cards_html}</div></div></section>')


def _graphs(rep: FusionReport) -> str:
    rows = [[_graph_link(rep, g.graph_id), e(g.compile_id or "–"), str(g.num_nodes),
             "cached" if g.kernels is None else str(g.kernels), str(len(g.matches)), str(len(g.near_misses)),
             e(format_bytes(g.saved_bytes)) if g.saved_bytes else "–", f"{g.compile_s:.2f}",
             f"{sum(g.pass_s.values()):.2f}", e(g.ended_by or "return"), f"<code>{e(', '.join(g.head_ops))}</code>",
             f"<code>{e(', '.join(g.tail_ops))}</code>"] for g in rep.graphs]
    headers = ["graph", "Dynamo frame", "nodes", "kernels", "matches", "near misses", "saves", "compile s",
               "passes s", "ends at", "first ops", "last ops"]
    if any(g.cudagraphs for g in rep.graphs):  # only backend(cudagraphs="static") sets it
        rows = [row + [e(g.cudagraphs or "–")] for row, g in zip(rows, rep.graphs)]
        headers.append("CUDA graphs")
    table = _table(headers, rows, "graphs", num_cols=(2, 3, 4, 5, 7, 8))
    return _section("graphs", "Compiled graphs", table if rows else "", "No graph was compiled.")


def _families(rep: FusionReport) -> str:
    rows = [[e(r["pattern"]), str(r["matches"]), str(r["near_misses"]),
             e(format_bytes(r["saved_bytes"])) if r["saved_bytes"] else "–",
             "<br>".join(f"<code>{e(short_source(src, 120))}</code>" for src in r["sources"]) or "–"]
            for r in rep.by_pattern()]
    table = _table(["pattern", "fired", "near misses", "saves", "where it fired"], rows, "families",
                   num_cols=(1, 2, 3))
    return _section("families", "Per family", table if rows else "", "No family fired or almost fired.")


def _matches(rep: FusionReport) -> str:
    rows = [[_graph_link(rep, m.graph_id), e(m.pattern), f"<code>{e(short_source(m.source, 120))}</code>",
             f'<code title="{e(", ".join(m.replaced))}">{e(ops_summary(m.replaced, 80))}</code>',
             f'<code title="{e(", ".join(m.inserted))}">{e(ops_summary(m.inserted, 60))}</code>',
             e(format_bytes(m.saved_bytes)) if m.saved_bytes else "–",
             "<br>".join(f"{e(str(k))}: <code>{e(str(v))}</code>" for k, v in m.detail.items()) or "–"]
            for m in rep.matches]
    table = _table(["graph", "pattern", "source", "replaced", "inserted", "saves", "detail"], rows, "matches",
                   num_cols=(5,))
    return _section("matches", "Matches", table if rows else "", "No pattern fired.")


def _near_misses(rep: FusionReport) -> str:
    rows = [[_graph_link(rep, n.graph_id), e(n.pattern), f"<code>{e(short_source(n.source, 120))}</code>", str(count),
             e(n.reason)] for n, count in rep.near_miss_groups()]
    table = _table(["graph", "pattern", "source", "times", "why it did not fire (what to change)"], rows,
                   "near-misses", num_cols=(3,))
    return _section("near-misses", "Near misses", table if rows else "", "None.")


def _break_detail(i: int, b: GraphBreak) -> str:
    parts = []
    if b.explanation:
        parts.append(f"<p>{e(b.explanation)}</p>")
    if b.hints:
        parts.append("<ul>" + "".join(f"<li>{e(h)}</li>" for h in b.hints) + "</ul>")
    for bf in b.blocked:
        parts.append(f'<p><span class="blocked">blocked {e(bf.pattern)}</span> (heuristic) {e(bf.why)}</p>')
    if b.skipped_frame:
        parts.append("<p>Dynamo could not resume after this break and ran the enclosing frame eagerly.</p>")
    if b.user_stack:
        parts.append("<p>User stack (innermost last):</p><pre>" + e("\n".join(short_source(f, 160) for f in b.user_stack))
                     + "</pre>")
    if b.url:
        parts.append(f"<p class=note>More: <code>{e(b.url)}</code></p>")
    return (f'<details class="break-detail" id="break-{i}"><summary>#{i} {e(b.reason)} at '
            f"<code>{e(short_source(b.location))}</code> ×{b.count}</summary>{''.join(parts)}</details>")


def _breaks(rep: FusionReport) -> str:
    if not rep.breaks:
        return _section("graph-breaks", "Graph breaks", "", "None: Dynamo captured each frame as one graph.")
    rows = []
    for i, b in enumerate(rep.breaks, 1):
        between = ", ".join(f"{_graph_link(rep, x)} → {_graph_link(rep, y)}" for x, y in b.between)
        blocked = ", ".join(f'<span class="blocked">{e(bf.pattern)}</span>' for bf in b.blocked) or "–"
        rows.append([f'<a href="#break-{i}">{i}</a>', e(b.reason), f"<code>{e(short_source(b.location))}</code>",
                     str(b.count), between, blocked])
    table = _table(["#", "reason", "where", "count", "graphs (before → after)", "blocked fusion"], rows, "breaks",
                   num_cols=(3,))
    note = ('<p class="note">Graphs are numbered in compile order; “blocked fusion” is a heuristic on the ops at '
            "the end of the graph before the break and the start of the graph after it.</p>")
    details = "".join(_break_detail(i, b) for i, b in enumerate(rep.breaks, 1))
    return _section("graph-breaks", "Graph breaks", table + note + details, "")


def _ops(rep: FusionReport) -> str:
    rows = [[_graph_link(rep, g.graph_id), e(s.hook), f"<code>{e(op)}</code>", str(b), str(a), f"{a - b:+d}"]
            for g in rep.graphs for s in g.stages for op, (b, a) in s.ops_delta.items()]
    table = _table(["graph", "hook", "op", "before", "after", "change"], rows, "op-counts", num_cols=(3, 4, 5))
    return _section("op-counts", "Op counts changed by our passes", table if rows else "", "No op count changed.")


def _diff_html(diff: str) -> str:
    lines = []
    for line in diff.splitlines():
        if line.startswith(("+++", "---")):
            cls = "file"
        elif line.startswith("@@"):
            cls = "hunk"
        elif line.startswith("+"):
            cls = "add"
        elif line.startswith("-"):
            cls = "del"
        else:
            cls = "ctx"
        lines.append(f'<span class="{cls}">{e(line) or " "}</span>')
    return '<pre class="diff">' + "".join(lines) + "</pre>"


def _diffs(rep: FusionReport) -> str:
    blocks = []
    for g in rep.graphs:
        for s in g.stages:
            if not s.changed:
                continue
            diff = s.diff(g.graph_id)
            added = sum(1 for ln in diff.splitlines() if ln.startswith("+") and not ln.startswith("+++"))
            removed = sum(1 for ln in diff.splitlines() if ln.startswith("-") and not ln.startswith("---"))
            blocks.append(f'<details class="diff" id="{_diff_id(g.graph_id, s.hook)}"><summary>graph {g.graph_id} · '
                          f"{e(s.hook)} · +{added} −{removed} lines</summary>{_diff_html(diff)}</details>")
    toolbar = ('<div class="toolbar"><button type="button" id="expand-all">Expand all</button>'
               '<button type="button" id="collapse-all">Collapse all</button></div>')
    return _section("diffs", "Graph diffs (before → after our passes)", toolbar + "".join(blocks) if blocks else "",
                    "Our passes changed no graph.")


def _errors(rep: FusionReport) -> str:
    if not rep.errors:
        return ""
    rows = [[_graph_link(rep, x.graph_id), e(x.pattern), f"<code>{e(x.error)}</code>"] for x in rep.errors]
    return _section("errors", "Pass errors (graph restored, compile continued)",
                    _table(["graph", "pattern", "error"], rows, "errors"), "")


def _embedded_json(rep: FusionReport) -> str:
    text = json.dumps(rep.to_dict(code=False), default=str)  # the page shows diffs; full code is in to_json()
    # no "<" at all inside <script> (so no "</script>" or "<!--"); JSON.parse reads the \\u escapes back
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def render_html(rep: FusionReport) -> str:
    title = f"fusion_passes report: {rep.target or '(unnamed)'}"
    nav = "".join(f'<a href="#{sid}">{e(t)}</a>' for sid, t in (
        ("graphs", "Graphs"), ("families", "Per family"), ("matches", "Matches"), ("near-misses", "Near misses"),
        ("graph-breaks", "Graph breaks"), ("op-counts", "Op counts"), ("diffs", "Diffs")))
    body = "".join([_summary(rep), _graphs(rep), _families(rep), _matches(rep), _near_misses(rep), _breaks(rep),
                    _ops(rep), _diffs(rep), _errors(rep)])
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>{e(title)}</title>
<style>{_CSS}</style>
</head>
<body>
<header>
<h1>{e(title)}</h1>
<p class="meta">{e(headline(rep))} · fusion_passes {e(rep.fusion_passes_version)} · {rep.compile_s:.1f} s</p>
<nav>{nav}<input type="search" id="filter" placeholder="filter tables" aria-label="filter tables"></nav>
</header>
<main>
{body}
</main>
<script type="application/json" id="report-data">{_embedded_json(rep)}</script>
<script>{_JS}</script>
</body>
</html>
"""

