"""The README's set-up commands are the ones CI runs, and CI's transformers 4.x pass takes every test it should."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    ci_lines = [l for l in (ROOT / ".ci" / "run").read_text().splitlines() if l.startswith("pip install")]
    assert len(ci_lines) == 1, "the CI script must run exactly one install+test command"
    assert ci_lines[0] in readme.splitlines(), "CI's test command must appear verbatim in the README"
    assert "fusion-passes demo" in readme


def _calls_into_transformers(fn: ast.FunctionDef, helpers: set[str]) -> bool:
    """Whether ``fn`` names the transformers module, ``pytest.importorskip("transformers")``'s string, or one of
    ``helpers`` (its file's functions that do)."""
    names = {"transformers", "transformers_major", *helpers}
    return any((isinstance(n, ast.Name) and n.id in names)
               or (isinstance(n, ast.Constant) and n.value == "transformers") for n in ast.walk(fn))


def _marked_slow(fn: ast.FunctionDef, module: ast.Module) -> bool:
    module_marks = [n.value for n in module.body if isinstance(n, ast.Assign)
                    and any(getattr(t, "id", None) == "pytestmark" for t in n.targets)]
    return any("mark.slow" in ast.unparse(m) for m in [*fn.decorator_list, *module_marks])


def test_ci_reruns_every_test_that_builds_a_transformers_model_on_4x():
    """CI's transformers 4.x pass runs only the ``slow`` tests of the files it names: every test there that calls
    into transformers must carry the mark, or 4.x would never run it."""
    ci = (ROOT / ".ci" / "run").read_text()
    (line,) = [l for l in ci.splitlines() if "-m slow" in l]
    files = re.findall(r"tests/\S+\.py", line)
    assert {"tests/test_hf_models.py", "tests/patterns/test_attention_sdpa.py"} <= set(files)
    unmarked = []
    for f in files:
        module = ast.parse((ROOT / f).read_text())
        functions = [n for n in module.body if isinstance(n, ast.FunctionDef)]
        helpers = {h.name for h in functions if not h.name.startswith("test_") and _calls_into_transformers(h, set())}
        tests = [t for t in functions if t.name.startswith("test_") and _calls_into_transformers(t, helpers)]
        assert tests, f"{f} has no test that builds a transformers model"
        unmarked += [f"{f}::{t.name}" for t in tests if not _marked_slow(t, module)]
    assert not unmarked, f"mark these @pytest.mark.slow (CI reruns only those on transformers 4.x): {unmarked}"
