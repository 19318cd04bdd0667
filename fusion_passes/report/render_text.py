"""Plain-text rendering of a ``FusionReport``: a headline, then one tabulate table per section.

    fusion_passes report: LlamaForCausalLM
    torch 2.13.0 | patterns: attention_sdpa, ... | 3 graphs | 2 graph breaks | 4 matches | 1 near miss
    Intermediates no longer materialised: 96.0 KiB per call

    Graphs / Matches / Near misses / Graph breaks (+ hints and user stacks) / Op counts changed / Errors
"""

from __future__ import annotations

import os
import re
from typing import Sequence

from tabulate import tabulate

from .model import FusionReport, GraphBreak, format_bytes

__all__ = ["render_text", "summary_table", "short_path", "short_source", "ops_summary", "detail_summary"]

_SITE = os.sep + "site-packages" + os.sep


def short_path(path: str) -> str:
    """A path relative to the working directory when inside it; after site-packages/ for installed code."""
    if not path:
        return path
    cwd = os.getcwd() + os.sep
    if path.startswith(cwd):
        return path[len(cwd):]
    if _SITE in path:
        return path.split(_SITE, 1)[1]
    return path


def short_source(source: str, width: int = 90) -> str:
    """``/abs/model.py:12 in fwd: code`` -> ``model.py:12 in fwd: code``, cut to ``width``."""
    if not source:
        return "?"
    path, sep, rest = source.partition(":")
    text = short_path(path) + sep + rest
    return text if len(text) <= width else text[: width - 1] + "…"


def ops_summary(nodes: Sequence[str], width: int = 60) -> str:
    """``['mul=aten.mul', 'x=aten.add']`` -> ``'aten.mul, aten.add'`` (first occurrence of each op, in order)."""
    ops = []
    for n in nodes:
        op = n.split("=", 1)[1] if "=" in n else n
        if op not in ops:
            ops.append(op)
    text = ", ".join(ops)
    text = f"{len(nodes)}: {text}" if len(nodes) > 1 else text
    return text if len(text) <= width else text[: width - 1] + "…"


def detail_summary(detail: dict, width: int = 0) -> str:
    """``{"linears": 3, "bias": [False]*3}`` -> ``'linears=3, bias=[False, False, False]'`` (cut to ``width``)."""
    text = ", ".join(f"{k}={v}" for k, v in detail.items())
    return text if not width or len(text) <= width else text[: width - 1] + "…"


def _plural(n: int, word: str) -> str:
    if n == 1:
        return f"1 {word}"
    return f"{n} {word}es" if word.endswith(("ch", "sh", "s", "x")) else f"{n} {word}s"


def _between(b: GraphBreak) -> str:
    fmt = lambda g: "-" if g is None else str(g)  # noqa: E731
    return ", ".join(f"{fmt(x)}→{fmt(y)}" for x, y in b.between)


def headline(rep: FusionReport) -> str:
    parts = [
        f"torch {rep.torch_version}",
        f"patterns: {', '.join(rep.patterns) or '(none)'}",
        _plural(len(rep.graphs), "graph"),
        _plural(len(rep.breaks), "graph break"),
        _plural(len(rep.matches), "match"),
        _plural(len(rep.near_misses), "near miss"),
    ]
    if rep.errors:
        parts.append(_plural(len(rep.errors), "pass error"))
    if rep.kernels is not None:
        parts.append(_plural(rep.kernels, "kernel"))
    return " | ".join(parts)


def graphs_table(rep: FusionReport) -> str:
    rows = [
        (g.graph_id, g.compile_id or "-", g.num_nodes, "cached" if g.kernels is None else g.kernels, len(g.matches),
         len(g.near_misses), format_bytes(g.saved_bytes) if g.saved_bytes else "-", f"{g.compile_s:.2f}",
         f"{sum(g.pass_s.values()):.2f}", g.ended_by or "return")
        for g in rep.graphs
    ]
    headers = ["graph", "frame", "nodes", "kernels", "matches", "near misses", "saves", "compile s", "passes s",
               "ends at"]
    if any(g.cudagraphs for g in rep.graphs):  # only backend(cudagraphs="static") sets it
        rows = [(*row, g.cudagraphs or "-") for row, g in zip(rows, rep.graphs)]
        headers.append("CUDA graphs")
    return tabulate(rows, headers=headers, maxcolwidths=[None] * (len(headers) - 1) + [40])


def families_table(rep: FusionReport) -> str:
    rows = [(r["pattern"], r["matches"], r["near_misses"], format_bytes(r["saved_bytes"]) if r["saved_bytes"] else "-",
             _sources_summary(r["sources"])) for r in rep.by_pattern()]
    return tabulate(rows, headers=["pattern", "fired", "near misses", "saves", "where it fired"],
                    maxcolwidths=[None, None, None, None, 90])


def _sources_summary(sources: list[str], shown: int = 3) -> str:
    """The first ``shown`` distinct source lines (path:line only), then how many more."""
    # up to the line number, not the first " in ": a folder may be named "work in progress"
    lines = [re.sub(r"(:\d+) in .*", r"\1", short_source(s, 10**6), count=1, flags=re.S) for s in sources[:shown]]
    more = f" (+{len(sources) - shown} more)" if len(sources) > shown else ""
    return (", ".join(lines) + more) or "-"


def matches_table(rep: FusionReport, detail: bool = True) -> str:
    rows = [[m.graph_id, m.pattern, short_source(m.source, 110), ops_summary(m.replaced), ops_summary(m.inserted, 40),
             format_bytes(m.saved_bytes) if m.saved_bytes else "-", detail_summary(m.detail, 180) or "-"]
            for m in rep.matches]
    headers = ["graph", "pattern", "source", "replaced", "inserted", "saves", "detail"]
    widths = [None, None, 45, 30, 30, None, 45]
    if not detail:
        rows, headers, widths = [r[:-1] for r in rows], headers[:-1], widths[:-1]
    return tabulate(rows, headers=headers, maxcolwidths=widths)


def near_misses_table(rep: FusionReport) -> str:
    rows = [(n.graph_id, n.pattern, short_source(n.source, 60), count, n.reason)
            for n, count in rep.near_miss_groups()]
    return tabulate(rows, headers=["graph", "pattern", "source", "times", "why it did not fire"],
                    maxcolwidths=[None, None, 60, None, 70])


def breaks_table(rep: FusionReport) -> str:
    rows = [(i, b.reason, short_source(b.location, 60), b.count, _between(b),
             "; ".join(bf.pattern for bf in b.blocked) or "-")
            for i, b in enumerate(rep.breaks, 1)]
    table = tabulate(rows, headers=["#", "reason", "where", "count", "graphs (before→after)", "blocked"],
                     maxcolwidths=[None, 50, 60, None, 30, None])
    details = []
    for i, b in enumerate(rep.breaks, 1):
        lines = [f"#{i} {b.reason} at {short_source(b.location)}"]
        if b.explanation:
            lines.append(f"    why: {b.explanation}")
        lines += [f"    hint: {h}" for h in b.hints]
        lines += [f"    blocked {bf.pattern} (heuristic): {bf.why}" for bf in b.blocked]
        if b.skipped_frame:
            lines.append("    Dynamo could not resume after this break and ran the enclosing frame eagerly")
        if b.user_stack:
            lines.append("    user stack (innermost last):")
            lines += [f"      {short_source(f, 110)}" for f in b.user_stack]
        details.append("\n".join(lines))
    return table + "\n\n" + "\n".join(details)


def ops_table(rep: FusionReport) -> str:
    rows = [(g.graph_id, s.hook, op, before, after, f"{after - before:+d}")
            for g in rep.graphs for s in g.stages for op, (before, after) in s.ops_delta.items()]
    return tabulate(rows, headers=["graph", "hook", "op", "before", "after", "change"])


def errors_table(rep: FusionReport) -> str:
    rows = [(e.graph_id, e.pattern, e.error) for e in rep.errors]
    return tabulate(rows, headers=["graph", "pattern", "error (the graph was restored; compile continued)"],
                    maxcolwidths=[None, None, 100])


def _section(title: str, body: str, empty: str) -> str:
    return f"{title}\n{'-' * len(title)}\n{body if body.strip() else empty}\n"


def ops_line(rep: FusionReport) -> str:
    """Net op-count change over all graphs and hooks, e.g. ``aten.bmm -4, fusion_passes.rms_norm +2``."""
    net: dict[str, int] = {}
    for g in rep.graphs:
        for s in g.stages:
            for op, (before, after) in s.ops_delta.items():
                net[op] = net.get(op, 0) + after - before
    return ", ".join(f"{op} {d:+d}" for op, d in sorted(net.items()) if d) or "(no change)"


def _sections(rep: FusionReport, with_graphs: bool, with_breaks: bool, compact: bool = False) -> list[str]:
    out = []
    if with_graphs:
        out.append(_section("Compiled graphs", graphs_table(rep) if rep.graphs else "", "(no graph was compiled)"))
    if rep.matches or rep.near_misses:
        out.append(_section("Per family", families_table(rep), ""))
    out.append(_section("Matches", matches_table(rep, detail=not compact) if rep.matches else "", "(no pattern fired)"))
    out.append(_section("Near misses", near_misses_table(rep) if rep.near_misses else "", "(none)"))
    if with_breaks:
        out.append(_section("Graph breaks", breaks_table(rep) if rep.breaks else "", "(none: one graph per frame)"))
    if compact:
        out.append(f"Op counts changed by our passes (net): {ops_line(rep)}\n")
    else:
        changed = any(s.ops_delta for g in rep.graphs for s in g.stages)  # an empty table still has its header
        out.append(_section("Op counts changed by our passes", ops_table(rep) if changed else "",
                            "(no op count changed)"))
    if rep.errors:
        out.append(_section("Pass errors", errors_table(rep), ""))
    return out


def render_text(rep: FusionReport, diffs: bool = False) -> str:
    head = [f"fusion_passes report: {rep.target or '(unnamed)'}", headline(rep),
            f"Intermediates no longer materialised: {format_bytes(rep.saved_bytes)} per call", ""]
    body = _sections(rep, with_graphs=True, with_breaks=True)
    if diffs:
        texts = [s.diff(g.graph_id) for g in rep.graphs for s in g.stages if s.changed]
        body.append(_section("Graph diffs (before → after our passes)", "\n\n".join(texts), "(no graph changed)"))
    return "\n".join(head) + "\n".join(body)


def summary_table(recs, compact: bool = False) -> str:
    """The report's sections for ``GraphRecord``s gathered with ``fusion_passes.capture()`` (for ``demo``).

    Matches, near misses, op counts changed, pass errors, and the bytes no longer materialised.
    ``compact=True``: no match-detail column, and the op counts as one net line instead of a table.
    """
    from .collect import from_records

    rep = from_records(list(recs))
    head = (f"fusion_passes: {_plural(len(rep.graphs), 'graph')}, {_plural(len(rep.matches), 'match')}, "
            f"{_plural(len(rep.near_misses), 'near miss')}; intermediates no longer materialised: "
            f"{format_bytes(rep.saved_bytes)} per call\n")
    return head + "\n" + "\n".join(_sections(rep, with_graphs=False, with_breaks=False, compact=compact))
