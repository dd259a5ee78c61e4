"""Locked: the messages that cross between the harness and its jobs, as typed dicts.

A job's request arrives as one JSON object (the spec file the worker reads: tools/worker.py) and
its result travels back as one; each message here describes such a dict for the type checker.
The harness builds every request in cuda_agent_cli/harness/jobs.py, and `JOBS` names every job
the worker runs, for both sides. The jobs import this module by name (`import wire`); the
harness reads it through cuda_agent_cli/harness/wire.py, which imports it as
`cuda_agent_cli.assets.tools.wire`. Standard library only: the harness's process imports no
torch.

A message is only as trustworthy as the process that made it: the requests and the
controller's window and the inputs and judge jobs' results are the harness's own, while the
claims come from the candidate's process, where its code ran (docs/security.md says what they
may decide).
"""

from typing import Any, Literal, NamedTuple, NotRequired, Required, TypeAlias, TypedDict, final

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


class WeightChange(TypedDict, total=False):
    """A change the harness makes to a model's weights before a call (tools/module_state.py):
    the state of input set `load` copied in place, or an optimizer-like `step` from a seed."""

    load: int
    step: int


class Call(TypedDict):
    """One call the controller asks for: which of the models (built from input set `model`),
    which input set and the seed its fresh inputs are drawn from. Verification calls have ids
    from 0, timed ones from the controller's TIMED_BASE."""

    id: int
    model: int
    set: int
    seed: int
    weights: NotRequired[WeightChange]  # made before the call: the weights changed under it


class JudgedCall(Call):
    """A call the judge rebuilds and checks: a verification call, the first one made again
    (determinism), one after the harness changed the weights, or a timed call chosen after the
    calls returned."""

    role: Literal["verify", "again", "weights", "timed"]


class StateEvidence(TypedDict):
    """The model's parameters and buffers after a verification call (tools/module_state.py):
    every one's fingerprint by name, and the names the call changed (handed over as tensors)."""

    after: dict[str, Fingerprint]
    changed: list[str]


class CallEvidence(TypedDict):
    """What a call left, taken in the candidate's process right after it returned (raw facts
    for the judge: tools/evidence.py `call_evidence`)."""

    inputs_after: Fingerprint
    input_ranges: list[ByteRange]
    output_ranges: list[ByteRange]
    state: NotRequired[StateEvidence]  # verification calls only


class Commit(TypedDict):
    """What the candidate's process committed to for one call before any output was chosen."""

    fingerprint: Fingerprint
    evidence: CallEvidence


# What the candidate's process committed to for each call as the controller keeps them (its
# output's fingerprint, the call's evidence), by call id.
Commits: TypeAlias = "dict[int, tuple[Fingerprint, CallEvidence]]"


class DrawRule(TypedDict, total=False):
    """How every call draws one input leaf anew (tools/draws.py, which says what each kind does)."""

    kind: Required[Literal["float", "complex", "bool", "bool_perm", "int", "int_sorted", "int_sum", "int_perm", "keep"]]
    signs: bool  # float: random signs too
    # float: the set's special values (zeros, infinities) and the share of each, placed anew
    special: list[list[float]]
    p: float  # bool: the share of True
    lo: int  # int, int_sorted, int_sum: the range the reference's set takes
    hi: int


class SetFingerprints(TypedDict):
    """One input set as the inputs job wrote it: its inputs, and its init arguments and weights."""

    inputs: Fingerprint
    model: Fingerprint


# -- the worker (tools/worker.py): its jobs and the lines that carry them --------------------------


class Job(NamedTuple):
    """Where a job's code is: the module the forked child imports (lazily, so a broken one cannot
    take the zygote down) and the function it calls with the request."""

    module: str
    function: str


# Every job the worker answers, by the name the harness submits (cuda_agent_cli/harness/pool.py
# refuses any other): the code a forked child runs, or None for those the zygote answers itself,
# forking nothing.
JOBS: dict[str, Job | None] = {
    "compile": Job("compile_kernels", "run_compile_job"),
    "pch": Job("compile_kernels", "run_pch_job"),
    "probe": Job("worker_common", "run_probe_job"),
    "inputs": Job("verify_kernels", "run_inputs_job"),
    "evaluate": Job("controller", "run_evaluate_job"),
    "judge": Job("verify_kernels", "run_judge_job"),
    "inline_build": Job("inline_build", "run_inline_build_job"),
    "service": None,  # start a baselines service, or have it prewarm (ServiceRequest)
    "warm": None,  # the zygote's own warm-up of the dispatch modes' imports, now
    "warm-compiler": None,  # that and torch.compile's imports
}


class ServiceRequest(TypedDict):
    """Which baselines service a `service` job starts, or an evaluation borrows: the worker keeps
    one per key (everything the baselines' process is made from), logging to `log`. With
    `prewarm`, the service builds and warms the baselines from the reference's own inputs at
    once."""

    key: str
    log: str
    prewarm: NotRequired["BaselinesSpec"]


class WorkerRequest(TypedDict):
    """One line the harness writes to the worker's stdin."""

    id: int
    job: str  # a name in JOBS
    spec: str  # the path of the JSON request
    log: str  # where the child's stdout and stderr go
    timeout: float
    nice: int  # lowers the child's CPU priority (work beside a build)
    service: NotRequired[ServiceRequest]


class WorkerAnswer(TypedDict):
    """One line the worker writes back when a job has ended (in the order jobs end)."""

    id: int
    status: Literal["ok", "crash", "timeout"]
    returncode: int | None
    signal: int | None
    result: Any  # the job's result (one of the results below), None unless status is "ok"


class ProbeRequest(TypedDict, total=False):
    """The probe job: what this worker's torch sees, and the GPU where `device` is cuda."""

    device: str


class ProbeResult(TypedDict):
    """What the worker's torch is and sees (versions, the GPU, its threads)."""

    torch: str
    cuda: str | None
    cuda_available: bool
    gpu: str | None
    capability: list[int] | None
    python: str
    cpu_threads: int
    pid: int


# -- the build (tools/compile_kernels.py; tools/inline_build.py for a single-file candidate) -------


class CompileRequest(TypedDict):
    """The compile job: the workspace's sources, built with ninja into `build_dir`."""

    device: str
    build_dir: str
    binding_dir: str  # binding.cpp and binding_registry.h, the pristine copies
    kernels_dir: NotRequired[str]
    objects_dir: NotRequired[str]  # objects kept by content, shared by builds
    pch_dir: NotRequired[str]  # where a precompiled torch/extension.h is looked for
    arch_list: NotRequired[str | None]  # CUDA architectures (else TORCH_CUDA_ARCH_LIST, or the device's)
    jobs: NotRequired[int]  # ninja's parallel jobs (else MAX_JOBS, or the cores)


class PchRequest(TypedDict):
    """The pch job: torch/extension.h precompiled for `device`'s flags into `pch_dir`."""

    device: str
    pch_dir: str


class PchResult(TypedDict):
    ok: bool
    seconds: float
    built: NotRequired[bool]  # False: it was there already, or another job is building it
    errors: NotRequired[str]


class InlineBuildRequest(TypedDict):
    """The inline_build job: a single-file candidate's import alone, confined as the candidate's
    process is, building its load_inline extension into `extensions_dir`."""

    device: str
    candidate: str  # a snapshot of model_new.py
    extensions_dir: str
    out_dir: str
    writable: list[str]
    confine_writes: bool


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


class InputsRequest(TypedDict):
    """The inputs job: the pristine reference writes the sets `indices` (all of `seeds` where it
    says none) into `out_dir`; sets from `models` on carry inputs only."""

    reference: str
    device: str
    seeds: list[int]
    models: NotRequired[int]
    indices: NotRequired[list[int]]
    out_dir: str


class InputsResult(TypedDict):
    """The sets one inputs job wrote (several jobs may share an evaluation's sets)."""

    n: int
    indices: list[int]
    inputs: str  # the first set's inputs, described: shapes and dtypes
    input_bytes: int
    fingerprints: list[SetFingerprints]  # in the order of `indices`
    # Made from set 0 by the job that wrote it: how every call draws each input leaf anew.
    plan: NotRequired[list[DrawRule] | None]
    # The paths of leaves the plan keeps as they are (structure no rule could draw anew).
    kept: NotRequired[list[str]]


class JobError(TypedDict):
    """A job that could not do its work for a reason of the reference's (not a crash)."""

    error: str


# -- the evaluate job (tools/controller.py; tools/candidate.py, tools/baselines.py) -------------


class BaselinesSpec(TypedDict):
    """What a baselines' process is made from (tools/baselines.py, Baselines): a service's
    prewarm, its first round, or an evaluation's own."""

    device: str
    reference: str  # the pristine model.py
    threads: NotRequired[int | None]  # torch's threads (one a side on a small CPU)
    flush_bytes: NotRequired[int]  # the L2 flush (tools/timing.py, FLUSH_BYTES where it says none)
    baselines: NotRequired[list[str]]  # the compiled sides to time besides eager (["compile"])
    peaks: NotRequired["Peaks | None"]  # this machine's, measured by an earlier round
    precision: NotRequired[str]  # tools/precision.py's mode: "tf32" lets every side use TF32


class BaselinesRound(BaselinesSpec):
    """One round of the baselines: the sets the inputs job wrote, the seeds of their models, the
    sets the timed calls draw from, and how each call draws its inputs anew. What the controller
    sends a lent service to open a round (tools/peers.py, LentService.open_round)."""

    inputs_dir: str
    seeds: list[int]
    timed_sets: list[int]
    plan: NotRequired[list[DrawRule] | None]


class TimingPlan(TypedDict):
    """How a profile's window is timed (tools/controller.py, tools/bursts.py)."""

    trials: int  # timed calls a side
    warmup: int  # warm-up calls a side
    block: int  # calls a side per round
    bursts: int  # rounds of bursts after the window, where its calls are too short (0: none)
    burst_bytes: int  # the inputs and outputs one burst may hold
    burst_check_bytes: int  # the outputs of all bursts kept to be checked


class LentService(TypedDict):
    """The baselines service the worker lent an evaluation: its pid and the two ends of its
    channel, which only that evaluation's process inherited."""

    pid: int
    fds: list[int]


class EvaluateRequest(BaselinesRound):
    """The evaluate job: the controller, the candidate's process and (on a profile) the
    baselines' process of one round. Also what the candidate's process is started with
    (tools/candidate.py)."""

    policy: str
    candidate: str  # a snapshot of model_new.py: exactly the text the static checks read
    out_dir: str  # where revealed outputs are handed over
    n: int  # verification calls, one a set
    extensions_dir: str  # where load_inline builds and loads
    writable: list[str]  # folders the candidate's process may write besides out_dir
    confine_writes: bool
    checks: int  # timed calls checked at least
    one_in: int  # a kernel wrong on one timed call in `one_in`...
    detect: float  # ...is caught with this probability
    call_timeout: float  # seconds for one request to an executor
    go_file: NotRequired[str]  # where the harness says the build is done (BuildDone)
    go_timeout: NotRequired[float]
    timing: NotRequired[TimingPlan]  # a profile's window; none on a verify
    baselines_service: NotRequired[LentService]  # set by the worker when it lends its service
    module_dir: NotRequired[str | None]  # set by the controller from the go file


class BuildDone(TypedDict):
    """The harness's word that the build is done (the go file), and where the extension is."""

    compiled: bool
    module_dir: NotRequired[str | None]


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


@final  # so that `"error" in` tells it from a WindowError
class WindowBursts(TypedDict, total=False):
    """What the bursts add to the window (tools/bursts.py): nothing where the kernel needs none."""

    bursts: list[Burst]
    burst_calls: list[Call]
    burst_detection: "Detection"


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


class JudgeRequest(TypedDict):
    """The judge job: every revealed call rebuilt from its set and seed, its outputs computed by
    the pristine reference and compared with the candidate's handed-over ones on the device."""

    reference: str
    device: str
    inputs_dir: str
    cand_dir: str  # the candidate's revealed outputs
    n: int
    seeds: list[int]
    atol: float
    rtol: float
    calls: list[JudgedCall]
    commits: dict[str, Commit]  # by call id
    fingerprints: list[SetFingerprints]  # what the inputs jobs wrote, kept by the harness
    plan: list[DrawRule] | None
    precision: str  # tools/precision.py's mode: the error each output may have


class JudgeResult(TypedDict):
    """Every output check of the revealed calls, decided in a process the candidate never ran in."""

    checks: list[Check]
    phases: NotRequired[dict[str, float]]
    precision: NotRequired[dict[str, Any]]
    verified_precision: NotRequired[str]  # what the outputs were held to ("float32", "tf32", ...)
    reference_error: NotRequired[str]  # the reference itself failed on a call's inputs
