"""``report()``: one compile with our backend, everything it did collected into a ``FusionReport``.

    rep = fusion_passes.report(model, input_ids, patterns=["attention_sdpa"])
    print(rep)                      # tables
    rep.to_html("report.html")      # one self-contained page with collapsible graph diffs

One call of ``model(*args, **kwargs)`` is compiled and run with ``fusion_passes.backend(...)`` (Inductor's FX
graph cache and AOTAutograd cache off, so our passes run and leave records), inside ``fusion_passes.capture()``
for the per-graph records and with Dynamo's graph-break log captured (see ``breaks.py``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
import traceback
from typing import Any, Callable, Sequence

import torch
from torch._inductor.custom_graph_pass import CustomGraphPass

from .. import records
from ..backend import FusionBackend
from ..pass_manager import HOOK_CONFIG, FusionGraphPass
from .breaks import BreakEvent, GraphEvent, build_breaks, capture_break_logs, graph_event_info
from .model import FusionReport, GraphReport, StageReport

__all__ = ["report", "collect", "from_records"]

Progress = Callable[[str], None]
_HOOK_TITLE = {"joint": "joint-graph", "post_grad": "post-grad"}


def report(model_or_fn, *args, patterns=None, exclude=(), mode=None, options=None, cudagraphs=None,
           **kwargs) -> FusionReport:
    """Compile and run ``model_or_fn(*args, **kwargs)`` once with our backend; return what it did.

    patterns/exclude/mode/options/cudagraphs: as for ``fusion_passes.backend``. The compiled call runs under the
    caller's grad mode (wrap it in ``torch.no_grad()`` for inference). Dynamo's caches are reset first
    (``torch._dynamo.reset()``) so every graph is traced and compiled here; other compiled functions in the
    process recompile on their next call. ``report.output`` holds what the call returned. An already
    compiled model or function (``torch.compile(model)``) is reported on its original. For dynamic shapes
    or progress lines use ``fusion_passes.report.collect``.
    """
    return collect(model_or_fn, args, kwargs, patterns=patterns, exclude=exclude, mode=mode, options=options,
                   cudagraphs=cudagraphs)


def collect(model_or_fn, args: Sequence[Any] = (), kwargs: dict | None = None, *, patterns=None, exclude=(),
            mode=None, options=None, dynamic=None, progress: Progress | None = None, target: str = "",
            reset: bool = True, cudagraphs=None) -> FusionReport:
    """``report()`` with the extras the CLI needs: ``dynamic``, a ``progress(msg)`` callback, a target name."""
    say = progress or (lambda msg: None)
    model_or_fn = _unwrap(model_or_fn)
    opts = dict(options or {})
    opts["fx_graph_cache"] = False  # a cache hit would skip our passes and leave no records
    timeline: list = []  # BreakEvents and (GraphEvent, GraphRecord | None, compile id), in the order they happen
    be = _ReportingBackend(timeline, say, patterns=patterns, exclude=exclude, mode=mode, options=opts,
                           dynamic=dynamic, cudagraphs=cudagraphs)
    if reset:
        torch._dynamo.reset()
    target = target or _name_of(model_or_fn)
    compiled = torch.compile(model_or_fn, backend=be, dynamic=dynamic)
    say(f"tracing {target} with Dynamo; patterns: {', '.join(be.patterns) or '(none)'}")
    start = time.perf_counter()
    # the caller's frames show up at the top of Dynamo's user tracebacks; they are not where the break is
    callers = frozenset((f.filename, f.lineno) for f in traceback.extract_stack())
    with records.capture() as recs, capture_break_logs(timeline.append, callers), _no_autograd_cache():
        be.records = recs
        output = compiled(*args, **(kwargs or {}))
    elapsed = time.perf_counter() - start
    rep = _build(timeline, be.patterns, target, elapsed, output)
    say(f"done in {elapsed:.1f} s: {len(rep.graphs)} graph(s), {len(rep.breaks)} distinct graph break(s), "
        f"{len(rep.matches)} match(es)")
    return rep


def from_records(recs: Sequence[records.GraphRecord], target: str = "") -> FusionReport:
    """A report (no graph-break section) from records gathered elsewhere, e.g. ``with fusion_passes.capture()``."""
    graphs = [_graph_report(rec, i + 1, None) for i, rec in enumerate(recs)]
    patterns = sorted({p for rec in recs for p in rec.patterns})
    return FusionReport(target=target, torch_version=torch.__version__, fusion_passes_version=_version(),
                        patterns=patterns, graphs=graphs)


# ------------------------------------------------------------------------------------------------ backend


class _ReportingBackend(FusionBackend):
    """Our backend plus bookkeeping: a ``GraphEvent`` per Dynamo graph and progress lines per phase."""

    def __init__(self, timeline: list, say: Progress, **kwargs):
        super().__init__(**kwargs)
        self.timeline = timeline
        self.say = say
        self.n_graphs = 0
        self.records: list[records.GraphRecord] = []  # the capture() list of the report's compile

    def config_patches(self, grad_enabled: bool, trees: bool = False, static: bool = False) -> dict[str, Any]:
        patches = super().config_patches(grad_enabled, trees, static)
        for attr in HOOK_CONFIG.values():
            if isinstance(patches.get(attr), FusionGraphPass):
                patches[attr] = _AnnouncingPass(patches[attr], self.n_graphs, self.say)
        return patches

    def __call__(self, gm: torch.fx.GraphModule, example_inputs):
        self.n_graphs += 1
        gid = self.n_graphs
        info = graph_event_info(gm)
        cid = _compile_id(gm)
        self.say(f"graph {gid} (Dynamo frame {cid}): {len(gm.graph.nodes)} FX nodes; AOT autograd + our passes "
                 f"+ Inductor")
        # the new record, off the report's own capture list (a capture() of the caller's may hold others too)
        n_before = len(self.records)
        try:
            compiled = super().__call__(gm, example_inputs)
        except BaseException:
            # e.g. AOTAutograd's restart for a float it could not make a tensor: Dynamo traces the frame again
            # and hands us the graph anew, which keeps this id (no gap in the report's numbering)
            self.n_graphs = gid - 1
            raise
        rec = self.records[n_before] if len(self.records) > n_before else None
        self.timeline.append((GraphEvent(graph_id=gid, **{k: v for k, v in info.items()}), rec, cid))
        if rec is not None:
            kernels = "cache hit" if rec.kernels is None else f"{rec.kernels} kernel(s)"
            graphs = f", CUDA graphs: {rec.cudagraphs}" if rec.cudagraphs else ""
            self.say(f"graph {gid}: compiled in {rec.compile_s:.1f} s, our passes {sum(rec.pass_s.values()):.1f} s "
                     f"({kernels}, {len(rec.matches)} match(es), "
                     f"{len(rec.near_misses)} near miss(es){graphs})")
        return compiled


class _AnnouncingPass(CustomGraphPass):
    """Wraps our pass in one hook to print a progress line before it runs; same uuid, same behaviour."""

    def __init__(self, inner: FusionGraphPass, graph_id: int, say: Progress):
        self.inner = inner
        self.graph_id = graph_id
        self.say = say

    def __call__(self, graph: torch.fx.Graph) -> None:
        self.say(f"graph {self.graph_id}: {_HOOK_TITLE.get(self.inner.hook, self.inner.hook)} passes "
                 f"({', '.join(self.inner.families)}) on {len(graph.nodes)} nodes")
        self.inner(graph)
        if self.inner.hook == "post_grad":
            self.say(f"graph {self.graph_id}: Inductor lowering and code generation")

    def uuid(self):
        return self.inner.uuid()


@contextlib.contextmanager
def _no_autograd_cache():
    """AOTAutograd's cache would serve a compiled graph without running our passes."""
    try:
        from torch._functorch import config as functorch_config
    except ImportError:
        functorch_config = None
    if functorch_config is None or not hasattr(functorch_config, "enable_autograd_cache"):  # a torch without it
        yield
        return
    with functorch_config.patch(enable_autograd_cache=False):
        yield


# ------------------------------------------------------------------------------------------------ assembly


def _build(timeline: list, patterns, target: str, elapsed: float, output) -> FusionReport:
    graphs = []
    events: list = []  # BreakEvent / GraphEvent, in order
    for item in timeline:
        if isinstance(item, BreakEvent):
            events.append(item)
            continue
        event, rec, cid = item
        events.append(event)
        if rec is not None:
            g = _graph_report(rec, event.graph_id, event, cid)
            if g.kernels is None:
                # the record's "served from cache"; but report() compiles with the caches off, so Inductor had
                # nothing to compile (no op left after AOTAutograd: it returns before any pass) and made no kernel
                g.kernels = 0
            graphs.append(g)
    return FusionReport(target=target, torch_version=torch.__version__, fusion_passes_version=_version(),
                        patterns=list(patterns), graphs=graphs, breaks=build_breaks(events), compile_s=elapsed,
                        output=output)


def _graph_report(rec: records.GraphRecord, gid: int, event: GraphEvent | None, cid: str = "") -> GraphReport:
    """The record, renumbered to the report's 1-based graph id (records use a process-wide counter)."""
    renum = lambda items: [dataclasses.replace(x, graph_id=gid) for x in items]  # noqa: E731
    # no code_after: the passes raised before the stage ended (FUSION_PASSES_RAISE=1), so show it unchanged; an
    # empty ops_after with code is a graph our passes left without a counted op, not "unchanged"
    stages = [StageReport(s.hook, s.code_before, s.code_after or s.code_before, dict(s.ops_before),
                          dict(s.ops_after if s.code_after else s.ops_before)) for s in rec.stages]
    g = GraphReport(graph_id=gid, compile_id=cid, num_nodes=rec.num_nodes, kernels=rec.kernels,
                    compile_s=rec.compile_s, pass_s=dict(rec.pass_s), cudagraphs=rec.cudagraphs, passes_ran=rec.passes_ran, stages=stages,
                    matches=renum(rec.matches), near_misses=renum(rec.near_misses), errors=renum(rec.errors))
    if event is not None:
        g.ended_by = "graph break" if event.graph_break else ""
        g.head_ops, g.tail_ops = list(event.head_ops), list(event.tail_ops)
    return g


def _compile_id(gm) -> str:
    cid = gm.meta.get("dynamo_compile_id") if hasattr(gm, "meta") else None
    if cid is None:
        return ""
    frame, attempt = getattr(cid, "frame_id", None), getattr(cid, "frame_compile_id", None)
    return f"{frame}/{attempt}" if frame is not None else str(cid)


def _unwrap(obj):
    """The original behind ``torch.compile(module)`` / ``torch.compile(fn)``, so we compile it with our backend."""
    if isinstance(obj, torch.nn.Module) and isinstance(getattr(obj, "_orig_mod", None), torch.nn.Module):
        return obj._orig_mod
    return getattr(obj, "_torchdynamo_orig_callable", obj)


def _name_of(obj) -> str:
    if isinstance(obj, torch.nn.Module):
        return type(obj).__name__
    return getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None) or type(obj).__name__


def _version() -> str:
    from .. import __version__

    return __version__
