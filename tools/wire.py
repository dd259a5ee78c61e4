"""Locked: the messages that cross between the harness and its jobs, as typed dicts.

A job's result travels as one JSON object (tools/worker.py); each message here describes such a
dict for the type checker. The jobs build them and import this module by name (`import wire`);
the harness reads them through cuda_agent_cli/harness/wire.py, which imports it as
`cuda_agent_cli.assets.tools.wire`. Standard library only: the harness's process imports no
torch.

A message is only as trustworthy as the process that made it: the controller's window and the
inputs and judge jobs' results are the harness's own, while the claims come from the
candidate's process, where its code ran (docs/security.md says what they may decide).
"""

from typing import Any, Literal, NotRequired, Required, TypeAlias, TypedDict

# -- pieces shared by several messages -------------------------------------------------------------

# tools/evidence.py `fingerprint`: per tensor its shape, dtype and digest (or its two linear
# sums), per other value its repr, nested as the object is.
Fingerprint: TypeAlias = "list[Fingerprint] | dict[str, Any]"
# Where a tensor lives: [device, first byte, end byte].
ByteRange: TypeAlias = "list[str | int]"


class Check(TypedDict):
    """One named check, as the harness reports it (`HarnessResult.checks`)."""

    name: str
    passed: bool
    detail: str


class Call(TypedDict):
    """One call the controller asks for: which of the models (built from input set `model`),
    which input set and the seed its fresh inputs are drawn from. Verification calls have ids
    from 0, timed ones from the controller's TIMED_BASE."""

    id: int
    model: int
    set: int
    seed: int


class JudgedCall(Call):
    """A call the judge rebuilds and checks: a verification call, the first one made again
    (determinism) or a timed call chosen after the calls returned."""

    role: Literal["verify", "again", "timed"]


class CallEvidence(TypedDict):
    """What a call left, taken in the candidate's process right after it returned (raw facts
    for the judge: tools/evidence.py `call_evidence`)."""

    inputs_after: Fingerprint
    input_ranges: list[ByteRange]
    output_ranges: list[ByteRange]


class Commit(TypedDict):
    """What the candidate's process committed to for one call before any output was chosen."""

    fingerprint: Fingerprint
    evidence: CallEvidence


# What the candidate's process committed to for each call as the controller keeps them (its
# output's fingerprint, the call's evidence), by call id.
Commits: TypeAlias = "dict[int, tuple[Fingerprint, CallEvidence]]"


class DrawRule(TypedDict, total=False):
    """How a timed call draws one input leaf anew (tools/timing.py, perturb)."""

    kind: Required[Literal["float", "complex", "bool", "int", "keep"]]
    signs: bool  # float: random signs too
    p: float  # bool: the share of True
    lo: int  # int: the range the reference's set takes
    hi: int


class SetFingerprints(TypedDict):
    """One input set as the inputs job wrote it: its inputs, and its init arguments and weights."""

    inputs: Fingerprint
    model: Fingerprint


# -- the build (tools/compile_kernels.py; tools/inline_build.py for a single-file candidate) -------


class CompileResult(TypedDict):
    """A build's result. A single-file candidate's build (its import, which runs load_inline)
    says only ok, errors or import_error, and seconds."""

    ok: bool
    seconds: float
    errors: NotRequired[str]  # the compiler's first errors, trimmed
    import_error: NotRequired[str]  # a single-file candidate whose import failed for another reason
    rebuilt: NotRequired[list[str]]  # build outputs made again (objects, the module)
    changed: NotRequired[list[str]]  # sources whose content changed since the last build
    log: NotRequired[str]  # the full log's path
    module_dir: NotRequired[str | None]  # where cuda_extension.so is
    arch_list: NotRequired[str | None]
    # "used": a precompiled torch/extension.h was on the include path; "missing": none yet for
    # these flags (the harness has one built beside its work); "off": not asked for
    pch: NotRequired[str]


# -- the inputs job (tools/verify_kernels.py) ------------------------------------------------------


class InputsResult(TypedDict):
    """The sets one inputs job wrote (several jobs may share an evaluation's sets)."""

    n: int
    indices: list[int]
    inputs: str  # the first set's inputs, described: shapes and dtypes
    input_bytes: int
    fingerprints: list[SetFingerprints]  # in the order of `indices`
    # Made from set 0 by the job that wrote it: how every call draws each input leaf anew.
    plan: NotRequired[list[DrawRule] | None]


class JobError(TypedDict):
    """A job that could not do its work for a reason of the reference's (not a crash)."""

    error: str


# -- the evaluate job (tools/controller.py; tools/candidate.py, tools/baselines.py) -------------


class Block(TypedDict):
    """One block of calls of one side, timed by the controller's clock from outside."""

    round: int
    events_us: list[float]  # each call's time by the side's own clock (for the candidate: its claim)
    walls_us: list[float]  # each call's time until the device was idle
    block_us: float  # the whole block by the controller's clock, round trip included
    n: int  # calls in the block
    # Trusted sides: how much slower than calibrated the lead-ins and flushes ran (CUDA).
    device_ratio: NotRequired[float]
    # The candidate's sides and base_null, on the CPU with one thread: the process's CPU time.
    cpu_us: NotRequired[float]


# Each side's blocks in the window's order: "eager", the compiled baselines ("compile": default
# torch.compile, absent where it failed; "autotune": max-autotune without CUDA graphs; "graphs":
# a CUDA-graph replay, reduce-overhead, on CUDA), "candidate", "null" (the candidate process's null blocks: the same calls around a
# stand-in) and "base_null" (the same null blocks in the baselines' process).
SideBlocks: TypeAlias = "dict[str, list[Block]]"


class BaselinesReady(TypedDict):
    """How the baselines' process got ready for the window (None: it did not say)."""

    prepare_s: float | None
    rounds: int | None  # rounds the warm service has served
    reused: bool | None  # whether the service reused the models of an earlier round


class Burst(TypedDict):
    """One round of bursts (tools/timing.py): each side's burst of `n` calls, timed by the
    controller's clock from request to reply (µs)."""

    round: int
    n: int
    candidate_us: float
    null_us: float  # the candidate's process around a stand-in
    base_null_us: float  # the baselines' process around a stand-in
    # The same on each burst's process's own CPU-time clock (the CPU with one thread).
    candidate_cpu_us: NotRequired[float]
    null_cpu_us: NotRequired[float]
    base_null_cpu_us: NotRequired[float]


class TimingWindow(TypedDict):
    """The side-by-side window: every block of every side, and the conditions it ran in."""

    blocks: SideBlocks
    # Every timed call; the controller takes them out before the window is handed back.
    calls: NotRequired[list[Call]]
    load_before: float  # cores other processes kept busy before the window
    load_during: float  # and during it
    trials: int
    warmup: int
    block: int
    baselines_wait_s: float
    pinned_cpu: int | None  # the core both processes were held to (CPU, one thread a side)
    trusted_retries: list[float]  # device ratios of the trusted blocks made again
    baselines_ready: BaselinesReady
    # After the window, for kernels its calls are too short to resolve (controller.BURST_*).
    bursts: NotRequired[list[Burst]]
    burst_calls: NotRequired[list[Call]]  # the burst calls kept to be checked; taken out like `calls`
    burst_detection: NotRequired["Detection"]


class WindowError(TypedDict):
    """Why the window could not be timed; the flags say whose fault it was."""

    error: str
    baselines_failed: NotRequired[bool]
    device_contention: NotRequired[bool]
    trusted_retries: NotRequired[list[float]]
    forged_times: NotRequired[bool]  # a reply's call times were not finite, non-negative numbers
    strays: NotRequired[int]  # processes the candidate started and left running


class ForwardTime(TypedDict):
    """Where the candidate's verified and timed calls spent their time (its process's claims)."""

    seconds: float
    ext_seconds: float  # inside the extension's functions
    ext_calls: int  # entries into the extension's functions
    ext_shares: list[float]  # per call (the first 64): its share of forward's time in the extension


class Claims(TypedDict, total=False):
    """What the candidate's process reports: its checks and what it saw, and once it finished,
    where forward's time went (ForwardTime's fields). Made where the candidate's code ran, so
    read as claims; empty where its process could not answer."""

    checks: list[Check]
    phases: dict[str, float]
    write_confinement: str  # how its writes were confined (Landlock), when they were
    process_filter: str  # how its process was filtered (seccomp)
    ext_functions: list[str]  # the extension's functions that were metered
    weights: str  # "reference weights" or "seeded init"
    precision: dict[str, Any]  # the precision flags at the end
    bandwidth: float | None  # bytes per second the device writes (profile only)
    seconds: float
    ext_seconds: float
    ext_calls: int
    ext_shares: list[float]


class Detection(TypedDict):
    """How many timed calls were checked, and how sure that check is."""

    checked: int
    timed: int
    one_in: int
    probability: float  # that a kernel wrong on one call in `one_in` is caught
    bursts: NotRequired["Detection"]  # the same for the calls of the bursts


class Work(TypedDict):
    """What the reference must at least do on one call (tools/roofline.py)."""

    flops: int  # torch.utils.flop_counter's count
    bytes: int  # every input, parameter, buffer and output once
    dtype: str  # the floating dtype holding most of those bytes


class Peaks(TypedDict):
    """What this machine was measured to do (tools/roofline.py)."""

    bandwidth: float  # bytes per second, a large copy's reads and writes
    matmul_flops_float32: float  # a large float32 matmul's FLOP/s


class BaselinesInfo(TypedDict):
    """What the baselines' process reports at the end of a round."""

    precision: dict[str, Any]
    recompiles_in_window: int
    rounds: int
    compile_error: NotRequired[str]  # torch.compile could not be used; eager stood in
    # Each compiled baseline that could not be made or warmed (it is then not timed).
    baseline_errors: NotRequired[dict[str, str]]
    work: NotRequired[Work]
    peaks: NotRequired[Peaks]  # measured in this process when the spec did not bring them


Stage = Literal["not_compiled", "import", "run", "time", "done"]


class EvaluateResult(TypedDict, total=False):
    """The evaluate job's result: how far it got (`stage`), the calls it made, what the
    candidate's process claims, and on a profile the timing window.

    It may also carry a WindowError's flags, or a broken channel's (`channel_error`,
    `timed_out`)."""

    phases: Required[dict[str, float]]
    stage: Stage
    verify_calls: list[Call]  # the verification calls, then the first one made again
    checked_calls: list[Call]  # the timed calls whose outputs the judge checks
    commits: dict[str, Commit]  # by call id
    claims: Claims
    cuda_kernels: list[str] | None  # the kernels the profiler saw (CUDA)
    cuda_kernels_error: str | None
    timing: TimingWindow
    detection: Detection
    baselines_info: BaselinesInfo
    exits: dict[str, str]  # how each of its processes ended
    service_broken: bool
    channel_error: str
    timed_out: bool
    error: str
    baselines_failed: bool
    device_contention: bool
    trusted_retries: list[float]
    forged_times: bool
    strays: int


# -- the judge job (tools/verify_kernels.py) -------------------------------------------------------


class JudgeResult(TypedDict):
    """Every output check of the revealed calls, decided in a process the candidate never ran in."""

    checks: list[Check]
    phases: NotRequired[dict[str, float]]
    precision: NotRequired[dict[str, Any]]
    reference_error: NotRequired[str]  # the reference itself failed on a call's inputs
