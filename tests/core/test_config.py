"""Config precedence: flag > CUDA_AGENT_* env > repo pyproject > user config file > defaults."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent_cli.config import load_config, user_config_path
from cuda_agent_cli.errors import ConfigError


@pytest.fixture()
def layers(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    home = tmp_path / "home"
    env = {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}
    user = user_config_path(env)
    user.parent.mkdir(parents=True)
    user.write_text('model = "user/model"\npolicy = "hybrid"\nmax_turns = 11\nmax-cost = 1.5\n')
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "pyproject.toml").write_text(
        '[project]\nname = "x"\n\n[tool.cuda-agent]\nmodel = "repo/model"\nmax_turns = 22\n'
    )
    (repo / "pkg").mkdir()
    return repo / "pkg", env


def test_defaults_when_nothing_is_set(tmp_path: Path) -> None:
    cfg = load_config({}, cwd=tmp_path, env={"HOME": str(tmp_path)})
    assert cfg.model is None and cfg.policy == "strict" and cfg.max_turns == 200
    assert cfg.sources["max_turns"] == "default"


def test_each_layer_overrides_the_one_below(layers: tuple[Path, dict[str, str]]) -> None:
    cwd, env = layers
    cfg = load_config({}, cwd=cwd, env=env)
    assert cfg.model == "repo/model"  # repo beats user file
    assert cfg.max_turns == 22
    assert cfg.policy == "hybrid"  # only in the user file
    assert cfg.max_cost == 1.5  # dashed keys are accepted
    assert "config.toml" in cfg.sources["policy"]
    assert "[tool.cuda-agent]" in cfg.sources["model"]

    env2 = {**env, "CUDA_AGENT_MODEL": "env/model", "CUDA_AGENT_MAX_TURNS": "33"}
    cfg = load_config({}, cwd=cwd, env=env2)
    assert cfg.model == "env/model" and cfg.max_turns == 33
    assert cfg.sources["model"] == "environment"

    cfg = load_config({"model": "flag/model", "max_turns": None}, cwd=cwd, env=env2)
    assert cfg.model == "flag/model"  # flag beats everything
    assert cfg.max_turns == 33  # a flag left at None does not override
    assert cfg.sources["model"] == "flag"


def test_repo_config_is_not_read_past_the_git_root(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.cuda-agent]\nmodel = "outer"\n')
    inner = tmp_path / "inner"
    (inner / ".git").mkdir(parents=True)
    cfg = load_config({}, cwd=inner, env={"HOME": str(tmp_path / "h")})
    assert cfg.model is None


@pytest.mark.parametrize(
    "flags, message",
    [
        ({"device": "tpu"}, "`device` must be one of cuda, cpu"),
        ({"max_turns": "many"}, "`max_turns` must be an integer"),
        ({"policy": "lenient"}, "`policy` must be one of strict, hybrid"),
    ],
)
def test_bad_values_say_what_and_where(tmp_path: Path, flags: dict, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(flags, cwd=tmp_path, env={"HOME": str(tmp_path)})
    assert message in err.value.one_line()
    assert err.value.exit_code == 2


def test_unknown_key_and_bad_toml_are_reported(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "pyproject.toml").write_text('[tool.cuda-agent]\nmodle = "typo"\n')
    with pytest.raises(ConfigError, match="unknown setting `modle`"):
        load_config({}, cwd=tmp_path, env={"HOME": str(tmp_path)})
    (tmp_path / "pyproject.toml").write_text("[tool.cuda-agent\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config({}, cwd=tmp_path, env={"HOME": str(tmp_path)})


def test_unrelated_environment_variables_are_ignored(tmp_path: Path) -> None:
    cfg = load_config({}, cwd=tmp_path, env={"HOME": str(tmp_path), "CUDA_AGENT_SOMETHING_ELSE": "x"})
    assert cfg.model is None


def test_origin_names_the_place_a_setting_came_from(
    layers: tuple[Path, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    cwd, env = layers
    monkeypatch.chdir(cwd.parent)  # the repository root, where a user runs the command
    cfg = load_config({"timeout": 60}, cwd=cwd, env={**env, "CUDA_AGENT_MAX_COST": "2"})
    assert cfg.origin("max_turns") == "pyproject.toml"
    assert cfg.origin_phrase("max_turns") == "from pyproject.toml"
    assert cfg.origin("max_cost") == "CUDA_AGENT_MAX_COST"
    assert cfg.origin("timeout") == "--timeout"
    assert cfg.origin("context_tokens") == "default" and cfg.origin_phrase("context_tokens") == "(the default)"
    monkeypatch.chdir(cwd.parent.parent)
    assert cfg.origin("policy") == str(Path("home/.config/cuda-agent/config.toml"))
