"""Before the review: the kernel as the user's program will run it, measured where it runs.

The kernel folder a plan would write is put in a scratch folder, and writeback/deploy_probe.py
runs in the user's repository with it: the user's module imported as their program imports it,
the class handed to the plan's own loader (which builds the extension into the cache the program
loads it from, so the first real call does not wait for a compiler), and for each verified family:

- that a call of the family takes the kernel and matches the original forward, that
  torch.compile sees one graph without a break that calls the kernel's op, and, with autograd,
  that the gradients match the original's;
- the time per call as the user's Python makes it: blocks of calls in a loop (host work of the
  loader included, one device synchronize at the end of a block), through the patched class and
  through the original forward, interleaved. Each block is timed here, on this process's clock,
  from the request to the reply, so nothing in the probe's process (which runs the candidate's
  code) decides a number. The speedup is the median of the rounds' paired ratios with a
  bootstrap interval, like the harness's. A CPU kernel's blocks run with half the cores' threads
  on both sides, as the harness times them (machine.cpu_timing_threads).

The harness's speedup is device time per call; this one is what `for x in batches: y = m(x)`
gets. Where the two differ by much, the kernel is launch-bound and the review says so. Where the
repository calls torch.compile, the same blocks run through torch.compile of the patched module
and of the original (default mode, each compiled once), so a kernel whose op costs more host time
under a compiled program than the compiled original takes is seen as slower there.
"""

from __future__ import annotations

import io
import json
import os
import re
import select
import statistics
import subprocess
import sys
import tempfile
import time
import tokenize
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Callable, NamedTuple

from cuda_agent_cli.machine import cpu_timing_threads

BLOCK_SECONDS = 0.05  # a timed block's target length: well above the cost of the request and reply
ROUNDS = 7


@dataclass
class FamilyDeploy:
    """One verified family as the program will meet it."""

    index: int
    check: dict[str, Any] = field(default_factory=dict)
    calls_per_block: int = 0
    patched_us: float | None = None  # per call, as the user's Python makes it
    original_us: float | None = None
    speedup: float | None = None
    interval: tuple[float, float] | None = None
    # The same under torch.compile (default mode): the compiled patched module against the
    # compiled original, where the program compiles its modules.
    compiled_patched_us: float | None = None
    compiled_original_us: float | None = None
    compiled_speedup: float | None = None
    compiled_interval: tuple[float, float] | None = None
    compiled_error: str | None = None

    def problems(self) -> list[str]:
        c = self.check
        out = []
        if not c.get("taken", False):
            out.append(f"a verified call did not take the kernel ({c.get('declined') or c.get('error') or '?'})")
        elif not c.get("matches", False):
            out.append("the integrated kernel's output differs from the original forward's")
        comp = c.get("compile") or {}
        if "error" in comp:
            out.append(f"torch.compile could not trace the patched module here: {comp['error']}")
        elif comp and (comp.get("graph_breaks") or not comp.get("calls_op")):
            out.append(
                f"under torch.compile: {comp.get('graph_breaks')} graph break(s)"
                + ("" if comp.get("calls_op") else ", and the graph does not call the kernel's op")
            )
        grads = c.get("gradients") or {}
        if grads.get("checked") and not grads.get("match"):
            out.append("with autograd, the gradients differ from the original forward's")
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "family": self.index,
            "taken": self.check.get("taken"),
            "matches": self.check.get("matches"),
            "compile": self.check.get("compile"),
            "gradients": self.check.get("gradients"),
            "patched_us_per_call": _r(self.patched_us),
            "original_us_per_call": _r(self.original_us),
            "speedup_per_call": _r(self.speedup),
            "speedup_per_call_interval": None if self.interval is None else [_r(x) for x in self.interval],
            "calls_per_block": self.calls_per_block,
            "compiled": self.compiled_json(),
        }

    def compiled_json(self) -> dict[str, Any] | None:
        if self.compiled_error is not None:
            return {"error": self.compiled_error}
        if self.compiled_speedup is None:
            return None
        return {
            "patched_us_per_call": _r(self.compiled_patched_us),
            "original_us_per_call": _r(self.compiled_original_us),
            "speedup_per_call": _r(self.compiled_speedup),
            "speedup_per_call_interval": None
            if self.compiled_interval is None
            else [_r(x) for x in self.compiled_interval],
        }


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


@dataclass
class Deployment:
    """What the deployment probe found, or why it could not run."""

    families: list[FamilyDeploy] = field(default_factory=list)
    error: str | None = None
    seconds: float = 0.0
    threads: int | None = None  # torch's CPU threads in the probe while it timed (a CPU kernel)

    @property
    def first(self) -> FamilyDeploy | None:
        return self.families[0] if self.families else None

    def problems(self) -> list[str]:
        if self.error:
            return [f"the kernel could not be tried in your program's setting: {self.error}"]
        return [p for f in self.families for p in f.problems()]

    def to_json(self) -> dict[str, Any]:
        return {
            "error": self.error,
            "families": [f.to_json() for f in self.families],
            "seconds": round(self.seconds, 2),
            "threads": self.threads,
            "how": "blocks of calls in a loop through the patched class and the original forward, interleaved, "
            "each timed from outside its process; median of paired ratios, 95% bootstrap interval",
        }

    def summary(self, device_speedup: float | None) -> str:
        """The speedup as the user's Python calls the module (host work included), in one line,
        beside the device-time one (`device_speedup`, vs eager)."""
        first = self.first
        if first is None or first.speedup is None or first.patched_us is None or first.original_us is None:
            return ""
        lo, hi = first.interval or (first.speedup, first.speedup)
        line = (
            f"as your Python calls it: {first.speedup:.2f}x vs eager [{lo:.2f}, {hi:.2f}] "
            f"({first.patched_us:.1f} µs a call, against {first.original_us:.1f} µs; host work included)"
        )
        if device_speedup and first.speedup < 0.85 * device_speedup:
            line += (
                f"; the {device_speedup:.2f}x above is device time: host work per call (launch, checks) "
                "takes much of this kernel's gain"
            )
        if first.compiled_speedup is not None and first.compiled_patched_us and first.compiled_original_us:
            clo, chi = first.compiled_interval or (first.compiled_speedup, first.compiled_speedup)
            line += (
                f"; under torch.compile, as your repository uses it: {first.compiled_speedup:.2f}x "
                f"[{clo:.2f}, {chi:.2f}] against your compiled original ({first.compiled_patched_us:.1f} µs "
                f"against {first.compiled_original_us:.1f} µs a call)"
            )
            if chi < 1.0:
                line += (
                    ": slower there, since the kernel's op costs more host time per call than the compiled "
                    "original takes; keep the original for compiled code, or call the module eagerly"
                )
        elif first.compiled_error:
            line += f"; under torch.compile it could not be timed here ({first.compiled_error[:120]})"
        return line

    def manifest(self) -> dict[str, Any]:
        """What the manifest records: the first family's speedup per call as Python makes it."""
        f = self.first
        if f is None or f.speedup is None:
            return {}
        out: dict[str, Any] = {"speedup_per_call": round(f.speedup, 4), "kernel_us_per_call": _r(f.patched_us)}
        if f.interval is not None:
            out["speedup_per_call_interval"] = [round(x, 4) for x in f.interval]
        out["original_us_per_call"] = _r(f.original_us)
        if f.compiled_speedup is not None:
            out["speedup_compiled"] = round(f.compiled_speedup, 4)
            if f.compiled_interval is not None:
                out["speedup_compiled_interval"] = [round(x, 4) for x in f.compiled_interval]
        return out


class _Probe:
    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc

    def ask(self, request: dict[str, Any] | None, timeout: float) -> dict[str, Any]:
        stdin, stdout = self.proc.stdin, self.proc.stdout
        assert stdin is not None and stdout is not None
        if request is not None:
            stdin.write(json.dumps(request) + "\n")
            stdin.flush()
        return _read_line(stdout, timeout, self.proc)


def _read_line(stream: IO[str], timeout: float, proc: subprocess.Popen[str]) -> dict[str, Any]:
    ready, _, _ = select.select([stream], [], [], timeout)
    if not ready:
        raise TimeoutError(f"no answer in {timeout:.0f} s")
    line = stream.readline()
    if not line:
        raise RuntimeError(f"the probe exited ({proc.poll()})")
    answer: dict[str, Any] = json.loads(line)
    return answer


def measure_deployment(
    kernel_files: dict[str, str],
    *,
    repo_root: Path,
    import_paths: list[Path],
    module: str,
    class_name: str,
    build_timeout: float = 1800.0,
    rounds: int = ROUNDS,
    compiled: bool | None = None,
) -> Deployment:
    """Try the kernel folder (`kernel_files`: folder-relative path -> text) in the user's setting;
    under torch.compile too where `compiled` says so (None: where the repository calls it).
    A CPU kernel is timed with half the cores as torch's threads on both sides, as the harness
    times it (machine.cpu_timing_threads)."""
    start = time.perf_counter()
    if compiled is None:
        compiled = uses_torch_compile(repo_root)
    found = Deployment()
    with tempfile.TemporaryDirectory(prefix="cuda-agent-deploy-") as tmp:
        folder = Path(tmp) / "kernel"
        for rel, text in kernel_files.items():
            (folder / rel).parent.mkdir(parents=True, exist_ok=True)
            (folder / rel).write_text(text)
        request = {
            "paths": [str(p) for p in import_paths],
            "module": module,
            "class": class_name,
            "loader": str(folder / "loader.py"),
            "threads": cpu_timing_threads(),
        }
        req_path = Path(tmp) / "request.json"
        req_path.write_text(json.dumps(request))
        env = {k: v for k, v in os.environ.items() if not k.startswith("CUDA_AGENT_") or k == "CUDA_AGENT_KERNEL_CACHE"}
        proc = subprocess.Popen(
            [sys.executable, "-B", "-m", "cuda_agent_cli.writeback.deploy_probe", str(req_path)],
            cwd=repo_root,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        probe = _Probe(proc)
        try:
            hello = probe.ask(None, build_timeout)
            if not hello.get("ok"):
                found.error = str(hello.get("error"))
                return found
            found.threads = hello.get("threads")
            for index in range(int(hello["families"])):
                found.families.append(_family(probe, index, rounds, compiled))
        except (TimeoutError, RuntimeError, ValueError) as exc:
            found.error = str(exc)
        finally:
            if proc.stdin:
                proc.stdin.close()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            found.seconds = time.perf_counter() - start
    return found


_SKIP_DIRS = {".git", ".hg", ".venv", "venv", "env", "node_modules", "__pycache__", "site-packages", "_cuda_agent"}
_COMPILE_WORD = re.compile(r"\bcompile\b")  # the quick look before the tokens decide
SCAN_FILES_MOST = 5000
SCAN_BYTES_MOST = 512 * 1024


def uses_torch_compile(repo_root: Path) -> bool:
    """Whether the repository's Python calls torch.compile anywhere (a bounded scan: at most
    SCAN_FILES_MOST files, each read up to SCAN_BYTES_MOST), so that its kernels are timed under
    torch.compile too, as its program will run them."""
    seen = 0
    for folder, dirs, files in os.walk(repo_root):
        dirs[:] = [d for d in dirs if d not in _SKIP_DIRS and not d.startswith(".")]
        for name in files:
            if not name.endswith(".py"):
                continue
            seen += 1
            if seen > SCAN_FILES_MOST:
                return False
            try:
                with open(os.path.join(folder, name), "rb") as f:
                    text = f.read(SCAN_BYTES_MOST).decode("utf-8", "replace")
            except OSError:
                continue
            if _COMPILE_WORD.search(text) and refers_to_torch_compile(text):
                return True
    return False


def refers_to_torch_compile(source: str) -> bool:
    """Whether Python source names torch.compile in its code: `torch.compile`, through an alias
    of torch (`import torch as th`) or imported (`from torch import compile`),
    `torch.compiler.compile`, or a module's own `.compile()` (keywords only), and not in a
    comment or a string, where a mention (the demo's docstring says what torch.compile fuses)
    made the probe time the compiled module for a repository that never compiles it. A file
    that does not tokenize to its end (cut at SCAN_BYTES_MOST) is read as far as it goes. Pure."""
    words: list[str] = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type in (tokenize.NAME, tokenize.OP):
                words.append(tok.string)
            elif tok.type not in (tokenize.COMMENT, tokenize.NL, tokenize.INDENT, tokenize.DEDENT):
                words.append("")  # a string, a number, the end of a statement
    except (tokenize.TokenError, SyntaxError):
        pass
    torch_names = {"torch"}
    for i, word in enumerate(words):
        if word == "import" and words[i + 1 : i + 3] == ["torch", "as"] and i + 3 < len(words):
            torch_names.add(words[i + 3])
        elif word == "from" and words[i + 1 : i + 3] == ["torch", "import"]:
            end = next((j for j in range(i, len(words)) if not words[j]), len(words))
            if "compile" in words[i + 3 : end]:
                return True
        elif word == "compile" and i >= 2 and words[i - 1] == ".":
            owner = words[i - 2]
            if owner in torch_names or (
                owner == "compiler" and words[i - 4 : i - 2] in ([n, "."] for n in torch_names)
            ):
                return True  # torch.compile, torch.compiler.compile
            # nn.Module.compile(), which compiles the module in place: a method call with no
            # argument or keywords only (re.compile and the like take a pattern first).
            if words[i + 1 : i + 3] == ["(", ")"] or (words[i + 1 : i + 2] == ["("] and words[i + 3 : i + 4] == ["="]):
                return True
    return False


class _Paired(NamedTuple):
    mine_us: float
    theirs_us: float
    speedup: float  # theirs / mine, median of the rounds' paired ratios
    interval: tuple[float, float] | None
    calls: int  # per block


def _paired(block: Callable[[str, int], float], mine: str, theirs: str, rounds: int) -> _Paired:
    """Two sides timed per call in interleaved blocks, after a few first calls (caches fill,
    compiles run), with their paired speedup and its bootstrap interval."""
    from cuda_agent_cli.harness.bootstrap import bootstrap_medians, percentile_interval

    block(mine, 3)
    block(theirs, 3)
    per_call = min(block(mine, 10), block(theirs, 10)) / 10
    n = max(10, min(20000, int(BLOCK_SECONDS / max(per_call, 1e-7))))
    a, b = [], []
    for r in range(rounds):
        order = (mine, theirs) if r % 2 == 0 else (theirs, mine)
        times = {side: block(side, n) / n * 1e6 for side in order}
        a.append(times[mine])
        b.append(times[theirs])
    ratios = [o / p for o, p in zip(b, a) if p > 0]
    interval = percentile_interval(bootstrap_medians(ratios))
    return _Paired(statistics.median(a), statistics.median(b), statistics.median(ratios), interval, n)


def _family(probe: _Probe, index: int, rounds: int, compiled: bool = False) -> FamilyDeploy:
    fam = FamilyDeploy(index)
    fam.check = probe.ask({"op": "check", "family": index}, 600)
    if not fam.check.get("ok") or not fam.check.get("taken"):
        return fam

    def block(side: str, n: int) -> float:
        begin = time.perf_counter()
        answer = probe.ask({"op": "block", "family": index, "side": side, "n": n}, 600)
        seconds = time.perf_counter() - begin
        if not answer.get("ok"):
            raise RuntimeError(str(answer.get("error")))
        return seconds

    eager = _paired(block, "patched", "original", rounds)
    fam.patched_us, fam.original_us, fam.speedup, fam.interval, fam.calls_per_block = eager
    if compiled:
        try:  # each side compiles in its first block, once
            timed = _paired(block, "compiled_patched", "compiled_original", rounds)
        except RuntimeError as exc:
            fam.compiled_error = str(exc)[:300]
            return fam
        fam.compiled_patched_us, fam.compiled_original_us, fam.compiled_speedup, fam.compiled_interval, _ = timed
    return fam
