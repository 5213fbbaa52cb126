"""Set-up files agree with each other, and the commands the README promises exist."""

import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def _req(spec: str) -> tuple[str, str]:
    m = re.match(r"^\s*([A-Za-z0-9_.\-]+)\s*(.*)$", spec)
    return m.group(1).lower().replace("_", "-"), m.group(2).replace(" ", "")


def test_environment_yml_agrees_with_pyproject():
    py = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    want = dict(_req(s) for s in py["dependencies"])
    for extra in py["optional-dependencies"].values():
        want.update(_req(s) for s in extra)
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    got = dict(_req(s) for s in pip if not s.startswith("-e"))
    assert got == want
    python = next(d for d in env["dependencies"] if isinstance(d, str) and d.startswith("python"))
    assert py["requires-python"].replace(" ", "") in python   # same lower bound


def test_readme_names_the_commands_and_ci_runs_the_test_one():
    readme = (ROOT / "README.md").read_text()
    for cmd in ("make report", "make test", "make lab"):
        assert f"`{cmd}`" in readme or f"\n{cmd}\n" in readme
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^make test$", ci, re.M)
    makefile = (ROOT / "Makefile").read_text()
    for target in ("report:", "test:", "lab:"):
        assert target in makefile
