"""The README's set-up commands are the ones CI runs."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    ci_lines = [l for l in (ROOT / ".ci" / "run").read_text().splitlines() if l.startswith("pip install")]
    assert len(ci_lines) == 1, "the CI script must run exactly one install+test command"
    assert ci_lines[0] in readme.splitlines(), "CI's test command must appear verbatim in the README"
    assert "fusion-passes demo" in readme
