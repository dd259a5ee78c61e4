"""What the baselines-forging candidates must leave as it was: the harness's cached baselines."""

from __future__ import annotations

from pathlib import Path


def baseline_files(cache: Path) -> dict[str, bytes]:
    folder = cache / "baselines"
    return {p.name: p.read_bytes() for p in folder.glob("*.json")} if folder.is_dir() else {}


def assert_not_forged(before: dict[str, bytes], after: dict[str, bytes]) -> None:
    """The harness may add the reference's own baselines; nothing it had is changed or planted."""
    assert "planted.json" not in after
    assert all(after.get(name) == data for name, data in before.items())
    assert not any(b"forged" in data for data in after.values())
