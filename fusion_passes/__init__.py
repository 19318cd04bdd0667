"""fusion_passes: inference-engine fusions for unmodified HF-style models under ``torch.compile``.

    import fusion_passes
    compiled = torch.compile(model, backend="fusion_passes")          # or fusion_passes.backend(...)
    compiled(*inputs)
    print(fusion_passes.last_compile().matches)                       # what fired, and where
"""

from __future__ import annotations

from .backend import FusionBackend, backend, register_by_name as _register_by_name
from .decorator import fuse
from .patterns import available_patterns, register_pattern
from .static_cudagraphs import cuda_graph_step
from .records import GraphRecord, Match, NearMiss, PassError, capture, history, last_compile
from . import report  # noqa: E402 - callable: fusion_passes.report(model, *args) -> FusionReport

__version__ = "0.1.0"

_register_by_name()  # backend="fusion_passes" from a checkout that is not pip-installed

__all__ = [
    "FusionBackend",
    "GraphRecord",
    "Match",
    "NearMiss",
    "PassError",
    "available_patterns",
    "backend",
    "capture",
    "cuda_graph_step",
    "fuse",
    "history",
    "last_compile",
    "register_pattern",
    "report",
]
