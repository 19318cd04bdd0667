"""Reports: what one compile with the fusion_passes backend did, as text, JSON or one HTML page.

    import fusion_passes.report
    rep = fusion_passes.report(model, input_ids)        # this package is callable: same as report.report(...)
    print(rep)                                          # graphs, matches, near misses, graph breaks, op counts
    rep.to_json("report.json"); rep.to_html("report.html")

    from fusion_passes.report import summary_table      # tables for records from fusion_passes.capture()

Modules: ``collect`` (the compile, graph-break capture, assembly), ``breaks`` (graph-break parsing, dedupe and
the blocked-fusion heuristic), ``model`` (the dataclasses and JSON schema), ``render_text``, ``render_html``.
"""

from __future__ import annotations

import sys
import types

from .collect import collect, from_records, report
from .model import SCHEMA, BlockedFusion, FusionReport, GraphBreak, GraphReport, StageReport, format_bytes
from .render_text import summary_table

__all__ = [
    "SCHEMA",
    "BlockedFusion",
    "FusionReport",
    "GraphBreak",
    "GraphReport",
    "StageReport",
    "collect",
    "format_bytes",
    "from_records",
    "report",
    "summary_table",
]


class _CallableModule(types.ModuleType):
    """``fusion_passes.report`` is both this package and the ``report()`` function."""

    def __call__(self, model_or_fn, *args, **kwargs) -> FusionReport:
        return report(model_or_fn, *args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
