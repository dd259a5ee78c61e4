"""`cuda-agent chat --resume`: the flag rules of optimize's --resume (run/settings.py), before the app opens."""

from __future__ import annotations

from pathlib import Path

import pytest
from chat_helpers import make_repo, replay_file, runtime

from cuda_agent_cli.errors import BadInput


@pytest.fixture
def chat(tmp_path: Path) -> tuple[Path, str, str]:
    """A chat session over a repository, started with a replay model: (repo, model, session id)."""
    repo = make_repo(tmp_path / "repo")
    model = f"replay:{replay_file(tmp_path / 'first.jsonl', [])}"
    rt = runtime(repo, model, tmp_path / "data", allow_unsafe=True)
    rt.ensure_started()
    rt.close()
    return repo, model, rt.session_id


def test_without_flags_the_session_keeps_its_repository_and_model(chat, tmp_path: Path):
    repo, model, sid = chat
    again = runtime(None, None, tmp_path / "data", resume=sid, allow_unsafe=True)
    again.close()
    assert again.root == repo.resolve() and again.model_string == model
    assert again.cfg.origin_phrase("model") == "from the resumed session"


def test_a_model_flag_wins_over_the_session(chat, tmp_path: Path):
    _, _, sid = chat
    other = f"replay:{replay_file(tmp_path / 'other.jsonl', [])}"
    again = runtime(None, other, tmp_path / "data", resume=sid, allow_unsafe=True)
    again.close()
    assert again.model_string == other and again.cfg.origin_phrase("model") == "from --model"


def test_another_repository_is_refused_in_one_line(chat, tmp_path: Path):
    repo, _, sid = chat
    elsewhere = make_repo(tmp_path / "elsewhere")
    with pytest.raises(BadInput) as exc:
        runtime(elsewhere, None, tmp_path / "data", resume=sid, allow_unsafe=True)
    line = exc.value.one_line()
    assert "\n" not in line and f"cannot change resumed chat session {sid}" in line and str(repo) in line
    same = runtime(repo, None, tmp_path / "data", resume=sid, allow_unsafe=True)  # the same folder is fine
    same.close()
