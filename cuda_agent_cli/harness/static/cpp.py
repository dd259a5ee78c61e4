"""Static checks on C++/CUDA sources: kernels/ files and the strings handed to load_inline.

Checked on tokens, after comments and string literals are blanked out (every text below has the
source's length, so a position means the same line in all of them). Qualified names are read
with namespace aliases resolved (`namespace q = pybind11;`, `namespace A = ::at;`, chains of
them); `using` declarations and directives are tracked too. The rules, by class:

- torch ops under strict (`torch_ops_cpp`): torch::/at:: compute functions, tensor compute
  methods, member pointers to Tensor methods (however the class is named), cuBLAS beyond GEMM,
  cuDNN beyond convolution;
- the interpreter (`dynamic_code`): the CPython C API, embedded Python (pybind11 exec/eval,
  module imports, globals), Python attribute writes, dispatch-key and dispatcher internals,
  code that runs when the library loads or the process exits;
- processes (`threads`): threads, raw syscalls (also in inline assembly), process creation,
  signals, host callbacks;
- files (`file_env_access`), precision (`precision_flags`), macros and pasting (`token_pasting`),
  streams without a synchronize (`streams`).
"""

from __future__ import annotations

import re

from cuda_agent_cli.config import Policy
from cuda_agent_cli.harness.static.rules import (
    TENSOR_ALLOWED_METHODS,
    TENSOR_COMPUTE_METHODS,
    Finding,
    Severity,
    is_introspection_attr,
)

# Routes the runtime guards stop, and which the adversarial suite's runtime candidates take to
# reach them (pybind11 attribute chains into the interpreter, std::thread through a namespace
# alias): not reported by default (None), so those candidates still exercise the runtime layer
# and add no warning to the rounds that use their kernel sets. "error" refuses them statically.
RUNTIME_COVERED: Severity | None = None

_METHOD = re.compile(r"(?:\.|->)\s*(?:template\s+)?(\w+)\s*(?:<[^<>;]*>)?\s*\(")
# A qualified name: an optional leading ::, then name::name::...::name.
_QUALIFIED = re.compile(r"(?<![\w:])(?:::\s*)?([A-Za-z_]\w*)\s*::\s*((?:[A-Za-z_~]\w*\s*::\s*)*)([A-Za-z_~]\w*)")

# torch::/at:: functions allowed under strict: allocation, options, accessors, parallel helpers.
_CPP_ALLOWED_FUNCS = frozenset(
    {
        "empty",
        "empty_like",
        "empty_strided",
        "zeros",
        "zeros_like",
        "ones",
        "ones_like",
        "full",
        "full_like",
        "arange",
        "tensor",
        "from_blob",
        "scalar_tensor",
        "dtype",
        "device",
        "layout",
        "requires_grad",
        "memory_format",
        "parallel_for",
        "parallel_reduce",
        "get_num_threads",
        "get_thread_num",
        "in_parallel_region",
        "acc_type",
        "opmath_type",
        "numeric_limits",
        "elementSize",
        "toString",
        "typeMetaToScalarType",
        "isFloatingType",
        "globalContext",
        "check_dim_size",
        "checkAllSameGPU",
        "checkContiguous",
        "checkSameType",
        "checkDim",
        "irange",
        "borrow_from_optional_tensor",
        "maybe_wrap_dim",
        "infer_size",
    }
)
# Sub-namespaces of torch::/at:: that hold no compute ops (device, stream and handle helpers).
_CPP_ALLOWED_NAMESPACES = frozenset({"cuda", "cudnn", "vec", "detail", "indexing", "jit_none"})
# Inside at::cuda:: these still compute; everything else there is streams, guards, handles.
_CPP_CUDA_COMPUTE = re.compile(
    r"^(?!gemm|bgemm|gemv|getCurrent|getDefault|getStream|set|get|device|"
    r"current|CUDA|Optional|is|memcpy|stream|blas|check).*"
)
_CPP_BLAS_ALLOWED = re.compile(r"^(b?gemm\w*|gemv\w*|scaled_gemm\w*|gemm_and_bias)$")
# Tensor members that are metadata, accessors or allocation: fine to name as Tensor::x.
_CPP_TENSOR_MEMBERS_ALLOWED = TENSOR_ALLOWED_METHODS | frozenset(
    {
        "data_ptr",
        "const_data_ptr",
        "mutable_data_ptr",
        "sizes",
        "strides",
        "options",
        "scalar_type",
        "is_contiguous",
        "defined",
        "accessor",
        "packed_accessor32",
        "packed_accessor64",
        "generic_packed_accessor",
        "expect_contiguous",
        "itemsize",
        "nbytes",
        "layout",
        "suggest_memory_format",
        "is_same",
        "use_count",
        "reset",
        "sym_sizes",
        "sym_numel",
        "is_cpu",
        "is_floating_point",
        "is_complex",
        "is_non_overlapping_and_dense",
        "storage",
        "has_storage",
        "unsafeGetTensorImpl",
        "getIntrusivePtr",
        "print",
        "toString",
        "name",
        "dim",
        "is_sparse",
        "is_meta",
        "Tensor",
        "TensorBase",
        "~Tensor",
        "operator",
    }
)

_CUBLAS_CALL = re.compile(r"\b(cublas(?:Lt)?)(\w+)\s*\(")
_CUBLAS_ALLOWED = re.compile(
    r"^(Create|Destroy|Set\w*|Get\w*|[SDHCZ]gemm\w*|Gemm\w*|[SDHCZ]gemv\w*|"
    r"Matmul\w*|MatrixLayout\w*|MatmulDesc\w*|MatmulPreference\w*|"
    r"MatmulAlgo\w*|LoggerConfigure|GemmBatchedEx|GemmStridedBatchedEx)$"
)
_CUDNN_CALL = re.compile(r"\bcudnn(\w+)\s*\(")
_CUDNN_ALLOWED = re.compile(
    r"^(Create\w*|Destroy\w*|Set\w*|Get\w*|Find\w*Convolution\w*|"
    r"Convolution\w*|FindConvolution\w*)$"
)

_CPP_STREAM_CREATE = re.compile(
    r"\b(cudaStreamCreate\w*|getStreamFromPool|cuStreamCreate\w*|"
    r"cudaStreamPerThread|cudaStreamNonBlocking)\b"
)
_CPP_SYNC = re.compile(
    r"\b(cudaStreamSynchronize|cudaDeviceSynchronize|cudaStreamWaitEvent|"
    r"cudaEventSynchronize|synchronize)\s*\("
)

# Threads and processes. SPECIFIC names are reported wherever they appear (called, taken by
# address, wrapped in parentheses); GENERIC ones only when used as a function, because the
# same word is an ordinary variable (`signal`) or a tensor method (`x.clone()`).
_PROC_SPECIFIC = re.compile(
    r"\b(syscall|__syscall|fork|vfork|clone3|posix_spawn\w*|execv\w*|execl\w*|"
    r"fexecve|popen|prctl|ptrace|setsid|setpgid|setpgrp|tgkill|tkill|killpg|"
    r"pthread_create|pthread_kill|unshare|setns|sigaction|setitimer|timer_create|"
    r"cudaLaunchHostFunc|cudaStreamAddCallback|cuLaunchHostFunc|cuStreamAddCallback|"
    r"thrd_create|__clone|__fork|_Fork|__libc_\w+|process_vm_readv|process_vm_writev|"
    r"pidfd_\w+|getppid|setpriority|sched_setaffinity|sched_setscheduler|ioprio_set|"
    r"memfd_create|ThreadPool\w*|TaskThreadPool\w*|intraop_launch\w*|"
    r"launch_no_thread_state)\b"
)
_PROC_GENERIC = re.compile(r"\b(system|kill|clone|daemon|signal|alarm|raise|launch|async|nice)\b")
_STD_THREADS = re.compile(r"\bstd\s*::\s*(thread|jthread|async)\b|\b(thread|jthread)\s+\w+\s*[({]")
_RAW_SYSCALL_NUMBER = re.compile(r"\b(SYS_\w+|__NR_\w+)\b")
_ASM = re.compile(r"\b(?:asm|__asm__|__asm)\b\s*(?:volatile|__volatile__|goto|inline|\s)*\(")
_ASM_BLOCK = re.compile(r"\b__asm\s*\{")
_ASM_FORBIDDEN = re.compile(
    r"\b(syscall|sysenter|sysexit|int\s*\$?0x80|svc|swi|vmcall)\b|"
    r"\.(byte|2byte|4byte|8byte|word|hword|short|long|int|quad|octa|inst|incbin|ascii|"
    r"asciz|string)\b",
    re.I,
)
_LOAD_TIME = re.compile(
    r"__attribute__\s*\(\s*\(\s*(?:__)?(constructor|destructor)(?:__)?\b|"
    r"\[\[\s*gnu\s*::\s*(constructor|destructor)\b|"
    r"\b(atexit|at_quick_exit|on_exit|pthread_atfork|__cxa_atexit|__cxa_thread_atexit)\b"
)
_INIT_SECTION = re.compile(r"section\s*\(\s*\"\.(init_array|preinit_array|ctors|fini_array|dtors|init|fini)")

_CPP_FILE_ENV = re.compile(
    r"\b(fopen|freopen|fdopen|open|openat|creat|getenv|secure_getenv|setenv|"
    r"putenv|unsetenv|environ|ifstream|ofstream|fstream|readlink|dlopen|"
    r"dlsym|dlvsym|dlmopen|opendir|mmap|socket|connect|shm_open|shm_unlink|shmget|shmat|"
    r"msgget|semget|inotify_init\w*|fanotify_init|filesystem|unlink|unlinkat|rename|renameat|"
    r"truncate|ftruncate|chmod|chown|symlink|mkdir|rmdir|readdir|scandir|nftw|ftw)\b"
)
# Words that are also ordinary member names: file access only when called as free functions.
_FILE_CALLS_ONLY = frozenset(
    {
        "open",
        "connect",
        "socket",
        "mmap",
        "creat",
        "environ",
        "unlink",
        "rename",
        "truncate",
        "chmod",
        "chown",
        "symlink",
        "mkdir",
        "rmdir",
        "readdir",
        "ftw",
    }
)
_CPP_DISPATCH_BYPASS = re.compile(
    r"\b(ExcludeDispatchKeyGuard|IncludeDispatchKeyGuard|tls_\w+|"
    r"\w*LocalDispatchKeySet\w*|ForceDispatchKeyGuard|\w*DispatchModeTLS\w*|"
    r"PythonTLSSnapshot|PythonDispatcher\w*|AutoDispatch\w+|"
    r"DispatchKeySet|DispatchKey|DispatchKeyExtractor|Dispatcher|"
    r"OperatorHandle|ThreadLocalState\w*|key_set|redispatch|callBoxed|"
    r"findSchemaOrThrow|findSchema|findOp|TORCH_LIBRARY\w*|RegisterOperators|"
    r"_force_tls_local_dispatch_key_set|AutoNonVariableTypeMode|"
    r"\w*TorchFunction\w*|\w*TorchDispatch\w*|\w*PythonMode\w*)\b"
)
_CPP_PRECISION = re.compile(
    r"\b(setAllowTF32\w*|setFloat32MatmulPrecision|setAllowFP16\w*|"
    r"setAllowBF16\w*|setBenchmarkCuDNN|setDeterministic\w*|"
    r"cublasSetMathMode|setFloat32Precision|CUBLAS_TF32_TENSOR_OP_MATH|"
    r"CUBLAS_COMPUTE_32F_FAST_\w+)\b"
)
# The CPython C API and torch's own Python bindings (THPVariable_Wrap, ...).
_CPYTHON = re.compile(r"\b(_?Py[A-Z_]\w*|THP[A-Z][a-z]\w*)\b")
_PY_EMBED_WORDS = re.compile(
    r"\b(scoped_interpreter|initialize_interpreter|finalize_interpreter|"
    r"PYBIND11_EMBEDDED_MODULE|embedded_module|eval_statements|eval_single_statement)\b"
)
_PY_RUN_CALL = re.compile(r"\b(exec|eval|eval_file|globals)\b\s*(?:<[^<>;]*>)?\s*\(")
_PY_IMPORT = re.compile(r"(?:::|\.|->)\s*(import)\s*\(")
_PYBIND_BANNED = frozenset(
    {
        "exec",
        "eval",
        "eval_file",
        "globals",
        "import",
        "scoped_interpreter",
        "initialize_interpreter",
        "finalize_interpreter",
        "embed",
        "setattr",
        "delattr",
        "module_",
        "module",
    }
)
_ATTR_CALL = re.compile(r"(?:\.|->)\s*attr\s*\(")
# What strict lets C++ read of a Python object by name: a tensor's metadata.
CPP_ALLOWED_ATTRS = frozenset(
    {
        "shape",
        "dtype",
        "device",
        "size",
        "stride",
        "numel",
        "dim",
        "ndim",
        "data_ptr",
        "is_cuda",
        "is_contiguous",
        "element_size",
        "storage_offset",
        "requires_grad",
    }
)
_PY_ATTR_FUNCS = re.compile(r"\b(getattr|hasattr)\s*\(")
_DANGEROUS_PY_NAMES = frozenset(
    {
        "exec",
        "eval",
        "compile",
        "__import__",
        "getattr",
        "setattr",
        "delattr",
        "globals",
        "locals",
        "vars",
        "open",
        "system",
        "modules",
        "import_module",
        "popen",
        "fork",
        "environ",
        "_getframe",
        "breakpoint",
        "input",
    }
)
_INCLUDE = re.compile(r"^[ \t]*(?:#|%:)[ \t]*include(?:_next)?[ \t]*(.*)$", re.M)
_BANNED_HEADERS = re.compile(
    r"(^|/)(Python\.h|frameobject\.h|pythonrun\.h|ceval\.h|pystate\.h|"
    r"embed\.h|eval\.h|syscall\.h|unistd_\w+\.h|spawn\.h|ptrace\.h|prctl\.h|"
    r"dlfcn\.h|LocalDispatchKeySet\.h|Dispatcher\.h|python_\w+\.h|pycore_\w+\.h|"
    r"THP\.h)$"
)
_ALLOWED_RELATIVE_INCLUDES = frozenset({"../binding_registry.h"})
_CPP_UNQUALIFY = re.compile(
    r"\b(using\s+namespace\s+(?:::\s*)?(?:torch|at)\b|"
    r"namespace\s+\w+\s*=\s*(?:::\s*)?(?:torch|at)\b)"
)
_NS_ALIAS = re.compile(r"\bnamespace\s+(\w+)\s*=\s*((?:::\s*)?\w+(?:\s*::\s*\w+)*)\s*;")
_MACRO_ALIAS = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+)[ \t]+((?:::)?[A-Za-z_]\w*(?:::\w+)*)[ \t]*$", re.M)
_USING_DIRECTIVE = re.compile(r"\busing\s+namespace\s+((?:::\s*)?\w+(?:\s*::\s*\w+)*)\s*;")
_TYPE_ALIAS = re.compile(
    r"\busing\s+(\w+)\s*=\s*([^;]*)\b(Tensor|TensorBase)\s*;|"
    r"\btypedef\s+([^;]*)\b(Tensor|TensorBase)\s+(\w+)\s*;"
)
# `decltype(t)::add`, `std::remove_reference_t<decltype(t)>::add`: a class named by an expression.
_MEMBER_AFTER_TYPE_EXPR = re.compile(r"[>)]\s*::\s*(\w+)")
_MEMBER_POINTER_OP = re.compile(r"(?:[A-Za-z_)\]]\s*\.\*|->\*)")
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+)(\([^)]*\))?(.*)$", re.M)
BANNED_IN_MACRO = re.compile(
    r"\b(torch|at|c10|pybind11|py|cudaStreamCreate\w*|fopen|getenv|pthread_create|"
    r"dlsym|dlopen|system|popen|syscall|fork|vfork|exec[lv]\w*|exec|eval|_?Py[A-Z_]\w*|"
    r"SYS_\w+|__NR_\w+|DispatchKey\w*|\w*DispatchKeyGuard|prctl|ptrace|"
    r"posix_spawn\w*|mem_fn)\b"
)
_SPLIT_IDENTIFIER = re.compile(r"\w\\\n\w")
_UNIVERSAL_NAME = re.compile(r"\\u[0-9A-Fa-f]{4}|\\U[0-9A-Fa-f]{8}")
# Another name for a libc function: an asm label, alias/weakref attributes, a pragma.
_SYMBOL_RENAME = re.compile(
    r"__attribute__\s*\(\s*\(\s*(?:__)?(alias|weakref|ifunc|symver)\b|"
    r"#\s*pragma\s+(redefine_extname|weak)\b"
)
_CHECKED_SUFFIXES = (".cu", ".cpp", ".cc", ".cuh", ".h", ".hpp")


def check_cpp(
    source: str, location: str, policy: Policy, runtime_covered: Severity | None = RUNTIME_COVERED
) -> list[Finding]:
    """Findings for one C++/CUDA source, after comments and string literals are stripped.

    `runtime_covered` is the severity of the routes the runtime layer stops (RUNTIME_COVERED);
    None leaves them unreported.
    """
    return _CppChecker(source, location, policy, runtime_covered).run()


class _CppChecker:
    def __init__(self, source: str, location: str, policy: Policy, runtime_covered: Severity | None) -> None:
        self.runtime_covered = runtime_covered
        self.source = source
        self.location = location
        self.strict = policy == "strict"
        self.literal = _strip(source, keep_strings=True)  # comments blanked, strings kept
        self.code = _strip(source, keep_strings=False)  # comments and strings blanked
        self.findings: list[Finding] = []
        self.aliases = _namespace_aliases(self.code)
        self.tensor_types = {"Tensor", "TensorBase"} | _tensor_type_aliases(self.code)

    def add(self, name: str, reason: str, pos: int, severity: Severity | None = "error") -> None:
        if severity is None:
            return
        line = self.source.count("\n", 0, pos) + 1
        self.findings.append(Finding(name, severity, reason, f"{self.location}:{line}"))

    def run(self) -> list[Finding]:
        self._preprocessor()
        self._qualified_names()
        if self.strict:
            self._strict_rules()
        self._interpreter()
        self._dispatch_and_precision()
        self._processes()
        self._files_and_streams()
        unique: dict[tuple[str, str, str], Finding] = {}
        for f in self.findings:
            unique.setdefault((f.name, f.location, f.reason), f)
        return sorted(unique.values(), key=lambda f: f.line)

    # -- preprocessor ------------------------------------------------------------------------
    def _preprocessor(self) -> None:
        code = self.code
        joined = code.replace("\\\n", "  ")
        for m in re.finditer(r"##|%:%:|\?\?=", code):
            self.add(
                "token_pasting",
                "token pasting (##, %:%:, ??=) can assemble banned names; write identifiers out",
                m.start(),
            )
        for m in _UNIVERSAL_NAME.finditer(code):
            self.add(
                "token_pasting",
                "a universal character name (\\u...) in an identifier can spell a banned "
                "name; write identifiers in plain ASCII",
                m.start(),
            )
        for m in _SYMBOL_RENAME.finditer(code):
            self.add(
                "dynamic_code",
                f"{m.group(1) or m.group(2)} gives a function another name, which hides what is called",
                m.start(),
            )
        for m in _SPLIT_IDENTIFIER.finditer(code):
            self.add("token_pasting", "a line continuation splits an identifier; write it on one line", m.start())
        for m in _DEFINE.finditer(joined):
            hit = BANNED_IN_MACRO.search(m.group(3))
            if hit:
                self.add(
                    "token_pasting",
                    f"macro {m.group(1)} hides {hit.group(1)}; write calls out where they are used",
                    m.start(),
                )
        for m in _INCLUDE.finditer(self.literal):
            target = m.group(1).strip()
            if not target.startswith(("<", '"')):
                self.add(
                    "dynamic_code", f"#include {target} is computed by a macro; include a literal header", m.start()
                )
                continue
            path = target[1:].split(">" if target[0] == "<" else '"')[0].strip()
            if _BANNED_HEADERS.search(path):
                self.add(
                    "dynamic_code",
                    f"#include {target[0]}{path}: the Python interpreter, raw syscalls, "
                    "dynamic loading and the dispatcher are off limits to a kernel",
                    m.start(),
                )
            elif target[0] == '"' and not path.endswith(_CHECKED_SUFFIXES):
                self.add(
                    "dynamic_code",
                    f'#include "{path}": only .h/.cuh/.cu/.cpp sources are checked; rename it',
                    m.start(),
                )
            elif (
                path.startswith("/")
                or ("scratch" in path)
                or (target[0] == '"' and ".." in path and path not in _ALLOWED_RELATIVE_INCLUDES)
            ):
                self.add(
                    "dynamic_code",
                    f"#include {target[0]}{path}: a header outside the checked sources; put it in kernels/",
                    m.start(),
                )

    # -- qualified names (aliases resolved) ----------------------------------------------------
    def _qualified_names(self) -> None:
        for m in _QUALIFIED.finditer(self.code):
            head = self.aliases.get(m.group(1), m.group(1))
            parts = (
                [p for p in head.split("::") if p]
                + [s.strip() for s in m.group(2).split("::") if s.strip()]
                + [m.group(3)]
            )
            root = parts[0]
            shown = "::".join(parts)
            if root in ("torch", "at") and self.strict:
                chain = parts[1:]
                if chain and chain[0] in ("Tensor", "TensorBase") and len(chain) > 1:
                    self._tensor_member(chain[1], shown, m.start())
                elif chain and chain[0] == "python":
                    pass  # judged below with the interpreter rules
                elif chain and _cpp_qualified_compute(chain):
                    self.add(
                        "torch_ops_cpp", f"{shown} is a torch op; strict policy needs a hand-written kernel", m.start()
                    )
            elif root in self.tensor_types and len(parts) > 1 and self.strict:
                self._tensor_member(parts[1], shown, m.start())
            if root == "pybind11" and any(p in _PYBIND_BANNED for p in parts[1:]):
                bad = next(p for p in parts[1:] if p in _PYBIND_BANNED)
                if bad not in ("module_", "module") or "import" in parts:
                    self.add(
                        "dynamic_code",
                        f"{shown}: {bad} runs or changes Python from C++, out of the checks' sight",
                        m.start(),
                    )
            if len(parts) > 1 and parts[-1] in ("thread", "jthread") and root != "std":
                self.add("threads", f"{shown}: threads can run work outside the timed region", m.start())
            if root == "pybind11" and len(parts) > 1 and parts[1] == "detail":
                self.add("dynamic_code", f"{shown}: pybind11's internals reach the interpreter's state", m.start())
            if root == "std" and len(parts) > 1 and parts[-1] in ("thread", "jthread", "async") and m.group(1) != "std":
                self.add(
                    "threads",
                    f"{shown} (through the alias {m.group(1)}): threads can run work outside the timed region",
                    m.start(),
                    self.runtime_covered,
                )
            if root == "torch" and len(parts) > 1 and parts[1] == "python":
                self.add("dynamic_code", f"{shown}: torch's Python bindings reach the interpreter", m.start())

    def _tensor_member(self, member: str, shown: str, pos: int) -> None:
        base = member.rstrip("_")
        if (
            member in TENSOR_COMPUTE_METHODS
            or base in TENSOR_COMPUTE_METHODS
            or (member not in _CPP_TENSOR_MEMBERS_ALLOWED and member[:1].islower())
        ):
            self.add(
                "torch_ops_cpp",
                f"{shown} names a Tensor method (a member pointer or a qualified "
                "call runs the torch op); strict policy needs a hand-written kernel",
                pos,
            )

    # -- strict ------------------------------------------------------------------------------
    def _strict_rules(self) -> None:
        code = self.code
        for m in _METHOD.finditer(code):
            name = m.group(1)
            if name in TENSOR_COMPUTE_METHODS and name not in TENSOR_ALLOWED_METHODS:
                self.add(
                    "torch_ops_cpp",
                    f".{name}() is a tensor compute op; strict policy needs a hand-written kernel",
                    m.start(),
                )
        for m in _MEMBER_AFTER_TYPE_EXPR.finditer(code):
            name = m.group(1)
            group = _bracket_group_before(code, m.start())
            names_tensor = re.search(r"\b(decltype|" + "|".join(sorted(self.tensor_types)) + r")\b", group)
            if names_tensor and (name in TENSOR_COMPUTE_METHODS or name.rstrip("_") in TENSOR_COMPUTE_METHODS):
                self.add(
                    "torch_ops_cpp",
                    f"::{name} after a type expression (decltype, a template) names a "
                    "Tensor method; strict policy needs a hand-written kernel",
                    m.start(),
                )
        for m in re.finditer(r"\b(\w+)\s*::\s*\*", code):
            if m.group(1) in self.tensor_types or m.group(1) in ("at", "torch"):
                self.add(
                    "torch_ops_cpp",
                    f"a pointer to a member of {m.group(1)} calls torch ops; strict policy needs a hand-written kernel",
                    m.start(),
                )
        for m in _MEMBER_POINTER_OP.finditer(code):
            self.add(
                "torch_ops_cpp",
                "calls through a member pointer (.* or ->*) hide which method runs; call kernels directly",
                m.start(),
            )
        for m in re.finditer(r"\b(mem_fn|mem_fun\w*|invoke)\b", code):
            self.add(
                "torch_ops_cpp",
                f"std::{m.group(1)} calls methods through pointers, which hides torch ops; call kernels directly",
                m.start(),
            )
        for m in _CUBLAS_CALL.finditer(code):
            if not _CUBLAS_ALLOWED.match(m.group(2)):
                self.add("torch_ops_cpp", f"{m.group(1)}{m.group(2)}: cuBLAS is allowed for GEMM only", m.start())
        for m in _CUDNN_CALL.finditer(code):
            if not _CUDNN_ALLOWED.match(m.group(1)):
                self.add("torch_ops_cpp", f"cudnn{m.group(1)}: cuDNN is allowed for convolution only", m.start())
        for m in _CPP_UNQUALIFY.finditer(code):
            self.add(
                "torch_ops_cpp",
                f"'{' '.join(m.group(1).split())}' lets unqualified names reach torch "
                "ops; qualify what you use (torch::empty, at::cuda::...)",
                m.start(),
            )
        for m in _USING_DIRECTIVE.finditer(code):
            target = _canonical(m.group(1), self.aliases)
            if target.split("::")[0] in ("at", "torch") and not _CPP_UNQUALIFY.match(m.group(0)):
                self.add(
                    "torch_ops_cpp",
                    f"'using namespace {m.group(1).strip()}' is {target}: it lets "
                    "unqualified names reach torch ops; qualify what you use",
                    m.start(),
                )

    # -- the interpreter ---------------------------------------------------------------------
    def _interpreter(self) -> None:
        code = self.code
        for m in _CPYTHON.finditer(code):
            self.add(
                "dynamic_code",
                f"{m.group(1)}: the CPython C API reaches frames, globals and every "
                "object of the harness; kernels take tensors and numbers",
                m.start(),
            )
        for m in _PY_EMBED_WORDS.finditer(code):
            self.add("dynamic_code", f"{m.group(1)} embeds a Python interpreter in the kernel", m.start())
        for m in _PY_RUN_CALL.finditer(code):
            if _is_member(code, m.start(1)):
                continue
            self.add("dynamic_code", f"{m.group(1)}(...) runs Python from C++, out of the checks' sight", m.start())
        for m in _PY_IMPORT.finditer(code):
            self.add("dynamic_code", "import(...) loads a Python module from C++, out of the checks' sight", m.start())
        for m in _ATTR_CALL.finditer(code):
            self._python_attribute(m.end(), m.start(), "attr")
        for m in _PY_ATTR_FUNCS.finditer(code):
            if not _is_member(code, m.start(1)):
                self._python_attribute(m.end(), m.start(), m.group(1), second_argument=True)

    def _python_attribute(self, args_start: int, pos: int, fn: str, second_argument: bool = False) -> None:
        """`.attr("name")` / `py::getattr(obj, "name")` reaching interpreter internals.

        Attribute calls are ordinary pybind11, so these are RUNTIME_COVERED: the route into the
        interpreter from an object handed to C++ is closed at runtime, where the candidate
        process holds nothing that decides a verdict. Importing, exec/eval and the C API
        above are errors.
        """
        end = _closing_paren(self.code, args_start - 1)
        args = self.literal[args_start:end]
        if second_argument:
            args = args.split(",", 1)[1] if "," in args else ""
        lit = re.match(r'\s*"((?:[^"\\]|\\.)*)"\s*(?:[,)]|$)', args)
        if lit is None:
            self.add(
                "dynamic_code",
                f"{fn}() with a computed name reaches Python attributes the checks cannot see; use a literal name",
                pos,
                self.runtime_covered,
            )
            return
        name = lit.group(1)
        if is_introspection_attr(name) or name in _DANGEROUS_PY_NAMES:
            self.add(
                "dynamic_code", f'{fn}("{name}") reaches interpreter internals from C++', pos, self.runtime_covered
            )
        elif self.strict and name not in CPP_ALLOWED_ATTRS:
            # A chain of plain names walks from a tensor handed to C++ to torch itself (its
            # module, then its dispatch state): under strict a kernel's C++ reads tensor metadata
            # through attributes at most, and the guard inside its process is not the only line.
            self.add(
                "dynamic_code",
                f'{fn}("{name}") from C++ walks Python objects beyond tensor metadata; '
                "a kernel takes what it needs as arguments",
                pos,
            )
        if fn == "attr" and re.match(r"\s*=(?!=)", self.code[end + 1 : end + 8]):
            self.add(
                "dynamic_code",
                f'attr("{name}") = ... writes a Python attribute from C++: a monkeypatch',
                pos,
                self.runtime_covered,
            )

    # -- dispatch and precision --------------------------------------------------------------
    def _dispatch_and_precision(self) -> None:
        for m in _CPP_DISPATCH_BYPASS.finditer(self.code):
            self.add(
                "dynamic_code",
                f"{m.group(1)} changes how ops are dispatched, which hides them from the "
                "runtime guard; bind kernels through the pybind binding",
                m.start(),
            )
        for m in _CPP_PRECISION.finditer(self.code):
            self.add("precision_flags", f"{m.group(1)} changes precision settings fixed by the harness", m.start())

    # -- processes ---------------------------------------------------------------------------
    def _processes(self) -> None:
        code = self.code
        for m in _STD_THREADS.finditer(code):
            self.add("threads", f"{m.group(1) or m.group(2)}: threads can run work outside the timed region", m.start())
        for m in _PROC_SPECIFIC.finditer(code):
            if _is_member(code, m.start(1)):
                continue
            self.add(
                "threads",
                f"{m.group(1)}: threads, processes and raw syscalls can run work outside the timed region",
                m.start(),
            )
        for m in _PROC_GENERIC.finditer(code):
            word = m.group(1)
            if _is_member(code, m.start(1)):
                continue
            if not _used_as_function(code, m) and not (
                word in ("system", "kill", "daemon") and _used_as_value(code, m)
            ):
                continue
            qual = _qualifier(code, m.start(1))
            if qual in ("at", "torch", "c10") and word in ("clone", "raise"):
                continue
            if word == "launch" and qual not in ("at", "torch", "c10"):
                continue
            if word == "raise" and qual not in ("", "std"):
                continue
            self.add(
                "threads",
                f"{word}: processes, signals and thread pools can run work outside the timed region",
                m.start(),
            )
        for m in _RAW_SYSCALL_NUMBER.finditer(code):
            self.add("threads", f"{m.group(1)}: raw syscall numbers start processes the harness cannot see", m.start())
        for m in _ASM.finditer(code):
            end = _closing_paren(code, m.end() - 1)
            args = self.literal[m.end() : end]
            if not re.match(r'\s*(?:[uUL]|u8)?R?"', args):
                self.add(
                    "threads",
                    "inline assembly whose instructions are not a literal string cannot be checked; write the PTX out",
                    m.start(),
                )
                continue
            text = _asm_template(args)
            hit = _ASM_FORBIDDEN.search(text)
            if re.fullmatch(r"\s*[A-Za-z_$][\w$@.]*\s*", text) and text.strip() not in ("trap", "exit", "brkpt"):
                self.add(
                    "threads",
                    f'asm("{text.strip()}") renames a symbol (an asm label), which hides what is called',
                    m.start(),
                )
            elif hit:
                self.add(
                    "threads",
                    f"inline assembly with {hit.group(0).strip()}: raw syscalls and raw machine "
                    "code are off limits; PTX for the kernel is fine",
                    m.start(),
                )
        for m in _ASM_BLOCK.finditer(code):
            self.add("threads", 'block assembly cannot be checked; use asm("...") with PTX', m.start())
        for m in _LOAD_TIME.finditer(code):
            word = next(g for g in m.groups() if g)
            self.add(
                "dynamic_code",
                f"{word}: code that runs when the library loads or the process exits runs outside the checked call",
                m.start(),
            )
        for m in _INIT_SECTION.finditer(self.literal):
            self.add("dynamic_code", f"a function placed in .{m.group(1)} runs when the library loads", m.start())

    # -- files, streams ----------------------------------------------------------------------
    def _files_and_streams(self) -> None:
        code = self.code
        creates = list(_CPP_STREAM_CREATE.finditer(code))
        if creates and not _CPP_SYNC.search(code):
            self.add(
                "streams",
                f"{creates[0].group(1)} without a synchronize; work on a side stream escapes the timed region",
                creates[0].start(),
            )
        for m in _CPP_FILE_ENV.finditer(code):
            word = m.group(1)
            if word in _FILE_CALLS_ONLY and not _is_free_call(code, m):
                continue
            self.add("file_env_access", f"{word}: file, environment and network access are not allowed", m.start())


def _namespace_aliases(code: str) -> dict[str, str]:
    """`namespace X = Y::Z;` for every alias, resolved through earlier ones; py is pybind11."""
    aliases = {"py": "pybind11"}
    for _ in range(4):
        for m in _NS_ALIAS.finditer(code):
            aliases[m.group(1)] = _canonical(m.group(2), aliases)
        for m in _MACRO_ALIAS.finditer(code):  # `#define CONC std` renames a namespace too
            aliases[m.group(1)] = _canonical(m.group(2), aliases)
    return aliases


def _canonical(name: str, aliases: dict[str, str]) -> str:
    parts = [p.strip() for p in name.split("::") if p.strip()]
    if parts and parts[0] in aliases and aliases[parts[0]] != parts[0]:
        parts = aliases[parts[0]].split("::") + parts[1:]
    return "::".join(parts)


def _tensor_type_aliases(code: str) -> set[str]:
    """Names given to at::Tensor by `using T = at::Tensor;` or `typedef at::Tensor T;`."""
    out: set[str] = set()
    for m in _TYPE_ALIAS.finditer(code):
        out.add(m.group(1) or m.group(6))
    return out


def _is_member(code: str, start: int) -> bool:
    """Whether the identifier at `start` follows `.` or `->` (a member, not a free function)."""
    before = code[max(0, start - 3) : start].rstrip()
    return before.endswith((".", "->"))


def _qualifier(code: str, start: int) -> str:
    m = re.search(r"(\w+)\s*::\s*$", code[max(0, start - 64) : start])
    return m.group(1) if m else ""


def _used_as_function(code: str, m: re.Match[str]) -> bool:
    """Called, taken by address or wrapped in parentheses: `f(`, `&f`, `(f)`."""
    after = code[m.end(1) : m.end(1) + 64].lstrip()
    before = code[max(0, m.start(1) - 64) : m.start(1)].rstrip()
    before = re.sub(r"(?:\w+\s*::\s*)+$", "", before).rstrip()
    parenthesized = before.endswith("(") and re.match(r"\)\s*\(", after) is not None
    return after.startswith("(") or parenthesized or (before.endswith("&") and not before.endswith("&&"))


def _bracket_group_before(code: str, close: int) -> str:
    """The `<...>` or `decltype(...)` that ends at `close` (a `>` or `)`), with the word before it."""
    pair = {">": "<", ")": "("}.get(code[close])
    if pair is None:
        return ""
    depth = 0
    for i in range(close, max(-1, close - 400), -1):
        if code[i] == code[close]:
            depth += 1
        elif code[i] == pair:
            depth -= 1
            if depth == 0:
                word = re.search(r"(\w+)\s*$", code[max(0, i - 40) : i])
                return (word.group(1) if word else "") + code[i : close + 1]
    return ""


def _asm_template(args: str) -> str:
    """The instruction text of an asm statement: its adjacent string literals up to the first `:`."""
    parts: list[str] = []
    for m in re.finditer(r'"((?:[^"\\]|\\.)*)"|(:)', args):
        if m.group(2):
            break
        parts.append(m.group(1))
    return "".join(parts)


def _used_as_value(code: str, m: re.Match[str]) -> bool:
    """`f = system;`, `g(system, ...)`: the function itself handed on."""
    after = code[m.end(1) : m.end(1) + 8].lstrip()
    before = code[max(0, m.start(1) - 32) : m.start(1)]
    before = re.sub(r"(?:\w+\s*::\s*)+$", "", before.rstrip()).rstrip()
    return after[:1] in (";", ",", ")", "}") and (before.endswith(("=", "(", ",", "{")) or before.endswith("return"))


def _closing_paren(code: str, open_pos: int) -> int:
    depth = 0
    for i in range(open_pos, min(len(code), open_pos + 20000)):
        c = code[i]
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i
    return min(len(code), open_pos + 20000)


def _followed_by_call(code: str, end: int) -> bool:
    return bool(re.match(r"\s*\(", code[end:]))


def _is_free_call(code: str, m: re.Match[str]) -> bool:
    """`open(...)` as a free function, not `x.open(...)` or a member named open."""
    before = code[max(0, m.start() - 2) : m.start()].rstrip()
    if before.endswith((".", ">")):
        return False
    if m.group(1) == "environ":
        return True
    return _followed_by_call(code, m.end(1))


def _cpp_qualified_compute(chain: list[str]) -> bool:
    """Whether a torch::/at:: name (without its root) is a compute op forbidden under strict."""
    head = chain[0]
    if head[:1].isupper() or (head[:1] == "k" and head[1:2].isupper()):
        return False  # types and constants: Tensor, TensorOptions, ScalarType, kFloat, ...
    if len(chain) == 1:
        return head not in _CPP_ALLOWED_FUNCS
    if head == "cuda":
        if chain[1] == "blas":
            return not (len(chain) > 2 and _CPP_BLAS_ALLOWED.match(chain[2]))
        return chain[1][:1].islower() and bool(_CPP_CUDA_COMPUTE.match(chain[1]))
    if head in _CPP_ALLOWED_NAMESPACES:
        return False
    # native::, cpu::, _ops::, nn::functional::, linalg::, fft::, special:: ... all compute
    return True


def strip_cpp_comments_and_strings(source: str) -> str:
    """Replace comments and string/char literals with spaces, keeping newlines (line numbers).

    Raw strings (R"delim( ... )delim") are handled; #include <...> paths are kept as they are.
    The result has the source's length, so a position means the same place in both.
    """
    return _strip(source, keep_strings=False)


_LITERAL_OR_COMMENT = re.compile(
    r"(?P<line>//(?:\\\n|[^\n])*)"
    r"|(?P<block>/\*.*?(?:\*/|\Z))"
    r"|(?<![A-Za-z0-9_])(?P<raw>R\"(?P<delim>[^()\\\s]{0,16})\(.*?(?:\)(?P=delim)\"|\Z))"
    r"|\"(?P<sbody>(?:[^\"\\\n]|\\.)*)(?P<send>\")?"
    r"|'(?P<cbody>(?:[^'\\\n]|\\.)*)(?P<cend>')?",
    re.S,
)


def _strip(source: str, keep_strings: bool) -> str:
    """Comments blanked (and string literals too unless `keep_strings`), length and newlines kept."""
    out: list[str] = []
    last = 0
    for m in _LITERAL_OR_COMMENT.finditer(source):
        out.append(source[last : m.start()])
        text = m.group(0)
        if m.group("line") is not None or m.group("block") is not None:
            out.append(_blank(text))
        elif keep_strings:
            out.append(text)
        elif m.group("raw") is not None:
            out.append('""' + _blank(text[2:]))
        else:
            body = m.group("sbody") if m.group("sbody") is not None else m.group("cbody")
            closed = (m.group("send") or m.group("cend")) is not None
            out.append(text[0] + _blank(body) + (text[0] if closed else ""))
        last = m.end()
    out.append(source[last:])
    return "".join(out)


def _blank(text: str) -> str:
    return "".join("\n" if ch == "\n" else " " for ch in text)
