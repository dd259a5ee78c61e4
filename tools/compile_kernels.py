"""Locked: build the `cuda_extension` module incrementally with ninja.

Sources are first copied into a snapshot (build/src) that only the harness writes: the locked
binding files come from the pristine copies, kernels from the workspace. A file is copied only
when its bytes changed, so ninja sees unchanged sources as unchanged and rebuilds exactly the
objects whose source (or included header, through depfiles) changed. binding.cpp includes only
pybind11, so the one file every build needs is cheap, and torch-heavy kernel bindings are
compiled once and reused until they are edited.

With an `objects_dir` (the user's cache), objects are also kept by content across sessions: an
object's name is a hash of its source, the headers beside it, the flags and the compilers, so a
file that any earlier session built the same way (binding.cpp always, an unchanged kernel) is
linked as it is, not compiled again. Objects are written under a temporary name and renamed,
so a session never links half an object another one is writing.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import wire
from compiler_errors import trim_compiler_output

KERNEL_SUFFIXES = {".cu", ".cpp", ".cc", ".h", ".cuh", ".hpp", ".inl"}
BINDING_FILES = ("binding.cpp", "binding_registry.h")
MODULE = "cuda_extension"


def _same_bytes(a: Path, b: Path) -> bool:
    return b.is_file() and a.stat().st_size == b.stat().st_size and a.read_bytes() == b.read_bytes()


def sync_sources(binding_dir: Path, kernels_dir: Path | None, src: Path) -> list[str]:
    """Mirror the sources into `src`; returns the relative paths whose content changed."""
    changed: list[str] = []
    (src / "kernels").mkdir(parents=True, exist_ok=True)
    wanted: dict[str, Path] = {name: binding_dir / name for name in BINDING_FILES}
    if kernels_dir is not None and kernels_dir.is_dir():
        for p in sorted(kernels_dir.iterdir()):
            # Links could point anywhere (a locked file, the build dir): only plain files build.
            if p.is_file() and not p.is_symlink() and p.suffix in KERNEL_SUFFIXES:
                wanted[f"kernels/{p.name}"] = p
    for rel, origin in wanted.items():
        dest = src / rel
        if not _same_bytes(origin, dest):
            tmp = dest.with_name(dest.name + ".tmp")
            shutil.copyfile(origin, tmp)
            os.replace(tmp, dest)
            changed.append(rel)
    for p in (src / "kernels").iterdir():
        if f"kernels/{p.name}" not in wanted:
            p.unlink()
            changed.append(f"kernels/{p.name}")
    return changed


def _esc(path: str) -> str:
    return path.replace("$", "$$").replace(" ", "$ ").replace(":", "$:")


def _include_paths() -> list[str]:
    """Torch's and Python's headers; the CUDA toolkit's are added from cuda_home() for cuda."""
    import torch.utils.cpp_extension as ce

    try:
        paths = ce.include_paths(device_type="cpu")
    except TypeError:  # older torch: include_paths(cuda: bool)
        paths = ce.include_paths(False)  # type: ignore[arg-type]  # the older signature
    return [*paths, sysconfig.get_paths()["include"]]


def _abi_flags() -> list[str]:
    import torch
    import torch.utils.cpp_extension as ce

    flags = [f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}"]
    getter = getattr(ce, "_get_pybind11_abi_build_flags", None)
    if getter is not None:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            flags += list(getter())
    return flags


def pip_cuda_includes() -> list[str]:
    """Header dirs of the nvidia-* wheels torch depends on: a fallback for a partial toolkit."""
    import importlib.util

    spec = importlib.util.find_spec("nvidia")
    if spec is None or not spec.submodule_search_locations:
        return []
    found: list[str] = []
    for root in spec.submodule_search_locations:
        for inc in sorted(Path(root).glob("*/include")) + sorted(Path(root).glob("*/*/include")):
            if inc.is_dir():
                found.append(str(inc))
    return found


def cuda_home() -> str | None:
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home and os.path.isfile(os.path.join(home, "bin", "nvcc")):
            return home
    nvcc = shutil.which("nvcc")
    return str(Path(nvcc).resolve().parent.parent) if nvcc else None


def detect_arch_list() -> str | None:
    """The present GPU's compute capability, asked of nvidia-smi so CUDA is not initialized."""
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run(
                [smi, "--query-gpu=compute_cap", "--format=csv,noheader"], capture_output=True, text=True, timeout=20
            )
            caps = sorted({ln.strip() for ln in out.stdout.splitlines() if re.fullmatch(r"\d+\.\d+", ln.strip())})
            if caps:
                return ";".join(caps)
        except (OSError, subprocess.TimeoutExpired):
            pass
    import torch

    if torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability(0)
        return f"{major}.{minor}"
    return None


def arch_flags(arch_list: str) -> list[str]:
    flags: list[str] = []
    for item in re.split(r"[;\s,]+", arch_list.strip()):
        if not item:
            continue
        ptx = item.endswith("+PTX")
        num = item.removesuffix("+PTX").replace(".", "")
        flags.append(f"-gencode=arch=compute_{num},code=sm_{num}")
        if ptx:
            flags.append(f"-gencode=arch=compute_{num},code=compute_{num}")
    return flags


_HEADER_SUFFIXES = {".h", ".cuh", ".hpp", ".inl"}


# Asked once per job: the precompiled header's key and the objects' keys both need it.
@functools.lru_cache(maxsize=None)
def _toolchain_identity(device: str) -> str:
    """The compilers and torch an object was built with (part of every stored object's name)."""
    import torch

    parts = [torch.__version__, sys.version.split()[0]]
    tools = ["c++"] + ([os.path.join(cuda_home() or "", "bin", "nvcc")] if device == "cuda" else [])
    for tool in tools:
        try:
            out = subprocess.run([tool, "--version"], capture_output=True, text=True, timeout=30)
            parts.append(out.stdout.strip().splitlines()[-1] if out.stdout.strip() else tool)
        except (OSError, subprocess.TimeoutExpired):
            parts.append(tool)
    return "\n".join(parts)


def _object_key(source: Path, src: Path, flags: str, toolchain: str) -> str:
    import hashlib

    h = hashlib.sha256()
    for part in (flags, toolchain, source.relative_to(src).as_posix()):
        h.update(part.encode() + b"\0")
    h.update(source.read_bytes() + b"\0")
    # Headers it may include: the binding registry and every header beside the kernels.
    for header in [src / "binding_registry.h", *sorted((src / "kernels").iterdir())]:
        if header.is_file() and (header.suffix in _HEADER_SUFFIXES):
            h.update(header.name.encode() + b"\0" + header.read_bytes() + b"\0")
    return h.hexdigest()[:32]


def _defines() -> str:
    return f"-DTORCH_EXTENSION_NAME={MODULE} -DTORCH_API_INCLUDE_EXTENSION_H " + " ".join(_abi_flags())


def _cuda_includes(home: str) -> str:
    return " ".join(f"-I{_esc(p)}" for p in [os.path.join(home, "include"), *pip_cuda_includes()])


@functools.lru_cache(maxsize=None)
def cxx_flags(device: str) -> str:
    """The C++ compiler's flags for every .cpp of a build, as build.ninja's text writes them."""
    includes = " ".join(f"-I{_esc(p)}" for p in _include_paths())
    cflags = f"-O3 -std=c++17 -fPIC -Wno-unused-result {_defines()} {includes}"
    if device == "cuda":
        home = cuda_home()
        if home is None:
            raise RuntimeError("nvcc not found: install the CUDA toolkit or set CUDA_HOME")
        cflags += f" {_cuda_includes(home)}"
    return cflags


# -- a precompiled torch/extension.h ----------------------------------------------------------
# Most of a kernel binding's compile time is parsing torch/extension.h (about half of 24 s on a
# 2-core machine). The header is compiled once per set of flags and compiler into the cache, in a
# folder put first on the include path: gcc takes torch/extension.h.gch from there where it is
# valid for the compile at hand, and reads the header itself where it is not (another compiler,
# a source that includes something else first), so a stale one costs time, never correctness.
PCH_HEADER = "torch/extension.h"


def pch_folder(pch_root: Path, cflags: str) -> Path:
    import hashlib

    key = hashlib.sha256((cflags + "\0" + _toolchain_identity("cpu")).encode()).hexdigest()[:24]
    return pch_root / key


def pch_file(folder: Path) -> Path:
    return folder / (PCH_HEADER + ".gch")


def _alive(pid: str) -> bool:
    try:
        os.kill(int(pid), 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    return True


def run_pch_job(spec: wire.PchRequest) -> wire.PchResult:
    """Compile torch/extension.h for `spec["device"]`'s C++ flags into `spec["pch_dir"]` (once:
    a folder that has it, or another job building it, is left alone)."""
    start = time.perf_counter()
    cflags = cxx_flags(spec["device"])
    folder = pch_folder(Path(spec["pch_dir"]), cflags)
    if pch_file(folder).is_file():
        return {"ok": True, "built": False, "seconds": 0.0}
    header = next((Path(p) / PCH_HEADER for p in _include_paths() if (Path(p) / PCH_HEADER).is_file()), None)
    if header is None:
        return {"ok": False, "errors": f"{PCH_HEADER} not found on torch's include path", "seconds": 0.0}
    pch_file(folder).parent.mkdir(parents=True, exist_ok=True)
    lock = folder / "building"
    try:  # one builder at a time; the lock of a builder that is gone (or an hour old) is taken over
        if lock.exists() and time.time() - lock.stat().st_mtime < 3600 and _alive(lock.read_text().strip()):
            return {"ok": True, "built": False, "seconds": 0.0}
        lock.write_text(str(os.getpid()))
    except OSError as exc:
        return {"ok": False, "errors": str(exc), "seconds": 0.0}
    # The same flags as build.ninja's, through ninja's own unescaping and the same shell.
    (folder / "build.ninja").write_text(
        "\n".join(
            [
                "cxx = c++",
                f"cflags = {cflags}",
                "rule pch",
                "  command = $cxx $cflags -x c++-header $in -o $out.tmp.$$$$ && mv -f $out.tmp.$$$$ $out",
                f"build {_esc(str(pch_file(folder)))}: pch {_esc(str(header))}",
                "",
            ]
        )
    )
    env = dict(os.environ, LC_ALL="C", LANG="C")
    proc = subprocess.run([_ninja(), "-C", str(folder)], capture_output=True, text=True, env=env)
    lock.unlink(missing_ok=True)
    ok = proc.returncode == 0 and pch_file(folder).is_file()
    out: wire.PchResult = {"ok": ok, "built": ok, "seconds": time.perf_counter() - start}
    if not ok:
        out["errors"] = (proc.stdout + proc.stderr)[-2000:]
    return out


def write_build_file(
    build: Path,
    src: Path,
    device: str,
    arch_list: str | None,
    objects_dir: Path | None = None,
    pch: Path | None = None,
) -> tuple[Path, dict[str, str]]:
    """build.ninja for the snapshot in `src`, rewritten only when its text changes, and the
    objects it names that live in `objects_dir` (path -> the name a build reports, obj/...).
    `pch`: a folder holding a precompiled torch/extension.h for these flags, searched first."""
    import torch.utils.cpp_extension as ce

    includes = " ".join(f"-I{_esc(p)}" for p in _include_paths())
    defines = _defines()
    lib = ce.library_paths()[0] if ce.library_paths() else ""
    ldflags = f"-shared -L{_esc(lib)} -lc10 -ltorch -ltorch_cpu -ltorch_python -Wl,-rpath,{_esc(lib)}"
    sources = [src / "binding.cpp", *sorted((src / "kernels").glob("*.cpp")), *sorted((src / "kernels").glob("*.cc"))]
    lines = [
        "ninja_required_version = 1.3",
        "cxx = c++",
        f"cflags = {cxx_flags(device)}",
        f"pch_include = {'-I' + _esc(str(pch)) if pch is not None else ''}",
    ]
    cu_sources: list[Path] = []
    if device == "cuda":
        home = cuda_home()
        if home is None:
            raise RuntimeError("nvcc not found: install the CUDA toolkit or set CUDA_HOME")
        cu_sources = sorted((src / "kernels").glob("*.cu"))
        nvcc_flags = " ".join(getattr(ce, "COMMON_NVCC_FLAGS", []))
        archs = " ".join(arch_flags(arch_list or "9.0"))
        lines += [
            f"nvcc = {_esc(os.path.join(home, 'bin', 'nvcc'))}",
            f"cuda_cflags = -O3 -std=c++17 --compiler-options -fPIC {nvcc_flags} {archs} {defines} "
            f"{includes} {_cuda_includes(home)}",
        ]
        ldflags += f" -lc10_cuda -ltorch_cuda -L{_esc(os.path.join(home, 'lib64'))} -lcudart"
    # $out.tmp.$$$$ is the shell's pid: objects appear under their final name only when complete.
    lines += [
        f"ldflags = {ldflags}",
        "rule cxx",
        "  command = $cxx -MMD -MT $out -MF $out.d $pch_include $cflags -c $in -o $out.tmp.$$$$ "
        "&& mv -f $out.tmp.$$$$ $out",
        "  depfile = $out.d",
        "  deps = gcc",
        "  description = CXX $out",
        "rule nvcc",
        "  command = $nvcc --generate-dependencies-with-compile --dependency-output $out.d -MT $out $cuda_cflags "
        "-c $in -o $out.tmp.$$$$ && mv -f $out.tmp.$$$$ $out",
        "  depfile = $out.d",
        "  deps = gcc",
        "  description = NVCC $out",
        "rule link",
        "  command = $cxx $in $ldflags -o $out",
        "  description = LINK $out",
    ]
    toolchain = _toolchain_identity(device) if objects_dir is not None else ""
    stored: dict[str, str] = {}
    objects: list[str] = []
    for rule, suffix, flags, group in (
        ("cxx", ".o", lines[2], sources),
        ("nvcc", ".cu.o", next((ln for ln in lines if ln.startswith("cuda_cflags")), ""), cu_sources),
    ):
        for s in group:
            name = "obj/" + s.relative_to(src).with_suffix(suffix).as_posix()
            obj = name
            if objects_dir is not None:
                obj = str(objects_dir / f"{_object_key(s, src, rule + flags, toolchain)}{suffix}")
                stored[obj] = name
            objects.append(obj)
            if objects_dir is None or not Path(obj).is_file():
                lines.append(f"build {_esc(obj)}: {rule} {_esc(str(s))}")
    lines.append(f"build module/{MODULE}.so: link {' '.join(_esc(o) for o in objects)}")
    lines.append(f"default module/{MODULE}.so")
    text = "\n".join(lines) + "\n"
    path = build / "build.ninja"
    if not path.is_file() or path.read_text() != text:
        path.write_text(text)
    return path, stored


def _ninja() -> str:
    try:
        import ninja

        candidate = os.path.join(ninja.BIN_DIR, "ninja")
        if os.path.isfile(candidate):
            return candidate
    except ImportError:
        pass
    found = shutil.which("ninja")
    if not found:
        raise RuntimeError("ninja not found: pip install ninja")
    return found


_STEP = re.compile(r"^\[\d+/\d+\]\s+(CXX|NVCC|LINK)\s+(\S+)")


def run_compile_job(spec: wire.CompileRequest) -> wire.CompileResult:
    """Sync sources, write build.ninja, run ninja; trimmed errors and what was rebuilt."""
    start = time.perf_counter()
    build = Path(spec["build_dir"])
    device = spec["device"]
    build.mkdir(parents=True, exist_ok=True)
    src = build / "src"
    kernels_dir = Path(spec["kernels_dir"]) if spec.get("kernels_dir") else None
    changed = sync_sources(Path(spec["binding_dir"]), kernels_dir, src)
    arch_list = (
        spec.get("arch_list")
        or os.environ.get("TORCH_CUDA_ARCH_LIST")
        or (detect_arch_list() if device == "cuda" else None)
    )
    log_path = build / "compile.log"
    objects_dir = Path(spec["objects_dir"]) if spec.get("objects_dir") else None
    if objects_dir is not None:
        objects_dir.mkdir(parents=True, exist_ok=True)
    pch: Path | None = None
    pch_state = "off"
    try:
        if spec.get("pch_dir"):
            folder = pch_folder(Path(spec["pch_dir"]), cxx_flags(device))
            pch, pch_state = (folder, "used") if pch_file(folder).is_file() else (None, "missing")
        _, stored = write_build_file(build, src, device, arch_list, objects_dir, pch)
    except RuntimeError as exc:
        log_path.write_text(str(exc))
        return {
            "ok": False,
            "errors": str(exc),
            "rebuilt": [],
            "changed": changed,
            "log": str(log_path),
            "module_dir": None,
            "seconds": time.perf_counter() - start,
            "arch_list": arch_list,
        }
    # MAX_JOBS as torch's own extension builds read it: a compile-ahead worker gets its share of the cores.
    max_jobs = os.environ.get("MAX_JOBS", "")
    jobs = str(spec.get("jobs") or (max_jobs.isdigit() and int(max_jobs)) or os.cpu_count() or 2)
    # The C locale keeps compiler messages in plain ASCII quotes, the same on every machine.
    env = dict(os.environ, LC_ALL="C", LANG="C")
    proc = subprocess.run([_ninja(), "-C", str(build), "-j", jobs], capture_output=True, text=True, env=env)
    log = proc.stdout + proc.stderr
    log_path.write_text(log)
    rebuilt = [stored.get(m.group(2), m.group(2)) for m in map(_STEP.match, log.splitlines()) if m]
    ok = proc.returncode == 0
    errors = "" if ok else trim_compiler_output(log, (str(src),), log_path=str(log_path))
    return {
        "ok": ok,
        "errors": errors,
        "rebuilt": rebuilt,
        "changed": changed,
        "log": str(log_path),
        "module_dir": str(build / "module") if ok else None,
        "seconds": time.perf_counter() - start,
        "arch_list": arch_list,
        "pch": pch_state,
    }


if __name__ == "__main__":
    import json

    with open(sys.argv[1]) as f:
        print(json.dumps(run_compile_job(json.load(f)), indent=2))
