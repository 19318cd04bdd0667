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


def _names_reaching_transformers(module: ast.Module) -> set[str]:
    """The names of ``module``'s functions and module-level names that import or name the transformers module,
    ``pytest.importorskip("transformers")``'s string or ``transformers_major``, or reach one of its names that do: by a
    call, a decorator (a parametrize over a table of builders) or, as a fixture, a parameter's name."""
    refers_to, found = {}, set()
    for f in module.body:
        if isinstance(f, ast.FunctionDef):
            name = f.name
        elif isinstance(f, ast.Assign) and len(f.targets) == 1 and isinstance(f.targets[0], ast.Name):
            name = f.targets[0].id  # a table of model builders that tests are parametrized over
        else:
            continue
        nodes = list(ast.walk(f))
        refers_to[name] = ({n.id for n in nodes if isinstance(n, ast.Name)}
                           | {n.arg for n in nodes if isinstance(n, ast.arg)}
                           | {n.name.split(".")[0] for n in nodes if isinstance(n, ast.alias)}
                           | {(n.module or "").split(".")[0] for n in nodes if isinstance(n, ast.ImportFrom)})
        if refers_to[name] & {"transformers", "transformers_major"} or any(
                isinstance(n, ast.Constant) and n.value == "transformers" for n in nodes):
            found.add(name)
    while grown := {name for name, used in refers_to.items() if name not in found and used & found}:
        found |= grown
    return found


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
        module_marks = [n.value for n in module.body if isinstance(n, ast.Assign)
                        and any(getattr(t, "id", None) == "pytestmark" for t in n.targets)]
        callers = _names_reaching_transformers(module)
        tests = [n for n in module.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")
                 and n.name in callers]
        assert tests, f"{f} has no test that builds a transformers model"
        unmarked += [f"{f}::{t.name}" for t in tests
                     if not any("mark.slow" in ast.unparse(m) for m in [*t.decorator_list, *module_marks])]
    assert not unmarked, f"mark these @pytest.mark.slow (CI reruns only those on transformers 4.x): {unmarked}"
