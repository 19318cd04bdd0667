"""The ``fusion-passes`` command line: ``demo``, ``patterns``, ``settings`` and ``report``."""

from __future__ import annotations

import argparse
import os
import sys

__all__ = ["main"]


def _cmd_patterns(args) -> int:
    from tabulate import tabulate

    from .patterns import available_patterns, get_family

    rows = [(n, get_family(n).HOOK, getattr(get_family(n), "DESCRIPTION", "")) for n in available_patterns()]
    print(tabulate(rows, headers=["pattern", "hook", "what it does"], maxcolwidths=[None, None, 90]))
    return 0


def _cmd_settings(args) -> int:
    import os

    from tabulate import tabulate

    from .patterns import REMOVED_SETTINGS, settings, unknown_settings

    known = settings()

    def now(name, choices):
        value = os.environ.get(name)
        if value is None:
            return f"({choices[0]})" if choices else ""
        return value if value in choices or not choices else f"{value} (invalid)"

    rows = [(name, " | ".join(choices), now(name, choices), reader) for name, (choices, reader) in sorted(known.items())]
    print(tabulate(rows, headers=["setting", "choices (default first)", "now", "read by"]))
    for name in sorted(unknown_settings(known=known)):
        print(f"\n{name} is set but ignored: {REMOVED_SETTINGS.get(name, 'no such setting (a typo?)')}")
    return 0


def _cmd_demo(args) -> int:
    from .demo import run_demo

    return run_demo(model=args.model, device=args.device, dtype=args.dtype, batch=args.batch, seq=args.seq,
                    patterns=args.patterns, iters=args.iters)


def _positive_int(text: str) -> int:
    """An argparse type: a size or count of 0 or less failed deep inside the model (or the timing loop)."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not a positive integer")
    return value


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="fusion-passes", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="compile the embedded HF-style model, check it, show what fused and the speed")
    demo.add_argument("--model", default="llama", help="zoo model: llama, gpt2 or bert (default llama)")
    demo.add_argument("--device", default=None, help="cpu or cuda (default: cuda if available)")
    demo.add_argument("--dtype", default=None, help="float32, float16 or bfloat16 (default: bf16 on cuda, fp32 on cpu)")
    demo.add_argument("--batch", type=_positive_int, default=2)
    demo.add_argument("--seq", type=_positive_int, default=64)
    demo.add_argument("--iters", type=_positive_int, default=20, help="timed iterations per variant")
    demo.add_argument("--patterns", nargs="*", default=None, help="families to enable (default: all)")
    demo.set_defaults(func=_cmd_demo)

    pats = sub.add_parser("patterns", help="list the pattern families")
    pats.set_defaults(func=_cmd_patterns)

    sets = sub.add_parser("settings", help="list the FUSION_PASSES_* environment settings, their choices and values")
    sets.set_defaults(func=_cmd_settings)

    from .cli_report import add_report_parser  # noqa: E402 - `report` lives with the reports
    add_report_parser(sub)

    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, RuntimeError) as e:
        print(f"fusion-passes: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # the reader went away (`fusion-passes patterns | head -3`): stop quietly; stdout goes to /dev/null so that
        # Python's flush at exit does not raise it again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except OSError as e:  # a report that cannot be written (no permission, no space), a file the factory lacks
        print(f"fusion-passes: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
