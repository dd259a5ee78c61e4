"""The worker keeps torch's bytecode in the harness's cache when torch was installed without any,
so a second session's worker does not compile torch's sources again; an install that has its
bytecode is left as it is, and no job ever writes bytecode."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from cuda_agent_cli import resources

_PROBE = """
import json, sys
sys.path.insert(0, {tools!r})
sys.path.insert(0, {site!r})
import worker
kept = worker.keep_bytecode({folder!r}, "fakepkg")
with worker.writing_bytecode():
    import fakepkg
import fakepkg_later  # imported as a job would: after the worker's own imports
print(json.dumps({{"kept": kept, "dont_write": sys.dont_write_bytecode,
                  "cached": fakepkg.__spec__.cached, "later": fakepkg_later.__spec__.cached}}))
"""


def _site(tmp_path: Path, with_bytecode: bool) -> Path:
    site = tmp_path / "site"
    pkg = site / "fakepkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("def f(x):\n    return x + 1\n")
    (site / "fakepkg_later.py").write_text("VALUE = 1\n")
    if with_bytecode:
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(pkg)], check=True)
    return site


def _worker_process(site: Path, folder: Path) -> dict:
    code = _PROBE.format(tools=str(resources.tools_dir()), site=str(site), folder=str(folder))
    out = subprocess.run([sys.executable, "-E", "-B", "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_an_install_without_bytecode_gets_it_kept_in_the_cache_for_the_next_worker(tmp_path: Path) -> None:
    site = _site(tmp_path, with_bytecode=False)
    folder = tmp_path / "cache" / "bytecode"
    first = _worker_process(site, folder)
    assert first["kept"] and first["dont_write"], "jobs after the worker's own imports must not write bytecode"
    kept = Path(first["cached"])
    assert kept.is_file() and folder in kept.parents
    assert not list(site.rglob("*.pyc")), "the install itself is left untouched"
    assert not Path(first["later"]).exists(), "an import outside the worker's own wrote bytecode"
    second = _worker_process(site, folder)
    assert second["cached"] == first["cached"] and kept.stat().st_mtime_ns == Path(second["cached"]).stat().st_mtime_ns


def test_an_install_with_its_own_bytecode_keeps_using_it(tmp_path: Path) -> None:
    site = _site(tmp_path, with_bytecode=True)
    folder = tmp_path / "cache" / "bytecode"
    out = _worker_process(site, folder)
    assert not out["kept"]
    assert Path(out["cached"]).is_file() and site in Path(out["cached"]).parents
    assert not folder.exists()
