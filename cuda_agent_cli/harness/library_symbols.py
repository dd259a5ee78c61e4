"""What a built extension calls in other libraries, read from its undefined dynamic symbols.

Source checks read tokens, and a token can be spelled so that no rule knows it: BLAS under its
Fortran name (`sgemm_`), ATen's CPU kernel declared by hand (`at::cpu::mm`), a library reached
through a header of its own. The linker knows every one of them by name: a shared library
lists each function it takes from elsewhere as an undefined symbol of its dynamic symbol table,
and that is what the dynamic loader resolves when the extension is imported. So the policy is
held against that list (docs/security.md, threat 44): under strict, no ATen compute, no BLAS
under any name on the CPU, cuBLAS only for GEMM and cuDNN only for convolution on CUDA, and no
run-time lookup of functions by name (dlsym), which would hide the rest.

The ELF reading is the standard library's: this runs in the harness's process, which imports
no torch, on a file the candidate's build wrote and nothing of the candidate ran.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cuda_agent_cli.harness_result import Check

_SHT_DYNSYM = 11


def undefined_symbols(path: Path) -> list[str]:
    """The names a shared library takes from other libraries (its undefined dynamic symbols).

    Raises ValueError for a file that is not a 64-bit little-endian ELF shared object."""
    data = path.read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError(f"{path.name} is not a 64-bit little-endian ELF file")
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names: list[str] = []
    for _name, kind, _flags, _addr, offset, size, link, _info, _align, entsize in sections:
        if kind != _SHT_DYNSYM or not entsize:
            continue
        strings = sections[link]
        str_off, str_size = strings[4], strings[5]
        for at in range(offset, offset + size, entsize):
            st_name, _st_info, _st_other, st_shndx = struct.unpack_from("<IBBH", data, at)
            if st_shndx != 0 or st_name == 0 or st_name >= str_size:
                continue
            end = data.index(b"\0", str_off + st_name)
            names.append(data[str_off + st_name : end].decode("ascii", "replace"))
    return sorted(set(names))


def _source_name(length_prefixed: str, at: int) -> tuple[str | None, int]:
    m = re.match(r"\d+", length_prefixed[at:])
    if not m:
        return None, at
    n = int(m.group())
    start = at + len(m.group())
    return length_prefixed[start : start + n], start + n


def qualified_name(symbol: str) -> str:
    """The namespace path of an Itanium-mangled C++ function (`at::cpu::mm`), the symbol itself
    for a C name. Only the nested name is read: enough to know whose function it is."""
    if not symbol.startswith("_Z"):
        return symbol
    at = 2
    if symbol.startswith("_ZN", 0):
        at = 3
        while at < len(symbol) and symbol[at] in "KVrRO":  # cv- and ref-qualifiers of a method
            at += 1
        parts: list[str] = []
        while at < len(symbol) and symbol[at] != "E":
            if symbol.startswith("St", at):
                parts.append("std")
                at += 2
                continue
            if symbol[at] == "I":  # template arguments: what follows is not a name
                break
            if symbol[at] in "CD":  # constructors and destructors end the path
                parts.append(parts[-1] if parts else "?")
                break
            part, at = _source_name(symbol, at)
            if part is None:
                break
            parts.append(part)
        return "::".join(parts) or symbol
    part, _ = _source_name(symbol, at)
    return part or symbol


# The ATen namespaces whose functions compute: dispatcher entry points (at::_ops::<op>::call) and
# the kernels behind them, called directly.
_ATEN_OPS = re.compile(r"^at::_ops::(\w+)::(?:call|redispatch)$")
_ATEN_KERNELS = re.compile(
    r"^at::(native|cpu|cuda|meta|compositeexplicitautograd|compositeimplicitautograd|"
    r"compositeexplicitautogradnonfunctional)::(\w+)$"
)
_DISPATCHER = re.compile(r"^c10::(Dispatcher|OperatorHandle|impl::BoxedKernelWrapper)\b")
_TORCH_COMPUTE = re.compile(r"^torch::(nn|linalg|fft|special)::")
# BLAS and LAPACK under any name: the Fortran entry points (sgemm_, SGEMM, dgemv), CBLAS, and
# the vendors' own prefixes.
_BLAS = re.compile(
    r"^(cblas_|lapacke?_|LAPACKE_|mkl_|MKL_|openblas_|bli_|dnnl_|mkldnn_|xsmm_|libxsmm_)|"
    r"^[sdczSDCZ](gemm|gemv|ger[uc]?|symm|symv|syrk|syr2k|trmm|trmv|trsm|trsv|axpy|dot[uc]?|scal|copy|swap|"
    r"nrm2|asum|rot[gm]?|hemm|herk|gesv|getrf|potrf|geqrf|gesvd|syev)(_|_batch\w*|_compute|_pack\w*)?$|"
    r"^(GEMM|SGEMM|DGEMM|HGEMM)\w*$"
)
_CUBLAS = re.compile(r"^cublas(Lt)?\w+")
_CUBLAS_ALLOWED = re.compile(
    r"^cublas(Create|Destroy|SetStream|GetStream|SetWorkspace|SetPointerMode|GetPointerMode|GetVersion|"
    r"GetStatusString|GetStatusName|GetProperty)(_v2)?$|"
    r"^cublas\w*[Gg]emm\w*$|"
    r"^cublasLt(Create|Destroy|Matmul\w*|MatrixLayout\w*|GetVersion|GetStatusString)$"
)
_CUDNN = re.compile(r"^cudnn\w+")
_CUDNN_ALLOWED = re.compile(
    r"^cudnn(Create|Destroy|SetStream|GetStream|GetVersion|GetErrorString|GetProperty|"
    r"(Create|Destroy|Set|Get)(Tensor|TensorNd|Filter|FilterNd|Convolution|ConvolutionNd)\w*Descriptor\w*|"
    r"\w*Convolution\w*)$"
)
_OTHER_CUDA_LIBRARIES = re.compile(r"^(cufft|cusparse|cusolver|curand(?!_)|npp|nvjpeg|cutensor|ncclAllReduce)\w*")
_RUNTIME_LOOKUP = re.compile(r"^(dlopen|dlmopen|dlsym|dlvsym)$")


@dataclass(frozen=True)
class Finding:
    """One library function the policy does not allow, and why."""

    symbol: str
    name: str
    why: str

    def line(self) -> str:
        shown = self.name if self.name == self.symbol else f"{self.name} ({self.symbol})"
        return f"{shown}: {self.why}"


def findings(symbols: Iterable[str], device: str, allowed_aten: frozenset[str]) -> list[Finding]:
    """The undefined symbols strict refuses. `allowed_aten`: the ATen ops that allocate, view or
    copy (the op guard's table), which a kernel's wrapper may call on any device."""
    found: list[Finding] = []
    for symbol in symbols:
        name = qualified_name(symbol)
        why = _why(name, device, allowed_aten)
        if why:
            found.append(Finding(symbol, name, why))
    return found


def _aten_allowed(op: str, allowed_aten: frozenset[str]) -> bool:
    """An op of the table, or one of its overloads (at::_ops names them `<op>_<overload>`)."""
    return op in allowed_aten or any(op.startswith(a + "_") for a in allowed_aten)


def _why(name: str, device: str, allowed_aten: frozenset[str]) -> str | None:
    m = _ATEN_OPS.match(name)
    if m:
        op = m.group(1)
        if _aten_allowed(op, allowed_aten):
            return None
        return f"ATen's {op} through the dispatcher: torch compute under strict"
    m = _ATEN_KERNELS.match(name)
    # Operators are snake_case; the device's helpers beside them (at::cuda::getCurrentCUDABlasHandle)
    # are not compute.
    if m and m.group(2) == m.group(2).lower():
        if _aten_allowed(m.group(2), allowed_aten):
            return None
        return f"an ATen {m.group(1)} kernel called directly: torch compute under strict"
    if _DISPATCHER.match(name):
        return "calls operators through the dispatcher by name: torch compute under strict"
    if _TORCH_COMPUTE.match(name):
        return "torch's C++ compute functions: torch compute under strict"
    if _RUNTIME_LOOKUP.match(name):
        return "looks functions up by name at run time, so what it calls cannot be read from its symbols"
    if _BLAS.match(name):
        if device == "cpu":
            return "a BLAS or LAPACK function: strict allows no library compute on the CPU"
        return "a host BLAS or LAPACK function: strict allows cuBLAS for GEMM only"
    if _CUBLAS.match(name) and not _CUBLAS_ALLOWED.match(name):
        return "cuBLAS beyond GEMM: strict allows cuBLAS for GEMM only"
    if _CUDNN.match(name) and not _CUDNN_ALLOWED.match(name):
        return "cuDNN beyond convolution: strict allows cuDNN for convolution only"
    if _OTHER_CUDA_LIBRARIES.match(name):
        return "a CUDA math library strict does not allow (cuBLAS for GEMM and cuDNN for convolution only)"
    return None


def built_libraries(module_dir: str | None, inline_dir: Path | None, model_new: str) -> list[Path]:
    """The shared libraries a round's candidate loads: the extension the harness built
    (`module_dir`), or for a single-file candidate the ones its load_inline built, found in the
    extensions folder under the names its source gives them."""
    if module_dir:
        return sorted(Path(module_dir).glob("*.so"))
    if inline_dir is None or not inline_dir.is_dir():
        return []
    found = []
    for folder in sorted(p for p in inline_dir.iterdir() if p.is_dir()):
        if f'"{folder.name}"' in model_new or f"'{folder.name}'" in model_new:
            found.extend(sorted(folder.glob("*.so")))
    return found


def library_check(libraries: list[Path], device: str, policy: str, allowed_aten: frozenset[str]) -> Check:
    """library_calls: what the built libraries take from other libraries, held against the
    policy (strict only: hybrid lets a candidate call torch and its libraries)."""
    if policy != "strict":
        return Check("library_calls", True, f"{policy}: library calls allowed")
    if not libraries:
        return Check("library_calls", True, "no library of the candidate's own to read")
    bad: list[str] = []
    for path in libraries:
        try:
            names = undefined_symbols(path)
        except (OSError, ValueError) as exc:
            return Check("library_calls", False, f"{path.name} could not be read: {exc}")
        bad += [f"{path.name}: {f.line()}" for f in findings(names, device, allowed_aten)]
    if bad:
        more = f" (and {len(bad) - 3} more)" if len(bad) > 3 else ""
        return Check("library_calls", False, "; ".join(bad[:3]) + more)
    return Check(
        "library_calls",
        True,
        f"what {', '.join(p.name for p in libraries)} calls in other libraries is allowed under strict",
    )
