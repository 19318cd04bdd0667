"""Graph breaks, captured during the one compile that runs our passes (no second ``explain`` pass).

Two sources, merged on a single timeline in the order things happened:

1. **Dynamo's ``graph_breaks`` log** (the records ``TORCH_LOGS=graph_breaks`` prints): one record per break
   Dynamo hits while tracing, with the reason, hints and user traceback, including breaks that leave no graph
   behind (a ``print`` as a frame's first statement, a frame skipped because of a break inside a loop). We
   attach a handler to every ``*.__graph_breaks`` artifact logger for the duration of the compile only.
2. **``gm.compile_subgraph_reason``** on each graph Dynamo hands to our backend (what ``ExplainWithBackend``
   reads): tells which graph ended at a break, and where. This source alone still works if a torch release
   renames the log records.

A log record and the next graph that ends at the same ``file:line`` are the same occurrence. Both sides name a
break by its innermost *user* frame: a break inside torch's own Python code (``nn.init.trunc_normal_``'s
``.item()``) is placed at the user line that called into torch. Occurrences are deduplicated by (reason,
innermost user ``file:line``); ``count`` is the number of times Dynamo hit the break
while tracing (what ``torch._dynamo.utils.counters["graph_break"]`` counts, plus the hits that made Dynamo skip
the frame, e.g. a break in a loop, which that counter leaves out) and ``between`` the graphs it separates, **by
compile order**: the graph that ended at the break and the next graph compiled. That is the graph that ran next
unless the code after the break was already compiled (a second layer reusing the first one's graphs, or a
frame recompiled for new shapes whose resume is not): then "after" is a later graph, and the blocked-fusion
heuristic below compares graphs that did not run back to back.

Which fusion a break blocked is a heuristic on the Dynamo-level ops at the end of the graph before the break
and the start of the graph after it (e.g. ``matmul`` then ``softmax``: QK^T and softmax were split, so
attention -> SDPA could not match). A break inside a function called between the two (DeBERTa's ``.item()`` in its
relative-position bias) puts that function's graphs in between: there the softmax starts the later graph in which
Dynamo resumes the matmul's function after the call (``torch_dynamo_resume_in_<fn>_at_<line>``), and that pair is
compared. It names likely losses; it does not prove them.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import logging
import os
import re
from dataclasses import dataclass, field
from typing import Callable, Iterator

import torch
import torch.fx as fx

from .. import graph_utils
from .model import BlockedFusion, GraphBreak

__all__ = ["BreakEvent", "GraphEvent", "capture_break_logs", "parse_log_message", "graph_event_info", "build_breaks",
           "blocked_fusions", "blocked_across_a_call"]

_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_REPORT_DIR = os.path.dirname(__file__) + os.sep
# Code with no file that is not the user's: Python's frozen stdlib (``<frozen runpy>``) and FX's generated
# forward (``<eval_with_key>.3``). Other ``<...>`` names are the user's code: ``exec`` of a string, a notebook cell.
_NOT_USER = ("<frozen ", "<eval_with_key>")
_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<fn>\S+)')
_AT = re.compile(r"in user code at (?P<file>.+?):(?P<line>\d+)\s*$", re.M)
_URL = re.compile(r"please visit: (\S+)")
# Preambles Dynamo puts before the actual reason ("Encountered graph break when attempting to trace CALL: ...:").
_PREAMBLE = re.compile(r"^(Encountered graph break|Failed to handle graph break|Graph break: torch\.compile)")
_NESTED = "*** While handling this graph break"
_STACK_FRAMES = 4
_WINDOW = 6  # ops looked at on each side of a break


@dataclass
class BreakEvent:
    """One graph-break log record, parsed."""

    reason: str
    location: str  # "path:line" of the innermost user frame ('' if unknown)
    explanation: str = ""
    hints: list[str] = field(default_factory=list)
    user_stack: list[str] = field(default_factory=list)
    skipped_frame: bool = False
    url: str = ""


@dataclass
class GraphEvent:
    """One graph our backend compiled (``graph_id`` is the report's 1-based id)."""

    graph_id: int
    graph_break: bool  # Dynamo ended this graph at a graph break
    location: str = ""
    reason: str = ""
    explanation: str = ""
    hints: list[str] = field(default_factory=list)
    user_stack: list[str] = field(default_factory=list)
    head_ops: list[str] = field(default_factory=list)
    tail_ops: list[str] = field(default_factory=list)
    head_linear_inputs: list[tuple] = field(default_factory=list)  # shapes of linears fed by graph inputs
    tail_linear_inputs: list[tuple] = field(default_factory=list)
    # (file, function, line) of each head / tail op's innermost frame ("" / 0 where the op has no stack trace)
    head_sites: list[tuple] = field(default_factory=list)
    tail_sites: list[tuple] = field(default_factory=list)


# ------------------------------------------------------------------------------------------------ parsing


def _is_user_file(path: str) -> bool:
    return not (path.startswith(_TORCH_DIR) or path.startswith(_REPORT_DIR) or path.startswith(_NOT_USER))


def _frame_str(file: str, line, fn: str, code: str = "") -> str:
    where = f"{file}:{line} in {fn}"
    code = re.sub(r"\s{2,}", "  ", (code or "").strip())  # aligned trailing comments pad lines with spaces
    return f"{where}: {code}" if code else where


def _parse_traceback(text: str, skip: frozenset = frozenset()) -> tuple[list[str], str]:
    """(user frames, ``file:line`` of the innermost one or '') of a formatted traceback, innermost last; frames
    inside torch (and this package) dropped, and the ``skip`` frames ((file, line) of the code that called the
    compiled function)."""
    lines = text.splitlines()
    frames, where = [], ""
    for i, line in enumerate(lines):
        m = _FRAME.search(line)
        if not m or not _is_user_file(m["file"]) or (m["file"], int(m["line"])) in skip:
            continue
        code = lines[i + 1] if i + 1 < len(lines) and not _FRAME.search(lines[i + 1]) else ""
        if code.strip() and set(code.strip()) <= set("^~ "):
            code = ""
        frames.append(_frame_str(m["file"], m["line"], m["fn"], code))
        where = f"{m['file']}:{m['line']}"  # not split out of the frame string: a path may hold " in "
    return frames[-_STACK_FRAMES:], where


def parse_reason(text: str) -> tuple[str, str, list[str], str]:
    """(title, explanation, hints, url) from Dynamo's reason text (the gb registry format or a bare line)."""
    paras = text.strip().split("\n\n")
    while len(paras) > 1 and _PREAMBLE.match(paras[0].strip()):
        paras = paras[1:]
    core = "\n\n".join(paras).split(_NESTED)[0]
    # (key, text) per line; Dynamo indents a multi-line explanation's or hint's further lines by 4 spaces (a
    # graph_break(msg=...) over two lines): they belong to that field. split("\n"), not splitlines(): U+2028
    # and the like inside a user's message are not line ends.
    fields: list[list[str]] = []
    for raw in core.split("\n"):
        ln = raw.strip()
        if not ln:
            continue
        if raw.startswith("    ") and fields:
            fields[-1][1] += " " + ln
            continue
        key = next((k for k in ("Explanation:", "Hint:") if ln.startswith(k)), "")
        fields.append([key, ln[len(key):].strip()])
    title = fields[0][1] if fields else text.strip().split("\n")[0] if text.strip() else "unknown"
    explanation = next((t for k, t in fields if k == "Explanation:"), "")
    hints = [t for k, t in fields if k == "Hint:" and "report an issue to PyTorch" not in t]
    url = _URL.search(text)
    return _friendly_title(title), explanation, hints, url.group(1) if url else ""


def _friendly_title(title: str) -> str:
    # compile_subgraph_reason carries terse internal names where the log has the registry's title
    if title.startswith("generic_jump"):
        return "Data-dependent branching"
    return title


def parse_log_message(msg: str, skip: frozenset = frozenset()) -> BreakEvent | None:
    """A ``graph_breaks`` log record -> BreakEvent (None for records that are not about one break).

    ``skip``: (file, line) frames to leave out of the user stack (the caller of the compiled function).
    """
    if "graph break" not in msg.lower():
        return None
    reason_text = msg
    if "Graph Break Reason:" in msg:
        reason_text = msg.split("Graph Break Reason:", 1)[1]
    for stop in ("\nUser code traceback:", "\nStack variable source attribution:"):
        reason_text = reason_text.split(stop)[0]
    if "The graph break occurred in the following user code:" in reason_text:  # convert_frame's "skip" record
        reason_text = msg.split("\n", 1)[0]
    title, explanation, hints, url = parse_reason(reason_text)

    tb_part = msg.split("User code traceback:", 1)[1] if "User code traceback:" in msg else msg
    stack, innermost = _parse_traceback(tb_part, skip)
    at = _AT.search("\n".join(msg.splitlines()[:2]))
    # the header names Dynamo's innermost frame, which may be inside torch; the graph side (graph_event_info)
    # names the innermost user frame, and the two must agree for a log record to meet its graph
    if at and (_is_user_file(at["file"]) or not innermost):
        location = f"{at['file']}:{at['line']}"
    else:
        location = innermost
    skipped = any(s in msg for s in ("Skipping the function", "Skipping the frame", "results in a skip"))
    return BreakEvent(title, location, explanation, hints, stack, skipped, url)


# ------------------------------------------------------------------------------------------------ capture


def _graph_break_loggers() -> list[logging.Logger]:
    # The artifact loggers exist once their modules are imported; their names carry the artifact name.
    for mod in ("torch._dynamo.symbolic_convert", "torch._dynamo.convert_frame", "torch._dynamo.exc"):
        with contextlib.suppress(Exception):
            importlib.import_module(mod)
    names = [n for n in list(logging.root.manager.loggerDict) if n.endswith(".__graph_breaks")]
    return [logging.getLogger(n) for n in sorted(names)]


class _Handler(logging.Handler):
    def __init__(self, sink: Callable[[BreakEvent], None], skip: frozenset):
        super().__init__(logging.DEBUG)
        self.sink = sink
        self.skip = skip

    def emit(self, record: logging.LogRecord) -> None:
        try:
            event = parse_log_message(record.getMessage(), self.skip)
        except Exception:  # noqa: BLE001 - a record we cannot parse must never break the user's compile
            return
        if event is not None:
            self.sink(event)


@contextlib.contextmanager
def capture_break_logs(sink: Callable[[BreakEvent], None], skip=frozenset()) -> Iterator[None]:
    """Send every graph-break log record emitted inside the block to ``sink`` (parsed).

    ``skip``: (file, line) frames to leave out of user stacks, e.g. those of the code calling the compile.
    Loggers the user did not enable are switched on at DEBUG with propagation off, so nothing extra is
    printed; loggers the user enabled (``TORCH_LOGS=graph_breaks``) keep printing as before, with a full
    record for every break (see ``_full_duplicate_records``).
    """
    handler = _Handler(sink, frozenset(skip))
    saved = []
    for lg in _graph_break_loggers():
        saved.append((lg, lg.level, lg.propagate))
        if not lg.isEnabledFor(logging.DEBUG):
            lg.setLevel(logging.DEBUG)
            lg.propagate = False
        lg.addHandler(handler)
    try:
        with _full_duplicate_records():
            yield
    finally:
        for lg, level, propagate in saved:
            lg.removeHandler(handler)
            lg.setLevel(level)
            lg.propagate = propagate


@contextlib.contextmanager
def _full_duplicate_records() -> Iterator[None]:
    """Dynamo logs a break it already logged in this compile (same kind, same innermost frame) as one header
    line, without the user traceback. Where that frame is inside torch (``nn.init.trunc_normal_``'s ``.item()``,
    reached from every layer), the header alone cannot say which user line the break belongs to, so inside the
    block every record keeps its traceback. Without the checker (another torch), the headers are used as they
    are."""
    checker = getattr(importlib.import_module("torch._dynamo.utils"), "graph_break_dup_warning_checker", None)
    if checker is None or not callable(getattr(checker, "add", None)) or "add" in vars(checker):
        yield
        return
    checker.add = lambda key: True  # an instance attribute: shadows the method, deleted below
    try:
        yield
    finally:
        del checker.add


# ------------------------------------------------------------------------------------------------ graph side

_IGNORED_OPS = {
    "getattr", "getitem", "size", "dim", "view", "reshape", "transpose", "permute", "contiguous", "to", "type",
    "float", "half", "bfloat16", "unsqueeze", "squeeze", "expand", "t", "flatten", "clone", "detach", "_set_grad_enabled",
    "sym_size", "_assert", "numel", "stride", "dropout",
}


def _node_op(node: fx.Node) -> str:
    if node.op == "call_method":
        return str(node.target)
    if node.op == "call_module":
        return type(node.graph.owning_module.get_submodule(node.target)).__name__.lower() if node.graph.owning_module else "module"
    target = node.target
    name = getattr(target, "__name__", None) or str(target)
    return name.split(".")[-1]


def _shape(node) -> tuple:
    """The sizes of ``node``'s tensor, a symbolic size as the hint it was traced with (read without a guard, so
    the report does not specialise the ``dynamic=True`` graph it reports); () if unknown."""
    val = node.meta.get("example_value", node.meta.get("val")) if isinstance(node, fx.Node) else None
    return (graph_utils.size_hints(val) or ()) if isinstance(val, torch.Tensor) else ()


def graph_event_info(gm: fx.GraphModule) -> dict:
    """What the break analysis needs from a Dynamo graph: why it ended, where, and its first/last ops."""
    reason = getattr(gm, "compile_subgraph_reason", None)
    info: dict = {"graph_break": bool(getattr(reason, "graph_break", False))}
    if reason is not None:
        title, explanation, hints, _ = parse_reason(str(getattr(reason, "reason", "")))
        frames = [f for f in getattr(reason, "user_stack", None) or [] if _is_user_file(f.filename)]
        stack = [_frame_str(f.filename, f.lineno, f.name, f.line or "") for f in frames][-_STACK_FRAMES:]
        info.update(reason=title, explanation=explanation, hints=hints, user_stack=stack,
                    location=f"{frames[-1].filename}:{frames[-1].lineno}" if frames else "")
    calls = [n for n in gm.graph.nodes
             if n.op in ("call_function", "call_method", "call_module") and _node_op(n) not in _IGNORED_OPS]
    head, tail = calls[:_WINDOW], calls[-_WINDOW:]
    info["head_ops"] = [_node_op(n) for n in head]
    info["tail_ops"] = [_node_op(n) for n in tail]
    info["head_linear_inputs"] = [_shape(n.args[0]) for n in head
                                  if _node_op(n) == "linear" and n.args and getattr(n.args[0], "op", "") == "placeholder"]
    info["tail_linear_inputs"] = [_shape(n.args[0]) for n in tail if _node_op(n) == "linear" and n.args]
    info["head_sites"], info["tail_sites"] = [_site(n) for n in head], [_site(n) for n in tail]
    return info


def _site(node: fx.Node) -> tuple:
    """(file, function, line) of the innermost frame in ``node``'s stack trace, or ("", "", 0)."""
    frames = list(_FRAME.finditer(node.meta.get("stack_trace") or ""))
    if not frames:
        return ("", "", 0)
    last = frames[-1]
    return (last["file"], last["fn"], int(last["line"]))


# ------------------------------------------------------------------------------------------------ heuristics

_MATMUL = {"matmul", "bmm", "baddbmm", "einsum", "mm"}
_SOFTMAX = {"softmax", "_softmax", "safe_softmax"}
# what residual_norm fuses ends in a normalisation: LayerNorm's op, or RMSNorm's rsqrt (a bare mean or pow after
# an add, e.g. mean pooling, is not a norm it could have taken)
_NORM = {"layer_norm", "rms_norm", "rsqrt"}
_NORM_STATS = {"pow", "mean", "var", "var_mean"}  # the first half of a norm written out
_ADD = {"add", "iadd", "add_"}


def _has(ops, group) -> bool:
    return any(op in group for op in ops)


def blocked_fusions(before: GraphEvent, after: GraphEvent) -> list[BlockedFusion]:
    """Fusions that the break between ``before`` and ``after`` probably split (heuristic; see module doc)."""
    t, h = before.tail_ops, after.head_ops
    out = []
    if _has(t, _MATMUL) and _has(h, _SOFTMAX):
        out.append(BlockedFusion("attention_sdpa", f"the QK^T matmul ends graph {before.graph_id} and the softmax "
                                                   f"starts graph {after.graph_id}, so attention -> SDPA cannot match"))
    elif _has(t, _SOFTMAX) and _has(h, _MATMUL) and not _has(h, _SOFTMAX):
        out.append(BlockedFusion("attention_sdpa", f"the softmax ends graph {before.graph_id} and the P @ V matmul "
                                                   f"starts graph {after.graph_id}, so attention -> SDPA cannot match"))
    if _has(t, _ADD) and _has(h, _NORM):
        out.append(BlockedFusion("residual_norm", f"the residual add ends graph {before.graph_id} and the norm starts "
                                                  f"graph {after.graph_id}, so add + norm cannot fuse"))
    elif _has(t, _NORM_STATS) and _has(h, {"rsqrt"}):
        out.append(BlockedFusion("residual_norm", f"the norm is split between graph {before.graph_id} and graph "
                                                  f"{after.graph_id}"))
    shared = set(before.tail_linear_inputs) & set(after.head_linear_inputs) - {()}
    if shared:
        out.append(BlockedFusion("qkv_packing", f"projections of a {list(next(iter(shared)))} input are split "
                                                f"between graph {before.graph_id} and graph {after.graph_id}, so "
                                                f"they cannot be packed into one matmul"))
    return out


# Dynamo names the function that continues a frame after a break ``torch_dynamo_resume_in_<fn>_at_<line>``
_RESUME = re.compile(r"^torch_dynamo_resume_in_(?P<fn>\w+?)_at_(?P<line>\d+)$")


def _unresumed(fn: str) -> str:
    """The user function a (possibly resumed, possibly twice) function name continues."""
    m = _RESUME.match(fn)
    return _unresumed(m["fn"]) if m else fn


def blocked_across_a_call(before: GraphEvent, later: GraphEvent) -> BlockedFusion | None:
    """Attention split by a break inside a function called between QK^T and the softmax (DeBERTa's ``.item()``
    in its relative-position bias): the graphs of that call come between, so ``later``, a graph compiled after
    ``before``, starts with the softmax in the function that resumes the matmul's frame after the call."""
    for op, (file, fn, line) in zip(before.tail_ops, before.tail_sites):
        if op not in _MATMUL or not file:
            continue
        for op2, (file2, fn2, _) in zip(later.head_ops, later.head_sites):
            resumed = _RESUME.match(fn2)
            if (op2 in _SOFTMAX and file2 == file and resumed and _unresumed(fn2) == _unresumed(fn)
                    and int(resumed["line"]) >= line):
                return BlockedFusion("attention_sdpa", f"the QK^T matmul ends graph {before.graph_id} and the "
                                                       f"softmax starts graph {later.graph_id}, where Dynamo resumes "
                                                       f"{_unresumed(fn)} after line {resumed['line']}, so attention "
                                                       "-> SDPA cannot match")
    return None


# ------------------------------------------------------------------------------------------------ merge


def build_breaks(timeline: list) -> list[GraphBreak]:
    """Deduplicated ``GraphBreak``s from a timeline of ``BreakEvent``s and ``GraphEvent``s (in event order)."""
    graphs = [e for e in timeline if isinstance(e, GraphEvent)]
    next_graph = {id(g): (graphs[i + 1] if i + 1 < len(graphs) else None) for i, g in enumerate(graphs)}
    occurrences: list[tuple[BreakEvent | GraphEvent, GraphEvent | None, GraphEvent | None]] = []
    pending: list[BreakEvent] = []
    for ev in timeline:
        if isinstance(ev, BreakEvent):
            pending.append(ev)
            continue
        # graph-less breaks logged before this graph: nothing was compiled before them; this graph comes next
        if ev.graph_break:
            logged = next((b for b in reversed(pending) if b.location and b.location == ev.location), None)
            if logged is not None:
                pending.remove(logged)
        for b in pending:
            occurrences.append((b, None, ev))
        pending = []
        if ev.graph_break:
            occurrences.append((_merge(logged, ev), ev, next_graph[id(ev)]))
    occurrences += [(b, None, None) for b in pending]

    by_key: dict[tuple[str, str], GraphBreak] = {}
    for info, before, after in occurrences:
        key = (info.reason, info.location)
        gb = by_key.get(key)
        if gb is None:
            gb = by_key[key] = GraphBreak(info.reason, info.location, info.explanation, list(info.hints),
                                          list(info.user_stack), count=0, url=getattr(info, "url", ""))
        gb.count += 1
        gb.between.append((before.graph_id if before else None, after.graph_id if after else None))
        gb.skipped_frame = gb.skipped_frame or getattr(info, "skipped_frame", False)
        if len(info.user_stack) > len(gb.user_stack):
            gb.user_stack = list(info.user_stack)
        found = blocked_fusions(before, after) if before is not None and after is not None else []
        if before is not None and "attention_sdpa" not in {bf.pattern for bf in found}:
            later = graphs[graphs.index(before) + 1:]
            found += [bf for bf in map(functools.partial(blocked_across_a_call, before), later) if bf][:1]
        for bf in found:
            if bf.pattern not in {x.pattern for x in gb.blocked}:
                gb.blocked.append(bf)
    return list(by_key.values())


def _merge(logged: BreakEvent | None, graph: GraphEvent) -> BreakEvent:
    """The log's reason is the richer one (registry title, hints); the graph's is the fallback."""
    if logged is None:
        return BreakEvent(graph.reason or "graph break", graph.location, graph.explanation, graph.hints,
                          graph.user_stack)
    if not logged.user_stack:
        logged.user_stack = list(graph.user_stack)
    return logged
