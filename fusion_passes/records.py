"""What a compile did: one ``GraphRecord`` per graph Dynamo hands to our backend.

A record holds, per hook our passes ran in, the graph code before and after them and the op counts, plus
every ``Match`` (a rewrite), ``NearMiss`` (a family almost matched, and why not) and ``PassError`` (a family
raised; its changes were rolled back). Reports and tests read these; nothing reads global counters.

    with fusion_passes.capture() as records:      # every graph compiled inside the block
        compiled(*args)
    fusion_passes.last_compile()                  # the most recent GraphRecord in this process
"""

from __future__ import annotations

import collections
import contextlib
import contextvars
import itertools
from dataclasses import dataclass, field
from typing import Iterator

__all__ = ["Match", "NearMiss", "PassError", "StageRecord", "GraphRecord", "capture", "last_compile", "history"]


@dataclass
class Match:
    """One rewrite: ``replaced`` ops (node names and ATen targets) became ``inserted`` ops."""

    pattern: str
    graph_id: int
    source: str  # "file.py:123 in fn: code line", or "" when the nodes carry no stack trace
    replaced: list[str]
    inserted: list[str]
    detail: dict = field(default_factory=dict)
    saved_bytes: int = 0  # bytes of intermediates this rewrite stops materialising


@dataclass
class NearMiss:
    """A place where ``pattern`` almost matched; ``reason`` says what to change for it to fire."""

    pattern: str
    graph_id: int
    source: str
    reason: str


@dataclass
class PassError:
    """A family raised while rewriting; the graph was restored to what it was before that family ran."""

    pattern: str
    graph_id: int
    error: str


@dataclass
class StageRecord:
    """The graph at one hook (``joint`` or ``post_grad``) before and after our passes."""

    hook: str
    code_before: str
    code_after: str = ""
    ops_before: dict[str, int] = field(default_factory=dict)
    ops_after: dict[str, int] = field(default_factory=dict)


@dataclass
class GraphRecord:
    """Everything our backend learned about one Dynamo graph."""

    graph_id: int
    patterns: tuple[str, ...]
    num_nodes: int = 0
    stages: list[StageRecord] = field(default_factory=list)
    matches: list[Match] = field(default_factory=list)
    near_misses: list[NearMiss] = field(default_factory=list)
    errors: list[PassError] = field(default_factory=list)
    kernels: int | None = None  # kernels Inductor generated for this graph (None: our passes did not run: served from
    # Inductor's FX cache, or nothing was left for Inductor to compile; report() compiles uncached and says 0)
    compile_s: float = 0.0
    pass_s: dict[str, float] = field(default_factory=dict)  # seconds each family took (both hooks), within compile_s
    sizes_moved: int = 0  # size queries graph_utils.read_sizes_early pointed at an earlier value (a rewrite too)
    cudagraphs: str = ""  # with cudagraphs="static": "static", or "trees (why not static)", or "none (why)"

    @property
    def passes_ran(self) -> bool:
        """False when none of our passes ran on this graph: Inductor served it from its FX graph cache, or no
        enabled family hooks in (``patterns=[]``)."""
        return bool(self.stages)

    def matches_for(self, pattern: str) -> list[Match]:
        return [m for m in self.matches if m.pattern == pattern]


_ids = itertools.count(1)
_history: collections.deque[GraphRecord] = collections.deque(maxlen=256)
_current: contextvars.ContextVar[GraphRecord | None] = contextvars.ContextVar("fusion_passes_record", default=None)
_sinks: list[list[GraphRecord]] = []


def new_record(patterns: tuple[str, ...]) -> GraphRecord:
    rec = GraphRecord(graph_id=next(_ids), patterns=patterns)
    _history.append(rec)
    for sink in _sinks:
        sink.append(rec)
    return rec


def discard(rec: GraphRecord) -> None:
    """Forget ``rec``: its compile was abandoned (Dynamo restarts analysis by raising out of the backend)."""
    for seq in (_history, *_sinks):
        for i, r in enumerate(seq):
            if r is rec:
                del seq[i]
                break


@contextlib.contextmanager
def active(rec: GraphRecord) -> Iterator[GraphRecord]:
    """Make ``rec`` the record that passes running in this thread write to."""
    token = _current.set(rec)
    try:
        yield rec
    finally:
        _current.reset(token)


def current() -> GraphRecord | None:
    return _current.get()


@contextlib.contextmanager
def capture() -> Iterator[list[GraphRecord]]:
    """Collect the records of every graph compiled with our backend inside the block."""
    sink: list[GraphRecord] = []
    _sinks.append(sink)
    try:
        yield sink
    finally:
        # by identity: two nested captures can hold equal lists, and list.remove compares contents
        _sinks[:] = [s for s in _sinks if s is not sink]


def last_compile() -> GraphRecord | None:
    """The record of the most recent graph our backend compiled in this process, or None."""
    return _history[-1] if _history else None


def history() -> list[GraphRecord]:
    """Records of recent graphs (up to 256), oldest first."""
    return list(_history)
