"""The chat TUI's speed and memory: first frame, a long streamed reply, a long resumed session.

Usage: python benchmarks/chat_tui.py [--runs 5] [--tokens 5000] [--events 2000]
       [--parts first,stream,fast,resume]

1. first frame: `cuda-agent chat` is started in a pseudo-terminal (120x40) and the clock stops
   when its welcome line has been written to the terminal; beside the wall time, the CPU time
   the process had used by then (on a shared machine the wall time mostly measures the others'
   load). Bytecode caching is left on for the child as an installed user has it, even where
   PYTHONDONTWRITEBYTECODE is set here (the warm-up run writes the caches). Goal: within 1 s
   (median).
2. streaming: a 5,000-token Markdown reply arrives in chunks of about 4 tokens through the real
   path (agent loop -> event sink -> the app's buffer -> its 15 Hz timer -> the reply's widget)
   in a headless app; for each chunk the time until the app thread has taken it, the largest gap
   between ticks of a 10 ms timer on the app's event loop while the reply streams (a stall shows
   up there), and the CPU time the process used for the whole reply.
   Goal: no gap over 100 ms.
3. resume: a stored chat with 2,000 transcript events is opened with `cuda-agent chat --resume`
   in a pseudo-terminal and scrolled from the top to the end with PageDown; the peak resident
   memory of the process (VmHWM) and the times. Goal: below 300 MB.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import pty
import re
import select
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from fcntl import ioctl
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
ANSI = re.compile(rb"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][A-Za-z0-9]|\x1b[=>]|\x1b\][^\x07]*\x07")


class Terminal:
    """A child process on a pseudo-terminal, its output drained by a thread."""

    def __init__(self, argv: list[str], env: dict[str, str], cols: int = 120, rows: int = 40) -> None:
        master, slave = pty.openpty()
        ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(
            argv, stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True, start_new_session=True
        )
        os.close(slave)
        self.master = master
        self.plain = b""
        self.received = 0  # bytes read so far: nothing new after a key means the screen did not move
        self.seen: dict[bytes, float] = {}
        self.watch: list[bytes] = []
        self.lock = threading.Lock()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        while True:
            try:
                ready, _, _ = select.select([self.master], [], [], 0.5)
                if not ready:
                    if self.proc.poll() is not None:
                        return
                    continue
                data = os.read(self.master, 65536)
            except OSError:
                return
            if not data:
                return
            now = time.perf_counter()
            with self.lock:
                self.received += len(data)
                self.plain = (self.plain + ANSI.sub(b"", data))[-200_000:]
                for w in self.watch:
                    if w not in self.seen and w in self.plain:
                        self.seen[w] = now

    def wait_for(self, text: str, timeout: float) -> float:
        """Seconds from the start until `text` was written to the terminal."""
        key = text.encode()
        with self.lock:
            self.watch.append(key)
            if key in self.plain and key not in self.seen:
                self.seen[key] = time.perf_counter()
        deadline = time.perf_counter() + timeout
        while time.perf_counter() < deadline:
            with self.lock:
                if key in self.seen:
                    return self.seen[key] - self.started
            time.sleep(0.005)
        raise RuntimeError(f"{text!r} did not appear within {timeout} s")

    def send(self, data: bytes) -> None:
        os.write(self.master, data)

    def cpu_s(self) -> float:
        """User + system CPU seconds the process has used so far (all its threads)."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def peak_rss_mb(self) -> float:
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        kb = int(re.search(r"VmHWM:\s+(\d+) kB", status).group(1))  # type: ignore[union-attr]
        return kb / 1024

    def quit(self) -> None:
        for _ in range(2):
            try:
                self.send(b"\x03")
            except OSError:
                break
            time.sleep(0.3)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        os.close(self.master)


def chat_argv(*args: str) -> list[str]:
    exe = shutil.which("cuda-agent")
    return ([exe] if exe else [sys.executable, "-m", "cuda_agent_cli"]) + ["chat", *args]


def make_repo(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "blocks.py").write_text("import torch\n\n\nclass Block(torch.nn.Module):\n    pass\n")
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    return root


# -- 1. first frame ------------------------------------------------------------------------------


def first_frame(base: Path, runs: int) -> tuple[list[float], list[float]]:
    """Wall seconds to the first frame, and CPU seconds used by then, of each run."""
    repo = make_repo(base / "repo1")
    replay = base / "empty.jsonl"
    replay.write_text("")
    env = {**os.environ, "XDG_DATA_HOME": str(base / "data1"), "TERM": "xterm-256color"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    times, cpu = [], []
    for i in range(runs + 1):
        term = Terminal(chat_argv(str(repo), "--model", f"replay:{replay}", "--device", "cpu"), env)
        try:
            t = term.wait_for("cuda-agent chat over", 30)
            c = term.cpu_s()
        finally:
            term.quit()
        if i:  # the first run warms the OS file cache and writes the bytecode caches
            times.append(t)
            cpu.append(c)
    return times, cpu


# -- 2. streaming --------------------------------------------------------------------------------


def long_markdown(tokens: int) -> str:
    """About `tokens` tokens (4 characters each) of the Markdown a model writes."""
    parts = []
    n = 0
    while sum(len(p) for p in parts) < tokens * 4:
        n += 1
        parts.append(
            f"## Step {n}: what the kernel does\n\nThe reference reads `x` twice: once for the mean and "
            f"once for the variance. A fused kernel keeps the row in **registers** and reads it once, "
            f"so the memory traffic halves on step {n}.\n\n- load with `float4`\n- reduce with warp "
            f"shuffles\n- write one atomic per feature\n\n```cpp\n__global__ void step{n}(const float* x, "
            f"float* y, int n) {{\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) y[i] = "
            f"x[i] * 2.0f;\n}}\n```\n\n"
        )
    return "".join(parts)[: tokens * 4]


class StreamingModel:
    """A ModelPort that streams a fixed reply in small chunks (what a fast server sends)."""

    name = "bench-stream"
    context_window = None

    def __init__(self, text: str, chunk_chars: int = 16, tokens_per_s: float = 0.0) -> None:
        self.text = text
        self.chunk = chunk_chars
        self.pause = (chunk_chars / 4) / tokens_per_s if tokens_per_s else 0.0
        self.on_chunk_done: list[float] = []

    def complete(self, messages: Any, tools: Any, on_text: Any = None) -> Any:
        from cuda_agent_cli.model.port import AssistantTurn

        for i in range(0, len(self.text), self.chunk):
            t0 = time.perf_counter()
            on_text(self.text[i : i + self.chunk])
            self.on_chunk_done.append(time.perf_counter() - t0)
            if self.pause:
                time.sleep(self.pause)
        return AssistantTurn(content=self.text)

    def count_tokens(self, messages: Any) -> int:
        return 0


def streaming(base: Path, tokens: int, rate: float) -> dict[str, Any]:
    from cuda_agent_cli.chat.session import ChatOptions, ChatSession
    from cuda_agent_cli.tui.app import ChatApp
    from cuda_agent_cli.tui.conversation import Conversation

    repo = make_repo(base / f"repo2-{rate:g}")
    replay = base / "empty2.jsonl"
    replay.write_text("")
    rt = ChatSession(ChatOptions(path=repo, model=f"replay:{replay}", data_dir=base / f"data2-{rate:g}", device="cpu"))
    text = long_markdown(tokens)
    model = StreamingModel(text, tokens_per_s=rate)
    rt.model = model  # type: ignore[assignment]
    flushes: list[float] = []
    real_flush = Conversation.flush_text

    async def timed_flush(self: Conversation) -> None:
        t0 = time.perf_counter()
        await real_flush(self)
        flushes.append(time.perf_counter() - t0)

    # Patched on the class before the app mounts its conversation: the stream's timer and the
    # events' own flushes both go through it.
    Conversation.flush_text = timed_flush  # type: ignore[method-assign]
    app = ChatApp(rt, detect=lambda: "cpu")
    gaps: list[float] = []
    gap_at: list[float] = []  # when each gap ended, in seconds after the prompt was sent
    gap_cpu: list[float] = []  # CPU the app's thread used during each gap
    out: dict[str, Any] = {}

    async def go() -> None:
        async with app.run_test(size=(120, 40)) as pilot:
            # A user reads the first screen before the prompt is sent: what the app does once
            # after its first frame (the ledger, a collection, the Markdown renderer warmed in a
            # thread) belongs to the first-frame measurement, not to the reply.
            await pilot.pause()
            await asyncio.sleep(1.5)
            last = [time.perf_counter(), time.thread_time()]

            def tick() -> None:
                now, cpu = time.perf_counter(), time.thread_time()
                gaps.append(now - last[0])
                gap_at.append(now - t0)
                gap_cpu.append(cpu - last[1])
                last[:] = [now, cpu]

            t0 = time.perf_counter()
            timer = app.set_interval(0.01, tick)
            app.query_one("#prompt").load_text("explain")
            await pilot.press("enter")
            # Plain sleeps, not pilot.pause: a pause makes the screen update and posts a message
            # to every widget, work the app never does by itself (it doubled the CPU measured).
            while app.work.thread is None:  # the turn's worker
                await asyncio.sleep(0.005)
            while app.work.thread.is_alive() or app.busy is not None:
                await asyncio.sleep(0.05)
            await pilot.pause()
            out["total_s"] = time.perf_counter() - t0
            await asyncio.sleep(2.0)  # what the app does once the reply is in (a deferred collection)
            timer.stop()
            from textual.widgets import Markdown

            from cuda_agent_cli.tui.widgets import SettledMarkdown

            parts = [w for w in app.conversation.children if isinstance(w, (Markdown, SettledMarkdown))]
            out["rendered_whole"] = "".join(w.source for w in parts).strip() == text.strip()
            out["markdown_widgets"] = len(parts)

    cpu0 = time.process_time()
    try:
        asyncio.run(go())
    finally:
        Conversation.flush_text = real_flush  # type: ignore[method-assign]
    out["cpu_s"] = time.process_time() - cpu0
    rt.close()
    per = sorted(model.on_chunk_done)
    fl = sorted(flushes)
    out.update(
        frame_p50_ms=1000 * statistics.median(fl),
        frame_p99_ms=1000 * fl[int(0.99 * (len(fl) - 1))],
        frame_max_ms=1000 * fl[-1],
        frames=len(fl),
    )
    out.update(
        chunks=len(per),
        chars=len(text),
        chunk_p50_ms=1000 * statistics.median(per),
        chunk_p99_ms=1000 * per[int(0.99 * (len(per) - 1))],
        chunk_max_ms=1000 * per[-1],
    )
    during = [(g, c, at) for g, c, at in zip(gaps, gap_cpu, gap_at) if at <= out["total_s"]]
    after = [g for g, at in zip(gaps, gap_at) if at > out["total_s"]]
    out.update(
        loop_gap_max_ms=1000 * max(g for g, _, _ in during),
        loop_gap_p99_ms=1000 * sorted(g for g, _, _ in during)[int(0.99 * (len(during) - 1))],
        worst_gaps=sorted(((1000 * g, 1000 * c, at) for g, c, at in during), reverse=True)[:5],
        after_gap_max_ms=1000 * max(after, default=0.0),
    )
    return out


# -- 3. resume and scroll ------------------------------------------------------------------------


def write_long_session(data: Path, repo: Path, events: int) -> str:
    sid = "20260101-000000-b3nch0"
    d = data / "sessions" / sid
    d.mkdir(parents=True)
    lines = [
        {
            "event": "session_started",
            "session_id": sid,
            "target": f"chat {repo}",
            "model": "replay:x",
            "workspace": str(repo),
            "settings": {"command": "chat", "repo": str(repo), "mode": "ask"},
            "system_prompt": "You are cuda-agent.",
            "created": 1767225600.0,
        }
    ]
    turn = 0
    while len(lines) < events - 1:
        turn += 1
        lines.append({"event": "user_message", "content": f"Question {turn}: why is block {turn} slow?"})
        lines.append(
            {
                "event": "assistant_message",
                "turn": turn,
                "content": long_markdown(120),
                "tool_calls": [
                    {"id": f"c{turn}", "name": "Read", "arguments": {"file_path": "blocks.py"}, "error": None}
                ],
                "prompt_tokens": 1000,
                "completion_tokens": 120,
                "cost_usd": 0.0,
            }
        )
        lines.append(
            {
                "event": "tool_finished",
                "call_id": f"c{turn}",
                "name": "Read",
                "is_error": False,
                "data": None,
                "output": "".join(f"{i:>6}\timport torch  # line {i}\n" for i in range(1, 60)),
                "duration_s": 0.01,
            }
        )
        lines.append(
            {
                "event": "cost",
                "turn_cost_usd": 0.0,
                "total_cost_usd": 0.0,
                "prompt_tokens": 1000,
                "completion_tokens": 120,
                "context_tokens": 40000,
                "context_budget": 131072,
            }
        )
    lines = lines[: events - 1]
    lines.append({"event": "stopped", "reason": "done", "detail": "", "turns": turn, "cost_usd": 0.0})
    (d / "transcript.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return sid


def at_rest(term: Terminal) -> bool:
    """True when, once the keys sent so far are handled, one more PageDown changes nothing on
    the screen: the view is at its end."""
    quiet = term.received
    for _ in range(20):  # wait until the terminal has been quiet for half a second
        time.sleep(0.5)
        if term.received == quiet:
            break
        quiet = term.received
    else:
        return False  # something keeps drawing: leave the decision to the last question
    term.send(b"\x1b[6~")
    time.sleep(1.0)
    return term.received == quiet


def resume_scroll(base: Path, events: int) -> dict[str, Any]:
    repo = make_repo(base / "repo3")
    replay = base / "empty3.jsonl"
    replay.write_text("")
    sid = write_long_session(base / "data3" / "cuda-agent", repo, events)  # XDG_DATA_HOME/cuda-agent
    env = {**os.environ, "XDG_DATA_HOME": str(base / "data3"), "TERM": "xterm-256color"}
    term = Terminal(chat_argv("--resume", sid, "--model", f"replay:{replay}", "--device", "cpu"), env)
    out: dict[str, Any] = {}
    try:
        out["resumed_s"] = term.wait_for(f"resumed session {sid}", 120)
        t0 = time.perf_counter()
        presses = 0
        first = b"Question 1: why is block 1 slow?"
        while presses < 500:
            term.send(b"\x1b[1;5H")  # Ctrl+Home: the top; at the top, one more page of history
            presses += 1
            time.sleep(0.2)
            with term.lock:
                if first in term.plain[-30000:]:
                    break
        out["to_top_s"] = time.perf_counter() - t0
        out["home_presses"] = presses
        pages = 0
        rest_s = 0.0
        t0 = time.perf_counter()
        last_q = f"Question {(events - 2) // 4}: why".encode()
        while pages < 5000:
            term.send(b"\x1b[6~")  # PageDown
            pages += 1
            time.sleep(0.01)
            with term.lock:
                tail = term.plain[-20000:]
            if last_q in tail and pages > 10:
                break
            if pages % 100 == 0:
                # keys faster than frames can skip the screen that shows the last question;
                # a PageDown that moves nothing is the end as well (the wait is not counted)
                r0 = time.perf_counter()
                resting = at_rest(term)
                rest_s += time.perf_counter() - r0
                if resting:
                    break
        out["pages"] = pages
        out["scroll_s"] = time.perf_counter() - t0 - rest_s
        time.sleep(0.5)
        out["peak_rss_mb"] = term.peak_rss_mb()
    finally:
        term.quit()
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=5000)
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--rate", type=float, default=200.0, help="tokens per second of the paced stream")
    parser.add_argument(
        "--parts",
        default="first,stream,fast,resume",
        help="what to measure, comma-separated: first (frame), stream (paced), fast (unpaced), resume",
    )
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"load average {' '.join(open('/proc/loadavg').read().split()[:3])}"
    )
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        if "first" in parts:
            ff, cpu = first_frame(base, args.runs)
            print(
                f"first frame: median {statistics.median(ff) * 1000:.0f} ms over {len(ff)} runs "
                f"(min {min(ff) * 1000:.0f}, max {max(ff) * 1000:.0f}); goal 1000 ms; CPU used by then: median "
                f"{statistics.median(cpu) * 1000:.0f} ms (min {min(cpu) * 1000:.0f}, max {max(cpu) * 1000:.0f})"
            )
            ok = ok and statistics.median(ff) < 1.0
        for rate, part in ((args.rate, "stream"), (0.0, "fast")):
            if part not in parts:
                continue
            st = streaming(base, args.tokens, rate)
            how = f"at {rate:g} tokens/s" if rate else "as fast as the worker can send"
            worst = ", ".join(
                f"{g:.0f} ms at {at:.1f} s (app thread CPU {c:.0f} ms)" for g, c, at in st["worst_gaps"][:3]
            )
            print(
                f"streaming {args.tokens} tokens ({st['chars']} chars, {st['chunks']} chunks) {how}: "
                f"{st['total_s']:.2f} s; sink per chunk p99 {st['chunk_p99_ms']:.2f} ms, max {st['chunk_max_ms']:.1f} ms; "
                f"frame (buffer -> Markdown) p50 {st['frame_p50_ms']:.1f} ms, p99 {st['frame_p99_ms']:.1f} ms, "
                f"max {st['frame_max_ms']:.1f} ms over {st['frames']} frames; event-loop gap p99 "
                f"{st['loop_gap_p99_ms']:.1f} ms, max {st['loop_gap_max_ms']:.1f} ms (largest: {worst}); "
                f"in the 2 s after it: max {st['after_gap_max_ms']:.0f} ms; "
                f"CPU {st['cpu_s']:.1f} s; whole reply rendered: "
                f"{st['rendered_whole']} ({st['markdown_widgets']} Markdown widgets)"
            )
            ok = ok and st["rendered_whole"]
            if rate:  # the goal is for the paced stream
                ok = ok and st["loop_gap_max_ms"] < 100
        if "resume" in parts:
            rs = resume_scroll(base, args.events)
            print(
                f"resume {args.events} events: first screen {rs['resumed_s']:.2f} s; to the top "
                f"({rs['home_presses']} Ctrl+Home) {rs['to_top_s']:.2f} s; "
                f"{rs['pages']} PageDowns to the end in {rs['scroll_s']:.2f} s; peak RSS {rs['peak_rss_mb']:.0f} MB; "
                f"goal 300 MB"
            )
            ok = ok and rs["peak_rss_mb"] < 300
        print(f"load average at the end {' '.join(open('/proc/loadavg').read().split()[:3])}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
