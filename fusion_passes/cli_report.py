"""``fusion-passes report TARGET``: compile one call of a user's model with our backend and report what it did.

    fusion-passes report examples/report_graph_break.py:make_model --html report.html
    fusion-passes report mypkg.models:tiny_llama --device cuda --dtype bf16 --json report.json

TARGET names a factory, ``path/to/file.py:factory`` or ``package.module:factory``. The factory returns
``(model, example_inputs)`` (a tuple/list of positional inputs, a dict of keyword inputs, or one tensor) or
``(model, args, kwargs)``; it may take ``device`` and/or ``dtype`` keyword arguments, and the model and its
floating-point inputs are moved to ``--device``/``--dtype`` afterwards either way. The model runs in
``eval()`` under ``torch.no_grad()`` unless ``--train``. The report goes to stdout; progress, and anything the
user's code prints, to stderr.
Mistakes (bad TARGET, a factory returning the wrong thing, CUDA asked for but absent) raise ``ReportError``,
which ``fusion-passes`` prints with the fix and exit code 2.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import inspect
import os
import sys
from typing import Any

import torch

__all__ = ["ReportError", "add_report_parser", "load_factory", "build_inputs", "run_report"]

_DTYPES = {"float32": torch.float32, "fp32": torch.float32, "float16": torch.float16, "fp16": torch.float16,
           "half": torch.float16, "bfloat16": torch.bfloat16, "bf16": torch.bfloat16}
_TARGET_FORMS = "'path/to/file.py:factory' or 'package.module:factory'"


class ReportError(ValueError):
    """A usage mistake; the message says how to fix it."""


def add_report_parser(sub) -> argparse.ArgumentParser:
    """Register ``report`` on the ``fusion-passes`` subparsers."""
    p = sub.add_parser("report", help="compile one call of your model and report fusions, near misses, graph breaks",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("target", metavar="TARGET", help=f"the factory: {_TARGET_FORMS}")
    p.add_argument("--device", default=None, help="move the model and inputs here (cpu, cuda, cuda:1); default: as built")
    p.add_argument("--dtype", default=None, help=f"cast the model and float inputs: {', '.join(_DTYPES)}")
    p.add_argument("--html", metavar="OUT.html", default=None, help="write the self-contained HTML report here")
    p.add_argument("--json", metavar="OUT.json", nargs="?", const="-", default=None,
                   help="write the JSON report here; without a file (put it after TARGET), print JSON instead "
                        "of the text report")
    p.add_argument("--patterns", nargs="*", default=None, help="families to enable (default: all)")
    p.add_argument("--exclude", nargs="*", default=(), help="families to leave out")
    p.add_argument("--mode", default=None, help="Inductor mode, as for torch.compile (e.g. max-autotune)")
    p.add_argument("--cudagraphs", choices=["trees", "static"], default=None,
                   help="CUDA graphs: Inductor's trees, or fusion_passes' static graphs (default: as --mode says)")
    p.add_argument("--dynamic", action="store_true", help="compile with dynamic shapes")
    p.add_argument("--diffs", action="store_true", help="append the graph diffs to the text report")
    p.add_argument("--train", action="store_true", help="keep train() mode and autograd (default: eval + no_grad)")
    p.set_defaults(func=run_report)
    return p


def _say(msg: str) -> None:
    print(f"[fusion-passes] {msg}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------------ TARGET


def load_factory(target: str):
    """``path/to/file.py:factory`` or ``package.module:factory`` -> the factory callable."""
    where, sep, name = target.rpartition(":")
    if not sep or not where or not name or not name.isidentifier():
        raise ReportError(f"TARGET {target!r} must be {_TARGET_FORMS}: a colon, then the name of the function "
                          "that builds the model and its example inputs")
    if where.endswith(".py") or "/" in where or os.sep in where:
        module = _load_file(where, target)
    else:
        try:
            module = importlib.import_module(where)
        except ModuleNotFoundError as e:
            raise ReportError(f"cannot import {where!r} ({e}); check the module name and that its package is "
                              f"installed, or give a file path: path/to/{where.replace('.', '/')}.py:{name}") from e
        except Exception as e:  # noqa: BLE001 - the user's module failed while importing
            raise ReportError(f"importing {where!r} failed: {type(e).__name__}: {e}") from e
    factory = getattr(module, name, None)
    if factory is None:
        found = [n for n, v in vars(module).items()
                 if inspect.isfunction(v) and not n.startswith("_") and v.__module__ == module.__name__]
        raise ReportError(f"{where!r} has no {name!r}; functions defined there: {', '.join(found) or '(none)'}")
    if not callable(factory):
        raise ReportError(f"{where}:{name} is a {type(factory).__name__}, not a function; TARGET must name a "
                          "factory that returns (model, example_inputs)")
    return factory


def _load_file(where: str, target: str):
    path = os.path.abspath(where)
    if not os.path.isfile(path):
        raise ReportError(f"no such file {where!r} (TARGET {target!r}); paths are relative to {os.getcwd()}")
    mod_name = "_fusion_passes_target_" + "".join(c if c.isalnum() else "_" for c in os.path.splitext(where)[0])
    spec = importlib.util.spec_from_file_location(mod_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module  # dataclasses and pickling look modules up by name
    sys.path.insert(0, os.path.dirname(path))  # so the file can import its neighbours
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # noqa: BLE001 - the user's file failed while importing
        sys.modules.pop(mod_name, None)
        raise ReportError(f"running {where} failed: {type(e).__name__}: {e}") from e
    finally:
        sys.path.remove(os.path.dirname(path))
    return module


# ------------------------------------------------------------------------------------------------ inputs


def pick_device(device: str | None) -> str | None:
    if device is None:
        return None
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ReportError(f"--device {device} was requested but CUDA is not available (torch {torch.__version__}); "
                          "use --device cpu, or run on a machine with a CUDA build of torch and a GPU")
    try:
        torch.device(device)
    except RuntimeError as e:
        raise ReportError(f"--device {device!r} is not a device torch knows ({e}); use cpu or cuda") from e
    return device


def pick_dtype(dtype: str | None) -> torch.dtype | None:
    if dtype is None:
        return None
    if dtype not in _DTYPES:
        raise ReportError(f"unknown --dtype {dtype!r}; choose one of {', '.join(_DTYPES)}")
    return _DTYPES[dtype]


def _call_factory(factory, device, dtype):
    """Pass ``device``/``dtype`` to factories that accept them."""
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        params = {}
    var_kw = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    kwargs = {k: v for k, v in (("device", device), ("dtype", dtype)) if v is not None and (k in params or var_kw)}
    try:
        return factory(**kwargs)
    except Exception as e:  # noqa: BLE001 - the user's factory failed: say it was there, not in the report
        raise ReportError(f"{factory.__name__}() failed while building the model: {type(e).__name__}: {e}") from e


def _describe(obj) -> str:
    if isinstance(obj, tuple):
        return f"a tuple of {len(obj)} ({', '.join(type(x).__name__ for x in obj)})"
    name = type(obj).__name__
    return f"{'an' if name[0].lower() in 'aeiou' else 'a'} {name}"


def build_inputs(result, name: str) -> tuple[Any, tuple, dict]:
    """The factory's return value -> (model, args, kwargs), or ReportError saying what shape it should have."""
    usage = (f"{name}() must return (model, example_inputs) or (model, args, kwargs), e.g. "
             "`return model, (input_ids,)` or `return model, (), {'input_ids': ids}`")
    if isinstance(result, list):
        result = tuple(result)
    if not isinstance(result, tuple) or len(result) not in (2, 3):
        raise ReportError(f"{usage}; it returned {_describe(result)}")
    model = result[0]
    if not callable(model):
        raise ReportError(f"{usage}; its first item should be the model (an nn.Module or a function), "
                          f"got {_describe(model)}")
    if len(result) == 3:
        args, kwargs = result[1], result[2]
        if not isinstance(args, (tuple, list)) or not isinstance(kwargs, dict):
            raise ReportError(f"{usage}; with three items, args must be a tuple/list and kwargs a dict, got "
                              f"{_describe(args)} and {_describe(kwargs)}")
        return model, tuple(args), dict(kwargs)
    inputs = result[1]
    if isinstance(inputs, dict):
        return model, (), dict(inputs)
    if isinstance(inputs, (tuple, list)):
        return model, tuple(inputs), {}
    if isinstance(inputs, torch.Tensor):
        return model, (inputs,), {}
    raise ReportError(f"{usage}; example_inputs should be a tuple/list, a dict or a tensor, got {_describe(inputs)}")


def _move(obj, device, dtype):
    if isinstance(obj, torch.Tensor):
        if device is not None:
            obj = obj.to(device)
        if dtype is not None and obj.is_floating_point():
            obj = obj.to(dtype)
        return obj
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # a namedtuple takes its fields, not one iterable
        return type(obj)(*(_move(x, device, dtype) for x in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(_move(x, device, dtype) for x in obj)
    if isinstance(obj, dict):
        return {k: _move(v, device, dtype) for k, v in obj.items()}
    return obj


# ------------------------------------------------------------------------------------------------ run


def _check_output(flag: str, path: str | None) -> None:
    """A report path that cannot be written fails now, not with a traceback after the compile (minutes for a
    large model). ``--json -`` is stdout."""
    if path is None or path == "-":
        return
    if os.path.isdir(path):
        example = os.path.join(path, "report." + flag.lstrip("-"))
        raise ReportError(f"{flag} {path} is a directory; give a file name, e.g. {example}")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise ReportError(f"{flag} {path}: the folder {folder} does not exist; create it (mkdir -p {folder}) or write "
                          "the report elsewhere")


def run_report(args) -> int:
    from .backend import FusionBackend
    from .report import collect

    device, dtype = pick_device(args.device), pick_dtype(args.dtype)
    for flag, path in (("--html", args.html), ("--json", args.json)):
        _check_output(flag, path)
    backend_kw = dict(patterns=args.patterns, exclude=args.exclude, mode=args.mode, cudagraphs=args.cudagraphs)
    # stdout carries the report only (it may be JSON); whatever the user's code prints goes to stderr
    with contextlib.redirect_stdout(sys.stderr):
        factory = load_factory(args.target)
        FusionBackend(**backend_kw)  # its mistakes before the model is built (the import may register a family)
        _say(f"building the model: {args.target}")
        model, call_args, call_kwargs = build_inputs(_call_factory(factory, device, dtype), factory.__name__)
        if isinstance(model, torch.nn.Module):
            model = model.to(device=device, dtype=dtype) if (device or dtype) else model
            model.train(args.train)
        call_args, call_kwargs = _move(call_args, device, dtype), _move(call_kwargs, device, dtype)
        with contextlib.nullcontext() if args.train else torch.no_grad():
            rep = collect(model, call_args, call_kwargs, **backend_kw, dynamic=True if args.dynamic else None,
                          progress=_say, target=args.target)

    if args.html:
        rep.to_html(args.html)
        _say(f"wrote {args.html}")
    if args.json and args.json != "-":
        rep.to_json(args.json)
        _say(f"wrote {args.json}")
    print(rep.to_json() if args.json == "-" else rep.text(diffs=args.diffs))
    return 0
