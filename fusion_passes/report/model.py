"""The ``FusionReport`` data model: what one compile did, in plain dataclasses.

    FusionReport
      graphs:  [GraphReport]      one per graph Dynamo handed to our backend, in compile order
        stages:  [StageReport]    the graph at each hook (joint / post_grad) before and after our passes
        matches, near_misses, errors   the foundation's records (fusion_passes.records)
      breaks:  [GraphBreak]       deduplicated graph breaks, with the graphs each one separates

Everything here is built by ``collect.py`` and read by the renderers; ``to_dict()`` is the stable JSON schema
(``SCHEMA``), so tools can read ``report.to_json()`` without importing this package.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
from dataclasses import dataclass, field
from typing import Any

from ..records import Match, NearMiss, PassError

__all__ = ["SCHEMA", "BlockedFusion", "GraphBreak", "StageReport", "GraphReport", "FusionReport", "format_bytes"]

SCHEMA = "fusion_passes.report/1"


def format_bytes(n: int) -> str:
    """``1536`` -> ``'1.5 KiB'``."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(size) < 1024 or unit == "GiB":
            return f"{int(size)} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"  # pragma: no cover - loop always returns


@dataclass
class BlockedFusion:
    """A fusion a graph break probably prevented (a heuristic on the ops either side of the break)."""

    pattern: str
    why: str


@dataclass
class GraphBreak:
    """One distinct graph break: same reason at the same user line, however many times Dynamo hit it.

    ``between`` lists, per occurrence, (graph before, graph after) by graph id in compile order; None where
    there was no graph on that side (nothing to compile before the break, or the rest ran eagerly).
    """

    reason: str  # one line, e.g. "Data-dependent branching"
    location: str  # "model.py:42", the innermost user frame
    explanation: str = ""
    hints: list[str] = field(default_factory=list)
    user_stack: list[str] = field(default_factory=list)  # "file:line in fn: code", innermost last
    count: int = 1
    between: list[tuple[int | None, int | None]] = field(default_factory=list)
    blocked: list[BlockedFusion] = field(default_factory=list)
    skipped_frame: bool = False  # Dynamo gave up on the enclosing frame: it ran eagerly
    url: str = ""

    @property
    def key(self) -> tuple[str, str]:
        return (self.reason, self.location)


@dataclass
class StageReport:
    """The graph at one hook before and after our passes."""

    hook: str
    code_before: str
    code_after: str
    ops_before: dict[str, int]
    ops_after: dict[str, int]

    @property
    def ops_delta(self) -> dict[str, tuple[int, int]]:
        """Ops whose count our passes changed: op -> (before, after)."""
        ops = sorted(set(self.ops_before) | set(self.ops_after))
        return {
            op: (self.ops_before.get(op, 0), self.ops_after.get(op, 0))
            for op in ops
            if self.ops_before.get(op, 0) != self.ops_after.get(op, 0)
        }

    @property
    def changed(self) -> bool:
        return self.code_before != self.code_after

    def diff(self, graph_id: int | None = None, context: int = 3) -> str:
        """Unified diff of the graph code before -> after our passes ('' when they changed nothing)."""
        if not self.changed:
            return ""
        tag = f"graph {graph_id} " if graph_id is not None else ""
        return "\n".join(
            difflib.unified_diff(
                self.code_before.splitlines(),
                self.code_after.splitlines(),
                fromfile=f"{tag}{self.hook} before fusion_passes",
                tofile=f"{tag}{self.hook} after fusion_passes",
                n=context,
                lineterm="",
            )
        )


@dataclass
class GraphReport:
    """One compiled graph. ``head_ops``/``tail_ops``: Dynamo-level ops at its start/end (for break analysis)."""

    graph_id: int
    compile_id: str = ""  # Dynamo's "frame/compile", e.g. "0/0"
    num_nodes: int = 0
    kernels: int | None = None
    compile_s: float = 0.0
    pass_s: dict[str, float] = field(default_factory=dict)  # seconds each of our families took, within compile_s
    cudagraphs: str = ""  # with backend(cudagraphs="static"): "static", or what the graph got instead and why
    passes_ran: bool = True
    stages: list[StageReport] = field(default_factory=list)
    matches: list[Match] = field(default_factory=list)
    near_misses: list[NearMiss] = field(default_factory=list)
    errors: list[PassError] = field(default_factory=list)
    ended_by: str = ""  # why Dynamo ended this graph: "graph break" or "" (return / unknown)
    head_ops: list[str] = field(default_factory=list)
    tail_ops: list[str] = field(default_factory=list)

    @property
    def saved_bytes(self) -> int:
        return sum(m.saved_bytes for m in self.matches)


@dataclass
class FusionReport:
    """What one compile with the fusion_passes backend did. ``str(report)`` is the text report."""

    target: str = ""
    torch_version: str = ""
    fusion_passes_version: str = ""
    patterns: list[str] = field(default_factory=list)
    graphs: list[GraphReport] = field(default_factory=list)
    breaks: list[GraphBreak] = field(default_factory=list)
    compile_s: float = 0.0  # wall time of the reported call (trace + compile + run)
    output: Any = field(default=None, repr=False, compare=False)  # what the compiled call returned (not in JSON)

    # -------------------------------------------------------------------------------- flat views

    @property
    def matches(self) -> list[Match]:
        return [m for g in self.graphs for m in g.matches]

    @property
    def near_misses(self) -> list[NearMiss]:
        return [n for g in self.graphs for n in g.near_misses]

    def by_pattern(self) -> list[dict[str, Any]]:
        """Per family that fired or almost fired: ``matches``, ``near_misses``, ``saved_bytes`` and ``sources`` (the
        distinct source lines it fired at, first-seen order): a model's 32 identical layers in one row."""
        rows: dict[str, dict[str, Any]] = {}

        def row(pattern: str) -> dict[str, Any]:
            return rows.setdefault(pattern, dict(pattern=pattern, matches=0, near_misses=0, saved_bytes=0,
                                                 sources=[]))

        for m in self.matches:
            r = row(m.pattern)
            r["matches"] += 1
            r["saved_bytes"] += m.saved_bytes
            if m.source not in r["sources"]:
                r["sources"].append(m.source)
        for n in self.near_misses:
            row(n.pattern)["near_misses"] += 1
        return list(rows.values())

    def near_miss_groups(self) -> list[tuple[NearMiss, int]]:
        """Identical near misses (graph, pattern, source line, reason) once each, with how many there were, in
        first-seen order: the same line in every layer of a model is one row, not one per layer."""
        counts: dict[tuple, list] = {}
        for n in self.near_misses:
            key = (n.graph_id, n.pattern, n.source, n.reason)
            counts.setdefault(key, [n, 0])[1] += 1
        return [(n, count) for n, count in counts.values()]

    @property
    def errors(self) -> list[PassError]:
        return [e for g in self.graphs for e in g.errors]

    @property
    def saved_bytes(self) -> int:
        """The headline: bytes of intermediate tensors our rewrites no longer materialise (per call)."""
        return sum(g.saved_bytes for g in self.graphs)

    @property
    def kernels(self) -> int | None:
        counts = [g.kernels for g in self.graphs if g.kernels is not None]
        return sum(counts) if counts else None

    @property
    def break_count(self) -> int:
        return sum(b.count for b in self.breaks)

    def graph(self, graph_id: int) -> GraphReport:
        for g in self.graphs:
            if g.graph_id == graph_id:
                return g
        raise KeyError(f"no graph {graph_id} in this report; graphs: {[g.graph_id for g in self.graphs]}")

    def summary(self) -> dict[str, Any]:
        return {
            "graphs": len(self.graphs),
            "graph_breaks": len(self.breaks),
            "graph_break_occurrences": self.break_count,
            "matches": len(self.matches),
            "near_misses": len(self.near_misses),
            "errors": len(self.errors),
            "kernels": self.kernels,
            "saved_bytes": self.saved_bytes,
            "matches_by_pattern": _count(m.pattern for m in self.matches),
            "by_pattern": self.by_pattern(),
        }

    # -------------------------------------------------------------------------------- outputs

    def to_dict(self, code: bool = True) -> dict[str, Any]:
        """The JSON schema ``SCHEMA``: plain dicts, lists, strings and finite numbers only (a non-finite value in a
        match's ``detail`` is the string ``"inf"``, ``"-inf"`` or ``"nan"``).

        ``code=False`` leaves out each stage's full ``code_before``/``code_after`` (the ``diff`` stays).
        """
        return {
            "schema": SCHEMA,
            "target": self.target,
            "torch_version": self.torch_version,
            "fusion_passes_version": self.fusion_passes_version,
            "patterns": list(self.patterns),
            "compile_s": round(self.compile_s, 3),
            "summary": self.summary(),
            "graphs": [_graph_dict(g, code) for g in self.graphs],
            "graph_breaks": [_break_dict(b) for b in self.breaks],
        }

    def to_json(self, path=None, indent: int | None = 2) -> str:
        """The report as JSON (see ``to_dict``); also written to ``path`` when given."""
        text = json.dumps(self.to_dict(), indent=indent, default=str)
        if path is not None:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text + "\n")
        return text

    def text(self, diffs: bool = False) -> str:
        """Tables (tabulate) of every section; ``diffs=True`` appends the unified graph diffs."""
        from .render_text import render_text

        return render_text(self, diffs=diffs)

    def to_html(self, path=None) -> str:
        """One self-contained HTML page (inline CSS/JS, nothing fetched); also written to ``path`` when given."""
        from .render_html import render_html

        page = render_html(self)
        if path is not None:
            with open(path, "w", encoding="utf-8") as f:
                f.write(page)
        return page

    def __str__(self) -> str:
        return self.text()


def _count(items) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in items:
        out[item] = out.get(item, 0) + 1
    return out


def _jsonable(value: Any) -> Any:
    """``Match.detail`` is free-form (families fill it): keep JSON types, stringify the rest, and non-finite floats
    too (a step of ``inf``): json.dumps writes them as ``Infinity``/``NaN``, which JSON parsers, the HTML page's
    ``JSON.parse`` among them, reject."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_jsonable(v) for v in value]
    return str(value)


def _graph_dict(g: GraphReport, code: bool) -> dict[str, Any]:
    return {
        "graph_id": g.graph_id,
        "compile_id": g.compile_id,
        "num_nodes": g.num_nodes,
        "kernels": g.kernels,
        "compile_s": round(g.compile_s, 3),
        "pass_s": {k: round(v, 3) for k, v in g.pass_s.items()},
        "cudagraphs": g.cudagraphs,
        "passes_ran": g.passes_ran,
        "ended_by": g.ended_by,
        "saved_bytes": g.saved_bytes,
        "head_ops": list(g.head_ops),
        "tail_ops": list(g.tail_ops),
        "matches": [_jsonable(dataclasses.asdict(m)) for m in g.matches],
        "near_misses": [dataclasses.asdict(n) for n in g.near_misses],
        "errors": [dataclasses.asdict(e) for e in g.errors],
        "stages": [_stage_dict(s, g.graph_id, code) for s in g.stages],
    }


def _stage_dict(s: StageReport, graph_id: int, code: bool) -> dict[str, Any]:
    out = {
        "hook": s.hook,
        "ops_before": dict(s.ops_before),
        "ops_after": dict(s.ops_after),
        "ops_delta": {op: list(ba) for op, ba in s.ops_delta.items()},
        "diff": s.diff(graph_id),
    }
    if code:
        out.update(code_before=s.code_before, code_after=s.code_after)
    return out


def _break_dict(b: GraphBreak) -> dict[str, Any]:
    return {
        "reason": b.reason,
        "location": b.location,
        "explanation": b.explanation,
        "hints": list(b.hints),
        "user_stack": list(b.user_stack),
        "count": b.count,
        "between": [list(pair) for pair in b.between],
        "blocked": [dataclasses.asdict(x) for x in b.blocked],
        "skipped_frame": b.skipped_frame,
        "url": b.url,
    }
