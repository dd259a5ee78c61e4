"""Configuration, resolved in one place.

Precedence (docs/configuration.md, "Settings"): command-line flag > a resumed session's own settings >
`CUDA_AGENT_*` environment variable > `[tool.cuda-agent]` in the repository's pyproject.toml >
the user config file (`$XDG_CONFIG_HOME/cuda-agent/config.toml`) > built-in defaults.
Each resolved value remembers where it came from, so `doctor` can say why a setting is what it is.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Mapping, get_args

from cuda_agent_cli.assets.tools.precision import MODES as PRECISIONS
from cuda_agent_cli.errors import ConfigError

ENV_PREFIX = "CUDA_AGENT_"

# The harness's rules for a candidate (docs/verify.md, "Policy"): strict, the paper's, or hybrid.
Policy = Literal["strict", "hybrid"]
POLICIES: tuple[Policy, ...] = get_args(Policy)


@dataclass(frozen=True)
class Settings:
    """Every user-tunable setting with its default."""

    model: str | None = None
    api_base: str | None = None
    device: str | None = None  # None: cuda when a GPU is present, else cpu
    policy: Policy = "strict"
    max_turns: int = 200
    max_cost: float | None = None
    timeout: float | None = None  # seconds for a whole session
    context_tokens: int = 131072
    atol: float = 1e-2
    rtol: float = 1e-2
    # What outputs are held to (tools/precision.py): the module's own dtype, or a looser rule
    # the user names: tf32, fp16, bf16, or kernelbench (the paper's atol = rtol = 1e-2).
    precision: str = "dtype"
    permission_mode: str = "ask"
    reward_baseline: str = "paper"  # or "best" (harness/baselines.py)
    data_dir: str | None = None  # None: $XDG_DATA_HOME/cuda-agent


CHOICES: dict[str, tuple[str, ...]] = {
    "device": ("cuda", "cpu"),
    "policy": POLICIES,
    "precision": PRECISIONS,
    "permission_mode": ("ask", "accept-edits", "yolo"),
    "reward_baseline": ("paper", "best"),
}

_FIELDS = {f.name: f for f in dataclasses.fields(Settings)}
# Tables inside [tool.cuda-agent] that belong to one command, read with `section()`.
SECTIONS = ("check",)
# Settings of the repository itself, read with `repo_targets()`: not a per-run setting, so only
# pyproject.toml may hold them.
REPO_ONLY = ("targets",)


@dataclass(frozen=True)
class Config:
    """Resolved settings plus, for each, the source it came from."""

    settings: Settings
    sources: Mapping[str, str] = field(default_factory=dict)

    def __getattr__(self, name: str) -> Any:
        # Only called for names not found normally: forward to the settings.
        if name in _FIELDS:
            return getattr(self.settings, name)
        raise AttributeError(name)

    def origin(self, name: str) -> str:
        """Where `name` came from, as the user would write or find it: `--max-turns`,
        `CUDA_AGENT_MAX_TURNS`, `pyproject.toml`, `~/.config/cuda-agent/config.toml` or `default`."""
        return describe_source(name, self.sources.get(name, "default"))

    def with_session(self, values: Mapping[str, Any]) -> "Config":
        """This config with a resumed session's settings (its task.json) above every source but
        the command line: a session keeps what it was started with unless a flag says otherwise."""
        layer = _layer({k: v for k, v in values.items() if v is not None}, "the resumed session")
        merged = dataclasses.asdict(self.settings)
        sources = dict(self.sources)
        for name, value in layer.items():
            if sources.get(name) != "flag":
                merged[name], sources[name] = value, "session"
        return Config(Settings(**merged), sources)

    def origin_phrase(self, name: str) -> str:
        """ "from pyproject.toml", "from --max-turns", ... or "(the default)", to follow a value."""
        where = self.origin(name)
        return "(the default)" if where == "default" else f"from {where}"


def user_config_path(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    base = env.get("XDG_CONFIG_HOME") or str(Path(env.get("HOME", str(Path.home()))) / ".config")
    return Path(base) / "cuda-agent" / "config.toml"


def user_data_dir(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    base = env.get("XDG_DATA_HOME") or str(Path(env.get("HOME", str(Path.home()))) / ".local" / "share")
    return Path(base) / "cuda-agent"


REPO_TABLE = " [tool.cuda-agent]"


def describe_source(name: str, source: str) -> str:
    """One entry of `Config.sources` in the words of the place it came from."""
    if source == "flag":
        return "--" + name.replace("_", "-")
    if source == "environment":
        return ENV_PREFIX + name.upper()
    if source == "default":
        return "default"
    if source == "session":
        return "the resumed session"
    path = source[: -len(REPO_TABLE)] if source.endswith(REPO_TABLE) else source
    return _short_path(path)


def _short_path(path: str) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:
        rel = path
    if not rel.startswith(".."):
        return rel
    home = str(Path.home())
    return "~" + path[len(home) :] if home not in ("", "/") and path.startswith(home + os.sep) else path


def find_repo_pyproject(start: Path) -> Path | None:
    """The nearest pyproject.toml at or above `start`, not looking past a git root."""
    here = start.resolve()
    for d in (here, *here.parents):
        candidate = d / "pyproject.toml"
        if candidate.is_file():
            return candidate
        if (d / ".git").exists():
            return None
    return None


def _coerce(name: str, value: Any, source: str) -> Any:
    f = _FIELDS[name]
    kind = f.type if isinstance(f.type, str) else str(f.type)
    if value is None:
        return None
    expected = "an integer" if kind.startswith("int") else "a number" if kind.startswith("float") else "text"
    try:
        if kind.startswith("int"):
            value = int(value)
        elif kind.startswith("float"):
            value = float(value)
        else:
            value = str(value)
    except (TypeError, ValueError):
        raise ConfigError(
            f"{source}: `{name}` must be {expected}, got {value!r}",
            "fix or remove that setting",
        ) from None
    allowed = CHOICES.get(name)
    if allowed and value not in allowed:
        raise ConfigError(
            f"{source}: `{name}` must be one of {', '.join(allowed)}, got {value!r}",
            "fix or remove that setting",
        )
    return value


def _read_toml(path: Path, table: tuple[str, ...]) -> dict[str, Any]:
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}", "fix the file or remove it") from None
    except OSError:
        return {}
    for key in table:
        data = data.get(key, {})
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: [{'.'.join(table)}] must be a table", "fix the file")
    return data


def _layer(raw: Mapping[str, Any], source: str, repo: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in raw.items():
        if key in SECTIONS and isinstance(value, dict):
            continue
        if key in REPO_ONLY:
            if repo:
                continue
            raise ConfigError(
                f"{source}: `{key}` names the repository's own targets",
                "put it in [tool.cuda-agent] of the repository's pyproject.toml",
            )
        name = key.replace("-", "_")
        if name not in _FIELDS:
            raise ConfigError(
                f"{source}: unknown setting `{key}`",
                f"known settings: {', '.join(sorted(_FIELDS))}",
            )
        out[name] = _coerce(name, value, source)
    return out


def section(name: str, cwd: Path) -> tuple[dict[str, Any], str | None]:
    """`[tool.cuda-agent.<name>]` of the repository's pyproject.toml and where it was read from."""
    repo_file = find_repo_pyproject(cwd)
    if repo_file is None:
        return {}, None
    return _read_toml(repo_file, ("tool", "cuda-agent", name)), f"{repo_file} [tool.cuda-agent.{name}]"


@dataclass(frozen=True)
class TargetSetting:
    """One entry of `[tool.cuda-agent] targets`: what `optimize --all` runs."""

    target: str
    inputs: str | None = None

    def key(self) -> str:
        return self.target if self.inputs is None else f"{self.target} --inputs {self.inputs}"


TARGETS_HINT = (
    'write targets = ["pkg/blocks.py::Block", {target = "pkg/mlp.py::MLP", '
    'inputs = "x=float32[8,1024]"}] under [tool.cuda-agent]'
)


def repo_targets(cwd: Path) -> tuple[list[TargetSetting], Path | None]:
    """`[tool.cuda-agent] targets` of the repository's pyproject.toml (each a target string, or a
    table with `target` and optional `inputs`) and the file it came from; ([], None) without one."""
    repo_file = find_repo_pyproject(cwd)
    if repo_file is None:
        return [], None
    raw = _read_toml(repo_file, ("tool", "cuda-agent")).get("targets")
    if raw is None:
        return [], repo_file
    where = f"{repo_file} [tool.cuda-agent] targets"
    if not isinstance(raw, list):
        raise ConfigError(f"{where} must be a list", TARGETS_HINT)
    out: list[TargetSetting] = []
    for i, item in enumerate(raw, 1):
        if isinstance(item, str) and item.strip():
            entry = TargetSetting(item.strip())
        elif isinstance(item, dict):
            unknown = sorted(set(item) - {"target", "inputs"})
            target, inputs = item.get("target"), item.get("inputs")
            if unknown:
                raise ConfigError(f"{where}: entry {i} has an unknown key `{unknown[0]}`", "known keys: target, inputs")
            if not isinstance(target, str) or not target.strip():
                raise ConfigError(f"{where}: entry {i} has no `target` text", TARGETS_HINT)
            if inputs is not None and (not isinstance(inputs, str) or not inputs.strip()):
                raise ConfigError(f"{where}: entry {i} has `inputs` that are not text", TARGETS_HINT)
            entry = TargetSetting(target.strip(), inputs.strip() if inputs else None)
        else:
            raise ConfigError(f"{where}: entry {i} must be a target string or a table, got {item!r}", TARGETS_HINT)
        if any(e.key() == entry.key() for e in out):
            raise ConfigError(f"{where}: `{entry.key()}` is listed twice", "remove one of them")
        out.append(entry)
    return out, repo_file


def load_config(
    flags: Mapping[str, Any] | None = None,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> Config:
    """Resolve settings from all sources; `flags` values of None mean 'not given'."""
    env = os.environ if env is None else env
    cwd = Path.cwd() if cwd is None else cwd
    layers: list[tuple[str, dict[str, Any]]] = []  # lowest precedence first

    user_file = user_config_path(env)
    if user_file.is_file():
        layers.append((str(user_file), _layer(_read_toml(user_file, ()), str(user_file))))
    repo_file = find_repo_pyproject(cwd)
    if repo_file is not None:
        src = f"{repo_file}{REPO_TABLE}"
        layers.append((src, _layer(_read_toml(repo_file, ("tool", "cuda-agent")), src, repo=True)))
    env_values = {
        k[len(ENV_PREFIX) :].lower(): v
        for k, v in env.items()
        if k.startswith(ENV_PREFIX) and k[len(ENV_PREFIX) :].lower() in _FIELDS
    }
    layers.append(("environment", _layer(env_values, "environment")))
    given = {k: v for k, v in (flags or {}).items() if v is not None}
    layers.append(("flag", _layer(given, "command line")))

    values: dict[str, Any] = {}
    sources: dict[str, str] = {name: "default" for name in _FIELDS}
    for source, layer in layers:
        for name, value in layer.items():
            values[name] = value
            sources[name] = source
    return Config(Settings(**values), sources)
