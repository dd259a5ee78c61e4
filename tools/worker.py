"""Locked zygote: imports torch once, then forks one fresh process per harness job.

Started by the harness with a clean environment. It reads one JSON request per line on stdin,
forks a child for it, and answers one JSON line on stdout when the child has ended; several
children may run at once and their answers come in the order they end. CUDA is never
initialized here, so every child may initialize it freshly. A child starts its own session (so a
timeout kills its whole process group), points its stdout/stderr at a log file and never sees
the zygote's pipes: nothing a candidate prints can reach the harness.

Request:  {"id": int, "job": a name in wire.JOBS, "spec": path of the job's JSON request,
           "log": path, "timeout": seconds, "nice": int} (wire.WorkerRequest)
          (the jobs wire.JOBS maps to None are answered by the zygote itself, nothing is forked:
          "service" starts or prewarms a baselines service, "warm" does the zygote's own
          warm-up of the dispatch modes' imports now, "warm-compiler" that and torch.compile's
          imports)
Answer:   {"id": int, "status": "ok"|"crash"|"timeout", "returncode": int|null, "signal": int|null,
           "result": the job's result object or null} (wire.WorkerAnswer)
The result travels through a pipe the zygote makes before it forks the job, never through a
file. The zygote is the subreaper of everything its jobs start: when a job ends, its process
group is killed, and so is every process it left behind, however it detached itself
(double fork, setsid, raw clone), since orphans are reparented here.
A job may also run without the zygote: `python worker.py --job NAME --spec S --result R`.

Services: an evaluate request may name a baselines service (`"service": {"key": ..., "log":
...}`). The zygote then keeps one long-lived process per key that serves the eager and
torch.compile baselines of every evaluation of that reference (tools/baselines.py,
`serve_baselines_service`), so torch.compile is built and warmed once per session, not once per
round. The service's channel is a pair of pipes the zygote makes before forking it; only the
evaluate job it is lent to inherits them (as `baselines_service` in its spec), one job at a
time, and every other child closes them. A service runs only the pristine reference. It is
killed when a job it was lent to does not end cleanly, when it is the oldest of more than
MAX_SERVICES, and when the zygote ends.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from typing import TYPE_CHECKING, Any, Callable, Container, Mapping, TypedDict

if TYPE_CHECKING:  # its types only: the zygote itself reads no job's code
    import wire

# torch.cuda.is_available() (called by torch.utils.cpp_extension at import) initializes the CUDA
# driver unless this is set, and a driver initialized here makes every forked child fail with
# "Cannot re-initialize CUDA in forked subprocess". NVML answers the same question fork-safely.
os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)


def _job_function(name: str) -> Callable[[Any], Mapping[str, object]]:
    """The function that runs job `name` (wire.JOBS). Its module is imported here, inside the
    child, so a broken job module cannot take the zygote down."""
    import importlib

    import wire

    job = wire.JOBS.get(name)
    if job is None:
        raise ValueError(f"unknown job {name!r}")
    function: Callable[[Any], Mapping[str, object]] = getattr(importlib.import_module(job.module), job.function)
    return function


BYTECODE_ENV = "CUDA_AGENT_BYTECODE_DIR"
_bytecode_kept = False


def keep_bytecode(folder: str | None, package: str = "torch") -> bool:
    """Keep the bytecode of this process's imports in `folder` when `package` was installed
    without any (pip --no-compile, PYTHONDONTWRITEBYTECODE at install): every worker then
    compiled torch's sources again on import, seconds for torch and as many again for dynamo.
    An install that has its bytecode keeps using it. Only `with writing_bytecode()` writes; the
    folder is the harness's cache, which no candidate process can write to. True when in use."""
    global _bytecode_kept
    import importlib.util

    if not folder or sys.pycache_prefix:
        return _bytecode_kept
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return False
    origin = getattr(spec, "origin", None)
    if not origin or not origin.endswith(".py") or os.path.exists(importlib.util.cache_from_source(origin)):
        return False
    os.makedirs(folder, mode=0o700, exist_ok=True)
    sys.pycache_prefix = folder
    _bytecode_kept = True
    return True


class writing_bytecode:
    """Inside: imports write their bytecode to the kept folder (when one is in use). Outside,
    as the worker starts (-B), nothing is written, so no job writes bytecode anywhere."""

    def __enter__(self) -> None:
        sys.dont_write_bytecode = not _bytecode_kept

    def __exit__(self, *exc: object) -> None:
        sys.dont_write_bytecode = True


def _fast_tensor_files() -> None:
    """Tensor files between harness jobs live a few seconds in private shared memory: a CRC
    over every byte would cost as much as writing them and protects against nothing there."""
    import torch

    if hasattr(torch.serialization, "set_crc32_options"):
        torch.serialization.set_crc32_options(False)


def _result_of(name: str, spec_path: str, extra: dict[str, Any] | None = None) -> Mapping[str, object]:
    with open(spec_path) as f:
        spec = json.load(f)
    spec.update(extra or {})
    _fast_tensor_files()
    return _job_function(name)(spec)


def run_job(name: str, spec_path: str, result_path: str) -> int:
    result = _result_of(name, spec_path)
    tmp = result_path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(result, f)
    os.replace(tmp, result_path)
    return 0


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when its parent dies, so no job outlives the harness."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _child(req: wire.WorkerRequest, result_fd: int, extra: dict[str, Any] | None = None) -> None:
    os.setsid()
    _die_with_parent()
    if req.get("nice"):
        # Work overlapped with a build yields the CPU to the compiler (the round's long pole).
        try:
            os.nice(int(req["nice"]))
        except OSError:
            pass
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    log = os.open(req["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(devnull)
    os.close(log)
    sys.stdin = open(os.devnull)
    sys.stdout = os.fdopen(1, "w", buffering=1)
    sys.stderr = os.fdopen(2, "w", buffering=1)
    code = 1
    try:
        _write_all(result_fd, json.dumps(_result_of(req["job"], req["spec"], extra)).encode())
        os.close(result_fd)
        code = 0
    except BaseException:  # the log is the only place a child's failure can go
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


# Jobs that use what the warm-up imports: the strict op guard and integrity snapshot
# (candidate), torch.compile (baselines).
_NEEDS_WARM_UP = ("evaluate",)
_compiler_warm = False


def _warm_compiler() -> float:
    """Import torch.compile's machinery (dynamo, inductor and its caches) here, once: every
    baselines service forked later starts with it loaded, instead of importing it for each
    reference (seconds of CPU, longer than importing torch itself). Nothing is compiled, no
    thread starts and CUDA stays untouched, so forked children are as before. Returns the
    seconds it took (0 once done)."""
    global _compiler_warm
    if _compiler_warm:
        return 0.0
    _compiler_warm = True
    began = time.perf_counter()
    import torch

    with writing_bytecode():
        import torch._dynamo  # noqa: F401
        import torch._inductor.codecache  # noqa: F401
        import torch._inductor.compile_fx  # noqa: F401

    if torch.cuda.is_initialized():
        raise SystemExit("harness worker: importing torch.compile initialized CUDA; children could not use it")
    return time.perf_counter() - began


def _warm_dispatch() -> None:
    import op_guard

    if not op_guard.is_warm():
        with writing_bytecode():
            op_guard.warm_up()


def _warm_all(compiler: bool) -> dict[str, Any]:
    began = time.perf_counter()
    _warm_dispatch()
    answer = {"warm": True, "dispatch_s": round(time.perf_counter() - began, 3)}
    if compiler:
        answer["compiler_s"] = round(_warm_compiler(), 3)
    return answer


PR_SET_CHILD_SUBREAPER = 36


def _become_subreaper() -> bool:
    try:
        import ctypes

        return bool(ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def _my_children() -> list[int]:
    # Its own scan: the zygote imports none of the job modules (worker_common.children_by_parent
    # is the jobs'), so a broken one cannot take it down.
    me = os.getpid()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                if int(f.read().rsplit(")", 1)[1].split()[1]) == me:
                    found.append(int(entry))
        except (OSError, IndexError, ValueError):
            continue
    return found


def sweep_orphans(running: Container[int], keep: frozenset[int] = frozenset()) -> int:
    """Kill and reap every child of this zygote that is not a running job or a service (`keep`):
    what ended jobs left behind, reparented here because the zygote is their subreaper. Returns
    how many."""
    killed = 0
    for _ in range(50):
        strays = [pid for pid in _my_children() if pid not in running and pid not in keep]
        if not strays:
            break
        for pid in strays:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
            killed += 1
        time.sleep(0.001)
    return killed


def _reap(pid: int, status: int) -> dict[str, Any]:
    # Grandchildren (ninja, compilers, threads' helpers) must not outlive the job.
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if os.WIFSIGNALED(status):
        return {"status": "crash", "returncode": None, "signal": os.WTERMSIG(status)}
    code = os.WEXITSTATUS(status)
    return {"status": "ok" if code == 0 else "crash", "returncode": code, "signal": None}


def _kill(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    os.waitpid(pid, 0)


MAX_SERVICES = 2


class _Service(TypedDict):
    """One baselines service: its process, the zygote's ends of its channel, the job it is lent
    to (-1 while that job is being forked, None when idle) and when it was last asked for."""

    pid: int
    fds: list[int]
    lent: int | None
    used: float


class Services:
    """The zygote's baselines services, by key (see the module's docstring)."""

    def __init__(self) -> None:
        self.by_key: dict[str, _Service] = {}

    def pids(self) -> frozenset[int]:
        return frozenset(s["pid"] for s in self.by_key.values())

    def fds(self) -> list[int]:
        return [fd for s in self.by_key.values() for fd in s["fds"]]

    def _alive(self, service: _Service) -> bool:
        try:
            done, _ = os.waitpid(service["pid"], os.WNOHANG)
        except ChildProcessError:
            return False
        return not done

    def stop(self, key: str) -> None:
        service = self.by_key.pop(key, None)
        if service is None:
            return
        for fd in service["fds"]:
            try:
                os.close(fd)
            except OSError:
                pass
        try:
            os.killpg(service["pid"], signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            os.waitpid(service["pid"], 0)
        except ChildProcessError:
            pass

    def stop_all(self) -> None:
        for key in list(self.by_key):
            self.stop(key)

    def _idle(self, wanted: wire.ServiceRequest, close_in_child: list[int]) -> _Service | None:
        """The live service for `wanted["key"]`, started if need be (the oldest idle ones beyond
        MAX_SERVICES stopped); None when it is lent to a job right now."""
        key = str(wanted["key"])
        service = self.by_key.get(key)
        if service is not None and not self._alive(service):
            self.stop(key)
            service = None
        if service is None:
            idle = sorted((s["used"], k) for k, s in self.by_key.items() if s["lent"] is None)
            while len(self.by_key) >= MAX_SERVICES and idle:
                self.stop(idle.pop(0)[1])
            service = self._start(str(wanted.get("log") or os.devnull), close_in_child + self.fds())
            self.by_key[key] = service
        service["used"] = time.monotonic()
        return service if service["lent"] is None else None

    def lend(self, wanted: wire.ServiceRequest, close_in_child: list[int]) -> _Service | None:
        """The service for `wanted["key"]`, marked as lent (to the job about to be forked: its
        pid is filled in after the fork); None when another job has it (that job's evaluation
        then starts baselines of its own)."""
        service = self._idle(wanted, close_in_child)
        if service is not None:
            service["lent"] = -1
        return service

    def _start(self, log_path: str, close_in_child: list[int]) -> _Service:
        import channel

        parent_ends, child_ends = channel.pipe_pair()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                os.setsid()
                _die_with_parent()
                for fd in close_in_child + list(parent_ends):
                    try:
                        os.close(fd)
                    except OSError:
                        pass
                devnull = os.open(os.devnull, os.O_RDONLY)
                os.dup2(devnull, 0)
                log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
                os.dup2(log, 1)
                os.dup2(log, 2)
                os.close(devnull)
                os.close(log)
                sys.stdout = os.fdopen(1, "w", buffering=1)
                sys.stderr = os.fdopen(2, "w", buffering=1)
                _fast_tensor_files()
                # A service runs only the pristine reference, and torch.compile imports most of
                # inductor while it builds: those imports keep their bytecode for the next session.
                sys.dont_write_bytecode = not _bytecode_kept
                from baselines import serve_baselines_service

                serve_baselines_service(channel.Channel(*child_ends))
                code = 0
            except BaseException:
                import traceback

                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        for fd in child_ends:
            os.close(fd)
        return {"pid": pid, "fds": list(parent_ends), "lent": None, "used": time.monotonic()}

    def prewarm(self, wanted: wire.ServiceRequest, close_in_child: list[int]) -> bool:
        """Start the service for `wanted["key"]` now, and have it build and warm the baselines
        from the reference's own inputs while the round's build and inputs are still being made.
        False when it is lent out (it is warm then)."""
        service = self._idle(wanted, close_in_child)
        if service is None:
            return False
        import channel

        try:
            channel.Channel(*service["fds"]).send({"op": "prewarm", "spec": wanted.get("prewarm") or {}})
        except channel.ChannelClosed:
            self.stop(str(wanted["key"]))
            return False
        return True

    def returned(self, job_pid: int, clean: bool) -> None:
        for key, service in list(self.by_key.items()):
            if service["lent"] == job_pid:
                service["lent"] = None
                if not clean:
                    self.stop(key)  # the state of its channel is unknown


def serve() -> None:
    # No parent-death signal here: the harness may start this from a thread that ends early.
    # When the harness goes away this process reads end-of-file on stdin, kills what is still
    # running and exits.
    # Importing torch here is the whole point: children start with it already loaded.
    import select
    import selectors

    began = time.perf_counter()
    kept = keep_bytecode(os.environ.get(BYTECODE_ENV))
    with writing_bytecode():
        import torch  # noqa: F401
        import torch.utils.cpp_extension  # noqa: F401

        # isort: split
        # The runtime guards, which the evaluate and judge jobs import first: loaded once here.
        import integrity  # noqa: F401
        import op_guard
        import output_checks  # noqa: F401

    boot = {"import_s": round(time.perf_counter() - began, 3), "bytecode": "kept" if kept else "installed"}
    if torch.cuda.is_initialized():
        raise SystemExit("harness worker: CUDA was initialized before forking; children could not use it")

    out = os.fdopen(os.dup(1), "w", buffering=1)
    # Nothing but answers may reach the harness through the original stdout.
    os.dup2(2, 1)
    reaper = _become_subreaper()
    out.write(json.dumps({"ready": True, "pid": os.getpid(), "subreaper": reaper, **boot}) + "\n")
    stdin = sys.stdin.fileno()
    sel = selectors.DefaultSelector()
    sel.register(stdin, selectors.EVENT_READ)
    # Several jobs may run at once (the harness overlaps e.g. input generation with a build);
    # each answer carries its request's id.
    running: dict[int, tuple[int, float, int]] = {}  # pid -> (request id, deadline, result fd)
    results: dict[int, bytearray] = {}  # result fd -> what the job has written so far
    services = Services()
    buffer = b""
    delay = 0.0005
    warm_soon = False
    deferred: list[wire.ServiceRequest] = []  # services asked for before the warm-up, started right after it

    def start_deferred() -> None:
        while deferred:
            services.prewarm(deferred.pop(0), [stdin, out.fileno(), *results])

    def warm_dispatch() -> None:
        _warm_dispatch()
        start_deferred()

    def warm_all(compiler: bool) -> dict[str, Any]:
        answer = _warm_all(compiler)
        start_deferred()
        return answer

    def drain(fd: int, final: bool) -> None:
        while True:
            try:
                chunk = os.read(fd, 1 << 20)
            except BlockingIOError:
                chunk = None
            if not chunk:
                break
            results[fd] += chunk
            if not final:
                break
        if final:
            try:
                sel.unregister(fd)
            except (KeyError, ValueError):
                pass
            os.close(fd)

    while True:
        events = sel.select(delay if running else None)
        for key, _ in events:
            if key.fd != stdin:
                drain(key.fd, final=False)
        if any(key.fd == stdin for key, _ in events):
            chunk = os.read(stdin, 65536)
            if not chunk:
                for pid in list(running):
                    _kill(pid)
                running.clear()
                services.stop_all()
                sweep_orphans(running)
                break
            buffer += chunk
            while b"\n" in buffer:
                line, _, buffer = buffer.partition(b"\n")
                if not line.strip():
                    continue
                req: wire.WorkerRequest = json.loads(line)
                if req["job"] == "service":
                    wanted = req.get("service")
                    started = False
                    if isinstance(wanted, dict) and op_guard.is_warm():
                        started = services.prewarm(wanted, [stdin, out.fileno(), *results])
                    elif isinstance(wanted, dict):
                        started = True
                        # Started once the zygote's warm-up has imported what the service
                        # needs first (torch._dynamo): forked before it, the service imported
                        # those ~800 modules again beside the zygote, seconds of CPU on a small
                        # machine for nothing, as its prewarm waits for them either way.
                        deferred.append(wanted)
                    out.write(
                        json.dumps(
                            {
                                "id": req["id"],
                                "status": "ok",
                                "returncode": 0,
                                "signal": None,
                                "result": {"prewarming": bool(started)},
                            }
                        )
                        + "\n"
                    )
                    continue
                if req["job"] in ("warm", "warm-compiler"):  # nothing waits yet (a session has just
                    # opened; a bench slot is about to score many references)
                    out.write(
                        json.dumps(
                            {
                                "id": req["id"],
                                "status": "ok",
                                "returncode": 0,
                                "signal": None,
                                "result": warm_all(req["job"] == "warm-compiler"),
                            }
                        )
                        + "\n"
                    )
                    continue
                # The first op under a dispatch mode imports ~800 modules (seconds on a cold
                # machine); paid once here, it stays out of every forked candidate job. It is
                # paid lazily, once the first burst of jobs (build, inputs, the baselines'
                # prewarm) is running, not before "ready"; an evaluation waits for it.
                if not op_guard.is_warm() and req["job"] in _NEEDS_WARM_UP:
                    warm_dispatch()
                service = None
                if req["job"] == "evaluate" and isinstance(req.get("service"), dict):
                    service = services.lend(req["service"], [stdin, out.fileno(), *results])
                extra = {"baselines_service": {"pid": service["pid"], "fds": service["fds"]}} if service else None
                read_fd, write_fd = os.pipe()
                pid = os.fork()
                if pid == 0:
                    out.close()
                    sel.close()
                    os.close(read_fd)
                    for fd in list(results):
                        os.close(fd)  # other jobs' result pipes
                    for fd in services.fds():  # services' channels: only the borrower keeps its own
                        if service is None or fd not in service["fds"]:
                            os.close(fd)
                    _child(req, write_fd, extra)
                if service is not None:
                    service["lent"] = pid
                os.close(write_fd)
                os.set_blocking(read_fd, False)
                results[read_fd] = bytearray()
                sel.register(read_fd, selectors.EVENT_READ)
                running[pid] = (req["id"], time.monotonic() + float(req.get("timeout", 600)), read_fd)
                if req["job"] != "probe":
                    warm_soon = True
            if (warm_soon or deferred) and not op_guard.is_warm() and not select.select([stdin], [], [], 0.05)[0]:
                warm_dispatch()
        if events:
            delay = 0.0005
        finished = False
        for pid, (req_id, deadline, read_fd) in list(running.items()):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                answer = _reap(pid, status)
            elif time.monotonic() > deadline:
                _kill(pid)
                answer = {"status": "timeout", "returncode": None, "signal": int(signal.SIGKILL)}
            else:
                continue
            del running[pid]
            drain(read_fd, final=True)
            data = bytes(results.pop(read_fd))
            answer["result"] = None
            if answer["status"] == "ok":
                try:
                    answer["result"] = json.loads(data)
                except ValueError:
                    answer["status"] = "crash"
            services.returned(
                pid,
                clean=answer["status"] == "ok"
                and isinstance(answer["result"], dict)
                and not answer["result"].get("service_broken"),
            )
            sweep_orphans(running, services.pids())
            finished = True
            answer["id"] = req_id
            out.write(json.dumps(answer) + "\n")
        if not finished and not events:
            delay = min(delay * 2, 0.01)


def main(argv: list[str]) -> int:
    if len(argv) >= 1 and argv[0] == "--job":
        import argparse

        p = argparse.ArgumentParser()
        p.add_argument("--job", required=True)
        p.add_argument("--spec", required=True)
        p.add_argument("--result", required=True)
        a = p.parse_args(argv)
        return run_job(a.job, a.spec, a.result)
    serve()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
