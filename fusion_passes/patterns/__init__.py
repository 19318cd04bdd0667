"""The pattern-family registry.

Each family is a module here (``fusion_passes/patterns/<name>.py``) exporting:

    NAME: str                      # the name users pass in patterns=/exclude=
    HOOK: "joint" | "post_grad"    # which Inductor hook it runs in
    DESCRIPTION: str               # one line, shown by `fusion-passes patterns`
    DEPENDS: tuple (optional)      # modules whose source enters the FX-cache key (e.g. its kernels)
    cache_key() -> str (optional)  # run-time settings that change its output, for the FX-cache key
    apply(graph, ctx) -> None      # rewrite `graph` in place, reporting through ctx (a PassContext)

A family's settings are environment variables read with ``env_policy``: ``<X>POLICY_ENV = "FUSION_PASSES_..."``
with its choices in ``<X>POLICIES`` (default first), in the family's module or one of its ``DEPENDS``;
``settings()`` finds them there (``fusion-passes settings`` lists them) and ``check_settings()`` warns about a
``FUSION_PASSES_*`` variable that nothing reads (a typo, or a setting since removed).

Families run in the order of ``BUILTIN`` within their hook; joint-graph families run before post-grad ones.
Adding a family: its module, one line in ``BUILTIN``, one test file.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from types import ModuleType

__all__ = ["BUILTIN", "HOOKS", "available_patterns", "check_settings", "env_policy", "get_family", "register_pattern",
           "resolve", "settings", "unknown_settings"]

HOOKS = ("joint", "post_grad")

# name -> module. Order is run order: attention is rewritten before packing changes the projections it reads;
# decode_gemv takes the decode-sized linears (with their norms) before packing and the norm family see them;
# norms last because packing does not touch them.
BUILTIN: dict[str, str] = {
    "attention_sdpa": "fusion_passes.patterns.attention_sdpa",
    "decode_gemv": "fusion_passes.patterns.decode_gemv",
    "qkv_packing": "fusion_passes.patterns.qkv_packing",
    "residual_norm": "fusion_passes.patterns.residual_norm",
    "state_updates": "fusion_passes.patterns.state_updates",
    "outer_product": "fusion_passes.patterns.outer_product",
}

_extra: dict[str, ModuleType] = {}  # families added at run time with register_pattern
_loaded: dict[str, ModuleType] = {}


def env_policy(env: str, choices: tuple[str, ...]) -> str:
    """A family's policy from environment variable ``env`` (default ``choices[0]``); a clear error otherwise.
    Families return it from ``cache_key()``, so changing it misses the FX graph cache."""
    return _checked(env, os.environ.get(env, choices[0]), choices)


def _checked(env: str, value: str, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ValueError(f"{env}={value!r}; use one of {', '.join(choices)}")
    return value


# FUSION_PASSES_* variables read outside the families: name -> (choices, the module that reads it). RAISE=1: a
# pass's error is raised instead of reported and compiled around
OTHER_SETTINGS = {"FUSION_PASSES_RAISE": (("0", "1"), "fusion_passes.backend")}
# Settings that were removed, and what to do instead: a user's stale setting would otherwise do nothing silently
REMOVED_SETTINGS = {
    "FUSION_PASSES_SDPA_BACKEND": "removed in session 21 (cuDNN's attention measured faster than flash on the H200 at "
                                  "every prefill size); to rule cuDNN out, call "
                                  "torch.backends.cuda.enable_cudnn_sdp(False) before the compiled model's first call",
    "FUSION_PASSES_GEMV_EPILOGUE_LOADS": "removed in session 16 (measured no faster)",
}
_warned_settings: set[str] = set()


def settings() -> dict[str, tuple[tuple[str, ...], str]]:
    """Every ``FUSION_PASSES_*`` setting: name -> (choices, default first; the module that reads it). Imports the
    built-in families (one that fails to import is skipped: its settings are then not listed)."""
    found = dict(OTHER_SETTINGS)
    for name in available_patterns():
        try:
            family = get_family(name)
        except Exception:  # noqa: BLE001 - load() reports it when the family is asked for
            continue
        for module in (family, *getattr(family, "DEPENDS", ())):
            for attr, value in dict(getattr(module, "__dict__", {})).items():
                if attr.endswith("POLICY_ENV") and isinstance(value, str) and value not in found:
                    # a registered family without the choices next to it still has its setting known
                    choices = getattr(module, attr.removesuffix("POLICY_ENV") + "POLICIES", ())
                    found[value] = (tuple(choices), getattr(module, "__name__", repr(module)))
    return found


def unknown_settings(environ=None, known=None) -> list[str]:
    """The ``FUSION_PASSES_*`` variables in ``environ`` (default: ``os.environ``), in its order, that no setting in
    ``known`` (default: ``settings()``, looked up only when such a variable is set) reads."""
    environ = os.environ if environ is None else environ
    names = [k for k in environ if k.startswith("FUSION_PASSES_")]
    if not names:
        return []
    known = settings() if known is None else known
    return [k for k in names if k not in known]


def check_settings(environ=None) -> list[str]:
    """Warn (once per process and name) about each ``FUSION_PASSES_*`` variable in ``environ`` (default:
    ``os.environ``) that no setting reads, naming the valid ones or, for a removed one, what to do instead; raise
    ``ValueError`` for a known setting's invalid value (read later, inside the compile or its cache key, it would
    fail or fall back depending on whether Inductor's cache is on). Returns the unknown names."""
    import warnings

    environ = os.environ if environ is None else environ
    if not any(k.startswith("FUSION_PASSES_") for k in environ):
        return []
    known = settings()
    for name, (choices, _module) in known.items():
        if name in environ and choices:
            _checked(name, environ[name], choices)
    unknown = unknown_settings(environ, known)
    for name in unknown:
        if name in _warned_settings:
            continue
        _warned_settings.add(name)
        why = REMOVED_SETTINGS.get(name) or f"no such setting; the settings are {', '.join(sorted(known))}"
        warnings.warn(f"fusion_passes: {name} is ignored: {why}", stacklevel=3)
    return unknown


def _present(name: str) -> bool:
    return importlib.util.find_spec(BUILTIN[name]) is not None


def available_patterns() -> list[str]:
    """Names accepted by ``patterns=``/``exclude=``, in run order."""
    return [n for n in BUILTIN if _present(n)] + list(_extra)


def get_family(name: str) -> ModuleType:
    if name in _extra:
        return _extra[name]
    if name not in _loaded:
        _loaded[name] = importlib.import_module(BUILTIN[name])
    return _loaded[name]


def load(names) -> tuple[tuple[str, ...], dict[str, str]]:
    """Import the named families; one that fails to import is left out (with a warning) rather than
    failing the user's compile. Returns (loaded names, {name: error})."""
    import warnings

    ok, errors = [], {}
    for name in names:
        try:
            get_family(name)
            ok.append(name)
        except Exception as e:  # noqa: BLE001
            errors[name] = f"{type(e).__name__}: {e}"
            warnings.warn(f"fusion_passes: pattern family {name!r} failed to load and is disabled: {errors[name]}",
                          stacklevel=3)
    return tuple(ok), errors


def register_pattern(family) -> str:
    """Add a family (a module or object with NAME, HOOK, DESCRIPTION, apply) to the registry; returns its name.

    For plugins and tests. Registering the same name again replaces the earlier family.
    """
    for attr in ("NAME", "HOOK", "apply"):
        if not hasattr(family, attr):
            raise TypeError(f"a pattern family needs NAME, HOOK and apply(graph, ctx); {family!r} has no {attr}")
    if family.HOOK not in HOOKS:
        raise ValueError(f"pattern family {family.NAME!r} has HOOK={family.HOOK!r}; use one of {HOOKS}")
    if family.NAME in BUILTIN:
        raise ValueError(f"{family.NAME!r} is a built-in family name; choose another")
    _extra[family.NAME] = family
    return family.NAME


def unregister_pattern(name: str) -> None:
    _extra.pop(name, None)


def _check_names(names, what: str) -> None:
    valid = available_patterns()
    unknown = [n for n in names if n not in valid]
    if unknown:
        raise ValueError(
            f"unknown pattern name(s) in {what}=: {', '.join(map(repr, unknown))}. "
            f"Valid names: {', '.join(valid)}"
        )


def resolve(patterns=None, exclude=()) -> tuple[str, ...]:
    """The enabled family names, in run order. ``patterns=None`` means every built-in family.

    Raises ValueError naming the valid choices for an unknown name.
    """
    if isinstance(patterns, str):
        patterns = [patterns]
    if isinstance(exclude, str):
        exclude = [exclude]
    exclude = tuple(exclude or ())
    _check_names(exclude, "exclude")
    if patterns is None:
        chosen = [n for n in BUILTIN if _present(n)]
    else:
        patterns = list(patterns)
        _check_names(patterns, "patterns")
        chosen = patterns
    order = available_patterns()
    return tuple(sorted((n for n in set(chosen) if n not in exclude), key=order.index))
