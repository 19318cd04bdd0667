"""The ``fusion_passes`` torch.compile backend: Inductor with our passes installed for one compile.

    torch.compile(model, backend="fusion_passes")                       # all families (entry point)
    torch.compile(model, backend=fusion_passes.backend(exclude=["qkv_packing"], mode="reduce-overhead"))
    torch.compile(model, backend=fusion_passes.backend(cudagraphs="static"))   # our lean CUDA graphs (decode)

``FusionBackend.__call__(gm, example_inputs)`` builds a ``FusionGraphPass`` per hook, chaining whatever pass
the user had in that hook, and hands them to ``compile_fx`` as ``config_patches``: Inductor applies the
patches only while it compiles, so global config is left exactly as it was.
"""

from __future__ import annotations

import copy
import functools
import os
import time
import warnings
from typing import Any, Sequence

import torch
from torch._inductor import config as inductor_config
from torch._inductor import metrics

from . import records
from .kernels import access_memo, pdl
from .records import PassError
from .pass_manager import HOOK_CONFIG, FusionGraphPass
from .static_cudagraphs import StaticCudaGraphs, blocker
from .patterns import check_settings, get_family, load, resolve

__all__ = ["FusionBackend", "backend", "fusion_passes_backend", "CUDAGRAPHS"]

# None: as ``mode`` says; "trees": Inductor's cudagraph trees (what mode="reduce-overhead" turns on);
# "static": fusion_passes.static_cudagraphs, falling back to trees for a graph it cannot take
CUDAGRAPHS = (None, "trees", "static")


class FusionBackend:
    """A configured backend callable. Build it with :func:`backend`."""

    def __init__(self, patterns=None, exclude=(), mode: str | None = None, options: dict | None = None, dynamic=None,
                 cudagraphs: str | None = None):
        if cudagraphs not in CUDAGRAPHS:
            raise ValueError(f"unknown cudagraphs={cudagraphs!r}; choose one of {', '.join(map(repr, CUDAGRAPHS))}")
        if dynamic not in (None, True, False):
            raise TypeError(f"dynamic={dynamic!r}: use None (torch.compile decides), True or False")
        patterns, exclude = _names(patterns, "patterns"), _names(exclude, "exclude")
        both = [n for n in patterns or () if n in (exclude or ())]
        if both:  # enabled and left out: either way the other half of the request is silently dropped
            raise ValueError(f"{', '.join(map(repr, both))} in both patterns= and exclude=; name each family in one")
        self.patterns, self.load_errors = load(resolve(patterns, exclude))
        self.mode = mode
        self.options = _options(options)
        if cudagraphs is not None and "triton.cudagraphs" in self.options:  # one of them was silently overridden
            raise ValueError(f"cudagraphs={cudagraphs!r} and options={{'triton.cudagraphs': "
                             f"{self.options['triton.cudagraphs']!r}}} both choose CUDA graphs; give only cudagraphs=")
        self.dynamic = dynamic
        self.cudagraphs = cudagraphs
        self._inductor_options()  # validate mode/options now, not at the first call
        check_settings()  # a misspelt or removed FUSION_PASSES_* setting would otherwise do nothing, silently

    def __repr__(self) -> str:
        return (f"fusion_passes.backend(patterns={list(self.patterns)}, mode={self.mode!r}, options={self.options}, "
                f"cudagraphs={self.cudagraphs!r})")

    def _inductor_options(self, trees: bool = False) -> dict[str, Any]:
        """The user's mode/options as Inductor config (``trees``: with Inductor's CUDA graphs, for a graph that
        static CUDA graphs cannot take)."""
        from torch._inductor import list_mode_options

        if self.mode is not None and self.mode not in list_mode_options():
            raise ValueError(f"unknown mode {self.mode!r}; choose one of {', '.join(list_mode_options())}")
        opts = dict(list_mode_options(self.mode, self.dynamic)) if self.mode else {}
        opts.update(self.options)
        if self.cudagraphs is not None:  # "static" wraps Inductor's output itself, so Inductor's trees stay off
            opts["triton.cudagraphs"] = self.cudagraphs == "trees" or trees
        valid = set(inductor_config.get_config_copy())
        bad = [k for k in opts if k not in valid]
        if bad:
            raise ValueError(f"unknown Inductor option(s) {bad}; see torch._inductor.list_options() for valid ones")
        return opts

    def config_patches(self, grad_enabled: bool, trees: bool = False, static: bool = False) -> dict[str, Any]:
        """Inductor config for one compile: ``_inductor_options(trees)`` plus our passes in their hooks; ``static``:
        the graph will run as one of our static CUDA graphs."""
        patches = self._inductor_options(trees)
        graphed = static or pdl.compiling_for_graphs() or bool(
            patches.get("triton.cudagraphs", inductor_config.triton.cudagraphs))
        for hook, attr in HOOK_CONFIG.items():
            families = tuple(n for n in self.patterns if get_family(n).HOOK == hook)
            if not families:
                continue
            chained = patches.get(attr, getattr(inductor_config, attr))
            patches[attr] = FusionGraphPass(hook, families, chained=chained, grad_enabled=grad_enabled,
                                            graphed=graphed)
        return patches

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: Sequence[Any], mode: str | None = None,
                 options: dict | None = None):
        """Compile one Dynamo graph. ``mode``/``options`` are what ``torch.compile`` hands a callable backend
        when given them (HF's ``CompileConfig`` passes ``mode="reduce-overhead"``): the backend's own win."""
        if mode or options:
            configured = copy.copy(self)
            configured.mode = self.mode or mode
            configured.options = {**_options(options), **self.options}
            return configured(gm, example_inputs)
        from torch._inductor.compile_fx import compile_fx

        grad_enabled = records_gradients(gm, example_inputs)
        rec = records.new_record(self.patterns)
        rec.num_nodes = len(gm.graph.nodes)
        static = self.cudagraphs == "static"
        static_blocker = blocker(gm, example_inputs, grad_enabled) if static else None
        trees = static_blocker is not None and _on_cuda(example_inputs)
        if static:
            rec.cudagraphs = f"{'trees' if trees else 'none'} ({static_blocker})" if static_blocker else "static"
        rec.errors.extend(PassError(n, rec.graph_id, f"failed to load: {e}") for n, e in self.load_errors.items())
        kernels_before = metrics.generated_kernel_count
        start = time.perf_counter()
        fell_back = False
        try:
            with records.active(rec), access_memo.memoized():
                patches = self.config_patches(grad_enabled, trees, static=static and static_blocker is None)
                compiled = compile_fx(gm, example_inputs, config_patches=patches)
        except Exception as e:
            if (not (rec.matches or rec.sizes_moved) or isinstance(e, torch._dynamo.exc.RestartAnalysis)
                    or os.environ.get("FUSION_PASSES_RAISE") == "1"):
                records.discard(rec)  # Dynamo's restart-analysis signals: the graph will come again
                raise
            compiled = self._compile_unrewritten(gm, example_inputs, rec, e, trees)
            fell_back = True
        except BaseException:
            records.discard(rec)
            raise
        rec.compile_s = time.perf_counter() - start
        if rec.passes_ran or fell_back or not self.patterns:
            rec.kernels = metrics.generated_kernel_count - kernels_before
        if static and static_blocker is None:
            return StaticCudaGraphs(compiled, example_inputs, functools.partial(_static_skipped, rec))
        return compiled

    def _compile_unrewritten(self, gm, example_inputs, rec: records.GraphRecord, error: Exception, trees: bool):
        """Inductor failed on a graph our rewrites changed (e.g. it could not compile one of our kernels): compile
        the graph as stock Inductor would, warn, and leave the record saying so (no rewrite is in the code)."""
        from torch._inductor.compile_fx import compile_fx

        fired = sorted({m.pattern for m in rec.matches})
        reason = f"{type(error).__name__}: {next(iter(str(error).strip().splitlines()), '')}"
        what = f"{', '.join(fired)} rewrote it" if fired else f"we moved {rec.sizes_moved} of its size queries"
        message = (f"Inductor failed to compile graph {rec.graph_id} after {what} ({reason}); "
                   "compiled it without fusion passes")
        warnings.warn(f"fusion_passes: {message}", stacklevel=3)
        rec.matches.clear()
        rec.stages.clear()
        rec.near_misses.clear()
        rec.sizes_moved = 0
        rec.errors.extend(PassError(name, rec.graph_id, message) for name in fired or ["(size queries)"])
        return compile_fx(gm, example_inputs, config_patches=self._inductor_options(trees))

    def compile(self, model, **kwargs):
        """``torch.compile(model, backend=self, dynamic=self.dynamic, **kwargs)``."""
        kwargs.setdefault("dynamic", self.dynamic)
        return torch.compile(model, backend=self, **kwargs)


def backend(patterns=None, exclude=(), mode: str | None = None, options: dict | None = None, dynamic=None,
            cudagraphs: str | None = None):
    """A backend for ``torch.compile(..., backend=fusion_passes.backend(...))``.

    patterns: family names to enable (None: all); exclude: names to leave out. Unknown names raise ValueError
    listing the valid ones. mode/options: forwarded to Inductor like ``torch.compile``'s (``mode=
    "reduce-overhead"`` turns on CUDA graphs). dynamic: used by ``.compile()``, ``fuse`` and the CLI; with
    ``torch.compile`` pass ``dynamic=`` there. cudagraphs: None (as ``mode`` says), "trees" (Inductor's CUDA graphs)
    or "static" (``fusion_passes.static_cudagraphs``: far less host time per call for fixed-shape inference such as
    a decode step; a graph it cannot take gets Inductor's, and the record says why).
    """
    return FusionBackend(patterns=patterns, exclude=exclude, mode=mode, options=options, dynamic=dynamic,
                         cudagraphs=cudagraphs)


def fusion_passes_backend(gm: torch.fx.GraphModule, example_inputs, mode: str | None = None,
                          options: dict | None = None):
    """The entry-point backend behind ``backend="fusion_passes"``: every family. ``torch.compile`` hands a
    non-Inductor backend its ``mode=`` / ``options=`` as keywords (HF's ``generate`` compiles with
    ``mode="reduce-overhead"`` by default); they go to Inductor as with ``backend="inductor"``."""
    return FusionBackend()(gm, example_inputs, mode=mode, options=options)


def register_by_name() -> bool:
    """Let ``backend="fusion_passes"`` work where the package is imported from a checkout without being installed
    (``PYTHONPATH=.``): torch.compile finds the name through the installed entry point, which such a checkout lacks.
    Registers only then, since torch registers the entry point itself on first use and refuses a name twice.
    Returns whether it registered."""
    from importlib.metadata import entry_points

    if entry_points(group="torch_dynamo_backends", name="fusion_passes"):
        return False
    try:
        torch._dynamo.register_backend(fusion_passes_backend, name="fusion_passes")
    except AssertionError:  # registered already (an earlier call)
        return False
    return True


def _names(value, what: str):
    """``patterns=`` / ``exclude=`` as None, one name or a list of names; a TypeError naming the fix for anything
    else (an int gave "'int' object is not iterable", bytes a list of numbers, a dict of flags its keys)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, (bytes, dict)) or not hasattr(value, "__iter__"):
        raise TypeError(f"{what}={value!r}: give family names as a list of strings, e.g. {what}=['qkv_packing'] "
                        "(fusion_passes.available_patterns() lists them)")
    names = list(value)
    bad = [n for n in names if not isinstance(n, str)]
    if bad:
        raise TypeError(f"{what}= holds {', '.join(map(repr, bad))}; family names are strings, e.g. "
                        f"{what}=['qkv_packing'] (fusion_passes.available_patterns() lists them)")
    return names


def _options(options) -> dict:
    """Inductor options as a dict of their own; a TypeError naming the fix for anything else."""
    if options is None:
        return {}
    if not isinstance(options, dict) or not all(isinstance(k, str) for k in options):
        raise TypeError(f"options={options!r}: give a dict of Inductor option names to values, e.g. "
                        "options={'max_autotune': True} (torch._inductor.list_options() lists them)")
    return dict(options)


def records_gradients(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> bool:
    """Whether the graph records gradients (AOTAutograd builds a training graph for it): an input requires grad, and
    autograd is on, or the graph turns it on itself (``with torch.enable_grad():`` traced inside a call made under
    ``torch.no_grad()``: Dynamo writes it as ``_set_grad_enabled(True)``, and those outputs require grad)."""
    if not any(isinstance(x, torch.Tensor) and x.requires_grad for x in example_inputs):
        return False
    return torch.is_grad_enabled() or any(
        n.op == "call_function" and n.target is torch._C._set_grad_enabled and bool(n.args and n.args[0])
        for n in gm.graph.nodes
    )


def _on_cuda(example_inputs) -> bool:
    return any(isinstance(x, torch.Tensor) and x.is_cuda for x in example_inputs)


def _static_skipped(rec: records.GraphRecord, reason: str) -> None:
    """A static CUDA graph found at run time that it cannot replay this graph: say so where the user looks."""
    rec.cudagraphs = f"none ({reason})"
    warnings.warn(f"fusion_passes: graph {rec.graph_id} runs without CUDA graphs: {reason}", stacklevel=3)
