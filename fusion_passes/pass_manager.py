"""One ``CustomGraphPass`` per Inductor hook, running the enabled families in order.

    joint graph  (config.joint_custom_pre_pass)      -> families with HOOK == "joint"
    post-grad    (config.post_grad_custom_pre_pass)  -> families with HOOK == "post_grad"

For each family the manager snapshots the graph, runs ``family.apply(graph, ctx)``, and if it raises puts the
snapshot back, warns once and records a ``PassError``: a broken family never breaks the user's compile.

``uuid()`` hashes the enabled family names, the source files of those families and of this package's core,
their run-time settings (``cache_key()``) and the uuid of the user's own pass that we chain, so Inductor's FX
graph cache hits for the same config (also across processes) and misses when anything that changes the output
graph changes. Where that cannot be known it is None, and Inductor compiles without its cache.
"""

from __future__ import annotations

import hashlib
import inspect
import os
import time
import warnings
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx as fx
from torch._inductor.custom_graph_pass import CustomGraphPass

from . import graph_utils, linears, records
from .patterns import get_family
from .records import Match, NearMiss, PassError

__all__ = ["PassContext", "FusionGraphPass", "HOOK_CONFIG"]

# our hook name -> the torch._inductor.config attribute that holds the pass
HOOK_CONFIG = {"joint": "joint_custom_pre_pass", "post_grad": "post_grad_custom_pre_pass"}

# what every family may use: linears' FakeEval builds outer_product's and state_updates' nodes, and the kernels'
# package holds helpers their ops call
_CORE_FILES = ("pass_manager.py", "graph_utils.py", "linears.py", os.path.join("kernels", "__init__.py"))
_warned: set[tuple[str, str]] = set()


@dataclass
class PassContext:
    """What a family gets besides the graph: where to report, and facts about this compile."""

    pattern: str
    hook: str
    record: records.GraphRecord | None
    grad_enabled: bool  # the graph records gradients (backend.records_gradients): rewrites must keep them exact
    graphed: bool = False  # the compiled graph will be replayed from a CUDA graph (kernels.pdl's "auto" policy)

    @property
    def graph_id(self) -> int:
        return self.record.graph_id if self.record else 0

    def matched(self, replaced, inserted, *, anchor: fx.Node | None = None, detail=None, saved_bytes: int = 0) -> Match:
        """Record a rewrite. ``replaced``/``inserted`` are nodes (or strings). The source line is the ``anchor``
        node's (the op that says what matched, e.g. the softmax), else the first replaced node's that has one."""
        replaced = list(replaced)
        detail = dict(detail or {})
        unpadded = [n.meta[linears.UNPADDED] for n in replaced if isinstance(n, fx.Node) and linears.UNPADDED in n.meta]
        if unpadded:  # linears.unpad_rows restored these GEMMs first: say so where the match is reported
            detail["row_padding_undone"] = (f"Inductor's pad_mm had padded {len(unpadded)} GEMM(s) by "
                                            f"{max(unpadded)} rows")
        nodes = [anchor] if anchor is not None else []
        nodes += [n for n in replaced if isinstance(n, fx.Node)]
        m = Match(
            pattern=self.pattern,
            graph_id=self.graph_id,
            source=graph_utils.first_source(nodes),
            replaced=[_describe(n) for n in replaced],
            inserted=[_describe(n) for n in inserted],
            detail=detail,
            saved_bytes=saved_bytes,
        )
        if self.record is not None:
            self.record.matches.append(m)
        return m

    def near_miss(self, node: fx.Node | None, reason: str) -> None:
        """Record that the family looked at ``node`` and did not fire because of ``reason``."""
        if self.record is None:
            return
        source = graph_utils.source_location(node) if node is not None else ""
        self.record.near_misses.append(NearMiss(self.pattern, self.graph_id, source, reason))


def _describe(node) -> str:
    if isinstance(node, fx.Node):
        return f"{node.name}={graph_utils.op_name(node)}" if node.op == "call_function" else node.name
    return str(node)


def _file_hash(paths: list[str]) -> str:
    h = hashlib.sha256()
    for p in paths:
        h.update(p.encode())
        with open(p, "rb") as f:
            h.update(f.read())
    return h.hexdigest()


def _family_files(family) -> list[str] | None:
    """The family's own source and every file it lists in ``DEPENDS`` (e.g. its kernels), and theirs in turn
    (decode_gemv's residual_norm brings its norm kernels); None when one has no source file (an object made at
    run time, a class typed into a REPL): nothing would tell two such apart."""
    files, todo, seen = [], [family], set()
    while todo:
        obj = todo.pop(0)
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        try:
            path = inspect.getsourcefile(obj)
        except (TypeError, OSError):
            return None
        if not path or not os.path.isfile(path):
            return None
        files.append(path)
        todo += getattr(obj, "DEPENDS", ())
    return files


def _warn_once(pattern: str, message: str) -> None:
    if (pattern, message) not in _warned:
        _warned.add((pattern, message))
        warnings.warn(f"fusion_passes: pattern {pattern!r} failed and was skipped: {message}", stacklevel=3)


class FusionGraphPass(CustomGraphPass):
    """The pass installed in one hook: runs ``families`` in order, then the user's pass it replaced."""

    def __init__(self, hook: str, families: tuple[str, ...], chained: Any = None, grad_enabled: bool = False,
                 graphed: bool = False):
        self.hook = hook
        self.families = tuple(families)
        self.chained = chained  # the user's pass(es) that were in this hook before us
        self.grad_enabled = grad_enabled
        self.graphed = graphed

    def __call__(self, graph: fx.Graph) -> None:
        rec = records.current()
        stage = None
        if rec is not None and self.families:
            stage = records.StageRecord(self.hook, graph_utils.graph_code(graph), ops_before=graph_utils.op_counts(graph))
            rec.stages.append(stage)
        if self.families:
            moved = self._read_sizes_early(graph)
            if rec is not None:
                rec.sizes_moved += moved
        for name in self.families:
            self._run_family(name, graph, rec)
        if stage is not None:
            stage.code_after = graph_utils.graph_code(graph)
            stage.ops_after = graph_utils.op_counts(graph)
        for user_pass in _as_tuple(self.chained):
            user_pass(graph)

    def _read_sizes_early(self, graph: fx.Graph) -> int:
        """``graph_utils.read_sizes_early``, so that size queries do not count as users of what a family matches;
        if it raises, the graph is put back and the families run on it as it was. Returns how many it moved."""
        saved = graph_utils.snapshot(graph)
        try:
            moved = graph_utils.read_sizes_early(graph)
            graph.lint()
            return moved
        except Exception as e:  # noqa: BLE001 - never breaks the compile
            graph_utils.restore(graph, saved)
            if os.environ.get("FUSION_PASSES_RAISE") == "1":
                raise
            _warn_once("(size queries)", f"{type(e).__name__}: {e}")
            return 0

    def _run_family(self, name: str, graph: fx.Graph, rec) -> None:
        family = get_family(name)
        ctx = PassContext(pattern=name, hook=self.hook, record=rec, grad_enabled=self.grad_enabled,
                          graphed=self.graphed)
        saved = graph_utils.snapshot(graph)
        n_matches = len(rec.matches) if rec else 0
        start = time.perf_counter()
        try:
            family.apply(graph, ctx)
            graph.lint()
        except Exception as e:  # noqa: BLE001 - any failure in a family must leave the compile intact
            graph_utils.restore(graph, saved)
            if rec is not None:
                del rec.matches[n_matches:]  # those rewrites were rolled back
                rec.errors.append(PassError(name, rec.graph_id, f"{type(e).__name__}: {e}"))
            if os.environ.get("FUSION_PASSES_RAISE") == "1":
                raise
            _warn_once(name, f"{type(e).__name__}: {e}")
        finally:
            if rec is not None:
                rec.pass_s[name] = rec.pass_s.get(name, 0.0) + time.perf_counter() - start

    def key_files(self) -> list[str] | None:
        """The source files whose text enters ``uuid()``: the core's, then each family's and its ``DEPENDS``';
        None when a family has none."""
        files = [os.path.join(os.path.dirname(__file__), f) for f in _CORE_FILES]
        for name in self.families:
            own = _family_files(get_family(name))
            if own is None:  # a runtime-made family would get the graph of another one of its name
                return None
            files += own
        return files

    def uuid(self) -> Any:
        """The FX-graph-cache key of this pass; None (Inductor then compiles without its cache, and our passes run)
        where a family has no source file to hash."""
        files = self.key_files()
        if files is None:
            return None
        keys = [f"{name}={get_family(name).cache_key()}" for name in self.families
                if hasattr(get_family(name), "cache_key")]  # run-time settings that change the graphs
        file_hash = _file_hash(files)
        parts = [self.hook, ",".join(self.families), str(self.grad_enabled), str(self.graphed), file_hash,
                 torch.__version__, *keys]
        for user_pass in _as_tuple(self.chained):
            uid = user_pass.uuid() if isinstance(user_pass, CustomGraphPass) else None
            if uid is None:
                return None  # the user's pass cannot be cached, so neither can the chain
            parts.append(repr(uid))
        return hashlib.sha256("|".join(parts).encode()).hexdigest()


def _as_tuple(p) -> tuple:
    if p is None:
        return ()
    return tuple(p) if isinstance(p, (list, tuple)) else (p,)
