"""What a built library calls, read from its undefined symbols (threat 44): the names the linker
resolves, however the source spelled them."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from cuda_agent_cli.harness import library_symbols

ALLOWED = frozenset({"empty", "empty_like", "zeros", "clone", "contiguous", "copy_", "view"})

# Symbols as a C++ compiler would mangle them, declared in C through asm labels so the test needs
# no torch headers: each is an undefined symbol of the library built below.
CALLS = {
    "sgemm_": "sgemm_",
    "at_cpu_mm": "_ZN2at3cpu2mmERKNS_6TensorES3_",
    "at_ops_matmul": "_ZN2at4_ops6matmul4callERKNS_6TensorES4_",
    "at_ops_empty": "_ZN2at4_ops15empty_memory_format4callEN3c108ArrayRefINS2_6SymIntEEE",
    "at_ops_zeros_out": "_ZN2at4_ops9zeros_out4callEN3c108ArrayRefINS2_6SymIntEEERNS_6TensorE",
    "cublas_axpy": "cublasSaxpy_v2",
    "cublas_gemm": "cublasSgemm_v2",
    "cudnn_softmax": "cudnnSoftmaxForward",
    "cudnn_conv": "cudnnConvolutionForward",
    "lookup": "dlsym",
    "plain_c": "memcpy",
    "blas_handle": "_ZN2at4cuda24getCurrentCUDABlasHandleEv",
}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("gcc") is None:
        pytest.skip("no C compiler")
    folder = tmp_path_factory.mktemp("symbols")
    decls = "\n".join(f'extern void {alias}(void) __asm__("{sym}");' for alias, sym in CALLS.items())
    body = "\n".join(f"  {alias}();" for alias in CALLS)
    (folder / "lib.c").write_text(f"{decls}\nvoid entry(void) {{\n{body}\n}}\n")
    out = folder / "lib.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(out), str(folder / "lib.c")], check=True)
    return out


@pytest.mark.integration
def test_every_call_into_another_library_is_read(built: Path):
    names = library_symbols.undefined_symbols(built)
    assert set(CALLS.values()) <= set(names)
    assert "entry" not in names  # defined here, not taken from elsewhere


@pytest.mark.integration
def test_strict_refuses_library_compute_under_any_name(built: Path):
    found = {f.name: f.why for f in library_symbols.findings(library_symbols.undefined_symbols(built), "cuda", ALLOWED)}
    assert "BLAS" in found["sgemm_"]
    assert "called directly" in found["at::cpu::mm"]
    assert "matmul" in found["at::_ops::matmul::call"]
    assert "GEMM only" in found["cublasSaxpy_v2"]
    assert "convolution only" in found["cudnnSoftmaxForward"]
    assert "run time" in found["dlsym"]
    # What a kernel's wrapper does (allocate, copy; an out= overload of an allocation), a GEMM
    # through cuBLAS and a convolution through cuDNN are allowed.
    for allowed in (
        "at::_ops::empty_memory_format::call",
        "at::_ops::zeros_out::call",
        "cublasSgemm_v2",
        "cudnnConvolutionForward",
        "memcpy",
        "at::cuda::getCurrentCUDABlasHandle",
    ):
        assert allowed not in found


def test_mangled_names_read_as_their_namespace_path():
    assert library_symbols.qualified_name("_ZN2at3cpu2mmERKNS_6TensorES3_") == "at::cpu::mm"
    assert library_symbols.qualified_name("_ZN2at4_ops2mm4callERKNS_6TensorES4_") == "at::_ops::mm::call"
    assert library_symbols.qualified_name("_ZNK2at6Tensor5sizesEv") == "at::Tensor::sizes"
    assert library_symbols.qualified_name("_Z6kernelPfi") == "kernel"
    assert library_symbols.qualified_name("sgemm_") == "sgemm_"


def test_not_an_elf_file_is_said_so(tmp_path: Path):
    bogus = tmp_path / "cuda_extension.so"
    bogus.write_bytes(b"#!/bin/sh\n")
    with pytest.raises(ValueError, match="not a 64-bit little-endian ELF"):
        library_symbols.undefined_symbols(bogus)
