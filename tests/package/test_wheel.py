"""A non-editable wheel carries tools/, sandbox/ and skills/, found through importlib.resources."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SHIPPED = {"tools": "tools_dir", "sandbox": "sandbox_template_dir"}


def _source_files() -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, capture_output=True, text=True, check=True
    )
    return [f for f in out.stdout.splitlines() if (REPO / f).is_file()]


@pytest.mark.integration
def test_wheel_installs_with_its_data_files(tmp_path: Path) -> None:
    src = tmp_path / "src"
    files = _source_files()
    for rel in files:
        dest = src / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, dest)
    dist = tmp_path / "dist"
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dist), str(src)],
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    wheel = next(dist.glob("cuda_agent-*.whl"))
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    py = env_dir / "bin" / "python"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "--no-index", "-q", str(wheel)],
        check=True,
        capture_output=True,
        text=True,
    )
    probe = (
        "import json, cuda_agent_cli\n"
        "from cuda_agent_cli import resources as r\n"
        "from pathlib import Path\n"
        "def listing(d):\n"
        "    return sorted(str(p.relative_to(d)) for p in Path(d).rglob('*') if p.is_file() and '__pycache__' not in p.parts)\n"
        "print(json.dumps({'pkg': cuda_agent_cli.__file__, 'tools': listing(r.tools_dir()),\n"
        "  'sandbox': listing(r.sandbox_template_dir()), 'skill': str(r.skill_path()),\n"
        "  'skill_exists': r.skill_path().is_file(), 'package': listing(Path(cuda_agent_cli.__file__).parent)}))\n"
    )
    out = subprocess.run([str(py), "-c", probe], cwd=tmp_path, capture_output=True, text=True, check=True)
    found = json.loads(out.stdout)
    assert found["pkg"].startswith(str(env_dir)), "the wheel, not the source tree, must be imported"

    for folder in ("tools", "sandbox"):
        expected = sorted(str(Path(f).relative_to(folder)) for f in files if f.startswith(folder + "/"))
        assert found[folder] == expected, f"{folder}/ in the wheel differs from the source"
    if (REPO / "skills" / "SKILL.md").is_file():
        assert found["skill_exists"]
    expected_py = sorted(
        str(Path(f).relative_to("cuda_agent_cli"))
        for f in files
        if f.startswith("cuda_agent_cli/") and not f.endswith((".pyc",))
    )
    missing = sorted(set(expected_py) - set(found["package"]))
    assert not missing, f"files of the package missing from the wheel: {missing}"
