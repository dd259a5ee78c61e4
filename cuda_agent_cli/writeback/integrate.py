"""The integration: kernel sources, a loader and a small patch to the user's module.

Next to the module, `_cuda_agent/<class_snake>/` receives the verified candidate (kernels/,
model_new.py), the binding files, `verified.json` (what was verified: device, argument specs,
parameter dtypes and shapes) and `loader.py`. The module itself gets four lines after the class
that hand the class to the loader, which routes matching calls to the kernel and everything else
to the original code.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path, PurePosixPath
from typing import Any, Mapping

from cuda_agent_cli.kernel_files import KernelFiles
from cuda_agent_cli.task.inputs import CallSpec, family_value_json, value_to_json
from cuda_agent_cli.writeback.diff import FileChange

MARKER = "# cuda-agent:"
KERNEL_DIR = "_cuda_agent"
_BINDING_LINE = re.compile(r"PYBIND11_MODULE\(\s*cuda_extension\s*,")


@dataclass(frozen=True)
class Case:
    """One more verified call: its arguments and constructor arguments, what forward returns,
    and how often the user's program made it (captured calls)."""

    call: CallSpec
    output: dict[str, Any] = field(default_factory=lambda: {"kind": "tensor"})
    count: int | None = None
    parameters: tuple[tuple[str, str, tuple[int, ...]], ...] | None = None  # None: the first call's


@dataclass(frozen=True)
class Verified:
    """What the harness verified and timed, which is exactly what the kernel may be used for."""

    device: str
    call: CallSpec
    forward_params: tuple[str, ...]
    parameters: tuple[tuple[str, str, tuple[int, ...]], ...]
    training_sensitive: bool
    output: dict[str, Any] = field(default_factory=lambda: {"kind": "tensor"})
    count: int | None = None
    more: tuple[Case, ...] = ()  # further verified families, beside the first
    source_sha256: str | None = None  # writeback.fingerprint.class_digest of the class
    autograd: str = "reference"  # "reference": grad calls run the kernel, backward the original's; "off"

    def cases(self) -> list[Case]:
        """One case a family: a spec with named dimensions was verified at several sizes."""
        out: list[Case] = []
        seen: set[str] = set()
        for case in [Case(self.call, self.output, self.count, self.parameters), *self.more]:
            key = case.call.family()
            if key in seen:
                continue
            seen.add(key)
            same = [c for c in [Case(self.call, self.output, self.count), *self.more] if c.call.family() == key]
            counts = [c.count for c in same if c.count is not None]
            out.append(Case(case.call, case.output, sum(counts) if counts else None, case.parameters))
        return out


def op_name(class_snake: str, files: dict[str, str]) -> str:
    """The operator's qualified name: one per class and kernel source set."""
    digest = hashlib.sha256()
    for rel in sorted(files):
        digest.update(rel.encode() + b"\0" + files[rel].encode() + b"\0")
    return f"cuda_agent::{class_snake}_{digest.hexdigest()[:12]}"


def _family(case: Case, v: Verified) -> dict[str, Any]:
    args = []
    by_position = False
    for i, a in enumerate(case.call.args):
        name = a.name
        if name is None:
            if i < len(v.forward_params) and not v.forward_params[i].startswith("*"):
                name = v.forward_params[i]
            else:
                by_position = True
        args.append({"name": name, "spec": family_value_json(a.value, case.call.ranges)})
    if any(a["name"] is None for a in args):
        by_position = True
    family: dict[str, Any] = {
        "args": args,
        "by_position": by_position,
        "init": [{"name": a.name, "spec": value_to_json(a.value)} for a in case.call.init],
        "parameters": {n: [d, list(s)] for n, d, s in (case.parameters or v.parameters)},
        "output": {"kind": case.output.get("kind", "tensor")},
    }
    if case.count is not None:
        family["count"] = case.count
    return family


def verified_json(v: Verified, class_name: str, class_snake: str, op: str) -> str:
    """verified.json: the families the kernel runs for, argument specs keyed by forward
    parameter name where the signature allows."""
    families = [_family(c, v) for c in v.cases()]
    data: dict[str, Any] = {
        "version": 2,
        "class": class_name,
        "class_snake": class_snake,
        "op": op,
        "device": v.device,
        "source_sha256": v.source_sha256,
        "training_sensitive": v.training_sensitive,
        "autograd": v.autograd,
    }
    # One key a line (a family a line), values compact: short enough to read in the review diff.
    lines = [f"  {json.dumps(k)}: {json.dumps(value)}" for k, value in data.items()]
    inner = ",\n    ".join(json.dumps(f) for f in families)
    lines.append(f'  "families": [\n    {inner}\n  ]')
    return "{\n" + ",\n".join(lines) + "\n}\n"


def loader_source(display: str, class_name: str, session_id: str, op: str = "") -> str:
    from cuda_agent_cli.writeback.fingerprint import class_digest

    text = resources.files("cuda_agent_cli.writeback").joinpath("loader_template.py").read_text()
    recipe = hashlib.sha256(text.encode()).hexdigest()[:16]
    text = text.replace("# __CLASS_DIGEST__\n", inspect.getsource(class_digest)).replace("__RECIPE__", recipe)
    return (
        text.replace("__DISPLAY__", display)
        .replace("__CLASS__", class_name)
        .replace("__SESSION__", session_id)
        .replace("__OP__", op.replace("::", ".") if op else "cuda_agent.<op>")
    )


def extension_binding(binding_cpp: str) -> str:
    """The binding with the module named by the build (the loader gives each kernel its own name,
    so two integrated classes can live in one process)."""
    return _BINDING_LINE.sub("PYBIND11_MODULE(TORCH_EXTENSION_NAME,", binding_cpp)


def _describe_supported(v: Verified) -> str:
    from cuda_agent_cli.task.inputs import TensorSpec

    shapes = []
    for i, a in enumerate(v.call.args):
        if isinstance(a.value, TensorSpec):
            label = a.name or (v.forward_params[i] if i < len(v.forward_params) else f"arg{i}")
            names = a.value.dims or (None,) * len(a.value.shape)
            dims = ", ".join(n or str(d) for d, n in zip(a.value.shape, names))
            shapes.append(f"{label}: {a.value.dtype}[{dims}]")
    text = f"{v.device}, " + ", ".join(shapes) if shapes else v.device
    families = len(v.cases())
    if v.call.ranges:
        text += " " + " ".join(f"{n}={lo}..{hi}" for n, lo, hi in v.call.ranges)
    if families > 1:
        text += f", and {families - 1} more shape{'s' if families > 2 else ''} in verified.json"
    return text


def module_patch_lines(class_name: str, class_snake: str, v: Verified) -> list[str]:
    """The lines added to the user's module right after the class."""
    return [
        f"{MARKER} calls to {class_name} that match what was verified ({_describe_supported(v)})\n",
        f"# run the kernel in {KERNEL_DIR}/{class_snake}/; all other calls run the code above.\n",
        "import runpy as _cuda_agent_runpy\n",
        "from pathlib import Path as _CudaAgentPath\n",
        f'_cuda_agent_runpy.run_path(str(_CudaAgentPath(__file__).with_name("{KERNEL_DIR}") / "{class_snake}"'
        f' / "loader.py"))["install"]({class_name})\n',
    ]


def patch_module(source: str, class_name: str, class_snake: str, class_end: int, v: Verified) -> str:
    """`source` with the integration lines after line `class_end` (replacing an earlier integration
    of the same class, so applying twice leaves one)."""
    lines = source.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    install = f'["install"]({class_name})'
    for i, line in enumerate(lines):
        if install in line and "_cuda_agent_runpy.run_path" in line:
            start = i
            while start > 0 and (
                lines[start - 1].startswith(
                    ("import runpy as _cuda_agent_runpy", "from pathlib import Path as _CudaAgentPath")
                )
                or lines[start - 1].startswith("# ")
            ):
                start -= 1
                if lines[start].startswith(MARKER):
                    break
            end = i + 1
            if start > 0 and not lines[start - 1].strip():
                start -= 1
            new_block = ["\n", *module_patch_lines(class_name, class_snake, v)]
            return "".join(lines[:start] + new_block + lines[end:])
    block = ["\n", "\n", *module_patch_lines(class_name, class_snake, v)]
    after = lines[class_end:]
    if after and after[0].strip():
        block.append("\n\n")
    return "".join(lines[:class_end] + block + after)


@dataclass(frozen=True)
class IntegrationSpec:
    """What applying a kernel integrates: the class in its module, the session's verified
    candidate and the pristine binding files, and what was verified."""

    module_file: Path
    module_source: str
    class_name: str
    class_snake: str
    class_end: int  # the line after the class's last line
    display: str
    session_id: str
    candidate: KernelFiles
    binding_files: Mapping[str, str]  # binding.cpp and binding_registry.h from the pristine store
    verified: Verified


def plan_integration(
    spec: IntegrationSpec, repo_root: Path, existing: dict[str, str] | None = None
) -> list[FileChange]:
    """Every file change applying the kernel makes, paths relative to `repo_root`.

    `existing`: current text of files that already exist (read by the caller), so a re-apply
    shows a real diff instead of pretending the files are new.
    """
    existing = existing or {}
    rel_module = PurePosixPath(spec.module_file.resolve().relative_to(repo_root.resolve()).as_posix())
    folder = rel_module.parent / KERNEL_DIR / spec.class_snake

    def change(rel: PurePosixPath, text: str) -> FileChange:
        key = rel.as_posix()
        return FileChange(key, text, existing.get(key))

    patched = patch_module(spec.module_source, spec.class_name, spec.class_snake, spec.class_end, spec.verified)
    out = [change(rel_module, patched)]
    files = spec.candidate.texts()
    files["binding.cpp"] = extension_binding(spec.binding_files["binding.cpp"])
    files["binding_registry.h"] = spec.binding_files["binding_registry.h"]
    op = op_name(spec.class_snake, files)
    files["verified.json"] = verified_json(spec.verified, spec.class_name, spec.class_snake, op)
    files["loader.py"] = loader_source(spec.display, spec.class_name, spec.session_id, op)
    for rel, text in sorted(files.items()):
        out.append(change(folder / rel, text))
    return out


def kernel_folder(repo_root: Path, module_file: Path, class_snake: str) -> str:
    rel_module = PurePosixPath(module_file.resolve().relative_to(repo_root.resolve()).as_posix())
    return (rel_module.parent / KERNEL_DIR / class_snake).as_posix()
