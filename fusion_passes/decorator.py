"""``@fuse``: compile with our backend by decoration.

    @fuse                                   # on an nn.Module subclass: each instance compiles forward lazily
    class Block(nn.Module): ...

    model = fuse(model, patterns=["attention_sdpa"])   # on an instance: compiled in place, state_dict unchanged

    @fuse(mode="reduce-overhead")           # on a function
    def step(x): ...
"""

from __future__ import annotations

import functools

import torch
from torch import nn

from .backend import FusionBackend

__all__ = ["fuse"]

_COMPILED_ATTR = "_fusion_passes_compiled_forward"


def fuse(target=None, *, patterns=None, exclude=(), mode=None, options=None, dynamic=None, fullgraph=False,
         cudagraphs=None):
    """Decorate an ``nn.Module`` subclass, an ``nn.Module`` instance or a function (bare or with options); the
    keywords are ``fusion_passes.backend``'s, plus ``fullgraph`` for ``torch.compile``."""
    be = FusionBackend(patterns=patterns, exclude=exclude, mode=mode, options=options, dynamic=dynamic,
                       cudagraphs=cudagraphs)
    kwargs = dict(backend=be, dynamic=dynamic, fullgraph=fullgraph)

    def apply(obj):
        if isinstance(obj, type) and issubclass(obj, nn.Module):
            return _fuse_module_class(obj, kwargs)
        if isinstance(obj, nn.Module) and isinstance(getattr(obj, "_orig_mod", None), nn.Module):
            # torch.compile's wrapper keeps its own backend when compiled again: none of our passes would run
            raise TypeError(f"@fuse got a module that torch.compile already wrapped ({type(obj._orig_mod).__name__}); "
                            "fuse the module itself, fuse(model._orig_mod) or fuse(model) instead of torch.compile")
        if isinstance(obj, nn.Module):
            # nn.Module.compile compiles in place, so parameter names (state_dict keys) stay as they were,
            # unlike torch.compile(module), which wraps it and prefixes every key with "_orig_mod.".
            obj.compile(**kwargs)
            return obj
        if callable(obj):
            return functools.wraps(obj)(torch.compile(obj, **kwargs))
        raise TypeError(f"@fuse applies to an nn.Module subclass or instance, or a function; got {type(obj).__name__}"
                        " (its options are keywords: @fuse(patterns=[...]))")

    return apply if target is None else apply(target)


class _CompiledForward:
    """One instance's compiled forward, kept in its ``__dict__`` (not as a submodule, so state_dict and
    named_modules are unchanged). It calls the instance it was compiled for, so a copy must not reuse it: a shallow
    copy fails the ``owner`` check, and deepcopy and pickling leave an empty one (a compiled function does not
    pickle, and deepcopy would share it), so the copy compiles its own forward on its first call."""

    __slots__ = ("owner", "fn")

    def __init__(self, owner=None, fn=None):
        self.owner, self.fn = owner, fn

    def __deepcopy__(self, memo):
        return _CompiledForward()

    def __reduce__(self):
        return _CompiledForward, ()


def _fuse_module_class(cls: type, kwargs: dict) -> type:
    original_forward = cls.forward

    @functools.wraps(original_forward)
    def forward(self, *args, **kw):
        if torch.compiler.is_compiling():
            # already inside a trace (torch.export, an enclosing torch.compile or @fuse, a class decorated twice):
            # that trace compiles this code; compiling it again in there recursed without end
            return original_forward(self, *args, **kw)
        held = self.__dict__.get(_COMPILED_ATTR)
        if held is None or held.owner is not self:
            held = _CompiledForward(self, torch.compile(original_forward.__get__(self), **kwargs))
            self.__dict__[_COMPILED_ATTR] = held
        return held.fn(*args, **kw)

    cls.forward = forward
    cls._fusion_passes_backend = kwargs["backend"]
    return cls
