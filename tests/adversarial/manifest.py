"""Every adversarial and honest candidate, with the check that must reject it (or none).

One row per candidate directory under candidates/. Adding a candidate is one line here.
`kernels` names a kernel set under kernels/ that the candidate is built with (a CUDA-Agent
workdir: binding.cpp + binding_registry.h + kernels/); None means a KernelBench pair whose
model_new.py carries its own C++ through load_inline. `threat` is the threat number of docs/security.md.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Case:
    name: str
    expected: str | None  # the check that must fail; None for honest candidates
    threat: int | None
    finding: str | None = None  # for expected == "static": the static finding's name
    kernels: str | None = "cpu_honest"
    policy: str = "strict"
    action: str = "verify"
    # False tests a layer behind the Landlock write confinement on its own.
    confine_writes: bool = True
    # False tests a runtime layer behind the static checks on its own (a spelling the static
    # checks reject must still be caught by what runs).
    static_checks: bool = True
    # Words the failed check's detail must contain: which defence stopped it, where a crash
    # alone could have other causes.
    says: str | None = None


def static(name: str, finding: str, threat: int, kernels: str | None = "cpu_honest") -> Case:
    return Case(name, "static", threat, finding=finding, kernels=kernels)


ADVERSARIAL: list[Case] = [
    # Rejected by the static checker before anything runs.
    static("s_try_fallback", "try_fallback", 13),
    static("s_subclass_reference", "reference_use", 13),
    static("s_call_reference", "reference_use", 13),
    static("s_getattr_obfuscated", "dynamic_code", 16),
    static("s_exec_hidden_op", "dynamic_code", 16),
    static("s_alias_functional", "torch_ops_python", 14),
    static("s_python_thread", "threads", 1),
    static("s_side_stream", "streams", 1),
    static("s_env_evaluator_mode", "file_env_access", 5),
    static("s_patch_timer", "dynamic_code", 2),
    static("s_patch_checker", "dynamic_code", 2),
    static("s_disabled_timing_events", "dynamic_code", 2),
    static("s_swap_reference_module", "dynamic_code", 13),
    static("s_tf32_python", "precision_flags", 11),
    static("s_read_reference_file", "file_env_access", 13),
    static("s_cpp_aten_matmul", "torch_ops_cpp", 14, kernels=None),
    static("s_cpp_token_pasting", "token_pasting", 16, kernels=None),
    static("s_cpp_macro_alias", "token_pasting", 16, kernels=None),
    static("s_cpp_std_thread", "threads", 1, kernels=None),
    static("s_cpp_result_cache_file", "file_env_access", 4, kernels=None),
    static("s_cpp_dispatch_exclude", "dynamic_code", 16, kernels=None),
    static("s_cpp_cublas_axpy", "torch_ops_cpp", 14, kernels=None),
    static("s_cpp_stream_no_sync", "streams", 1, kernels=None),
    static("s_cpp_tf32_context", "precision_flags", 11, kernels=None),
    # The second line of defence behind the untrusted candidate process, two spellings or more
    # per class: imports outside the allowlist and numpy round trips, frame introspection,
    # patches through unresolvable bases, exec through a library's lookup, and in C++ the
    # interpreter, raw syscalls, renamed process calls, Tensor member pointers, dispatch keys.
    static("s_numpy_blas", "torch_ops_python", 14),
    static("s_numpy_round_trip", "torch_ops_python", 14),
    static("s_frame_getattr_concat", "dynamic_code", 22),
    static("s_frame_reduce_getattr", "dynamic_code", 22),
    static("s_frame_format_leak", "dynamic_code", 25),
    static("s_patch_through_list", "dynamic_code", 22),
    static("s_patch_through_dict", "dynamic_code", 22),
    static("s_patch_through_method", "dynamic_code", 22),
    static("s_exec_pydoc_locate", "dynamic_code", 22),
    static("s_exec_torch_reexport", "dynamic_code", 22),
    static("s_exec_type_hints", "dynamic_code", 22),
    static("s_cpp_cpython_frame", "dynamic_code", 22, kernels=None),
    static("s_cpp_pybind_alias_exec", "dynamic_code", 22, kernels=None),
    static("s_cpp_raw_syscall", "threads", 29, kernels=None),
    static("s_cpp_asm_label_fork", "threads", 29, kernels=None),
    static("s_cpp_tensor_member_pointer", "torch_ops_cpp", 27, kernels=None),
    static("s_cpp_dispatch_alias", "dynamic_code", 28, kernels=None),
    # Static-clean: caught by what actually runs.
    Case("r_return_input", "aliasing", 9, kernels="cpu_tricks", static_checks=False),
    Case("r_clobber_input", "inputs_unchanged", 8, kernels="cpu_tricks", static_checks=False),
    Case("r_zeros_inside_atol", "relative_error", 9, kernels="cpu_tricks", static_checks=False),
    # Approximations whose every output sits inside atol (threat 32): judged from the float64
    # reference, at most twice eager's own error or rtol, not by a relative allowance of 0.5.
    # One buffer handed back by every call: correct values, but the caller's earlier outputs change.
    Case("r_reused_output_buffer", "output_reused", 9, kernels=None, says="not a drop-in replacement"),
    Case(
        "r_softmax_fixed_normalizer",
        "relative_error",
        32,
        kernels="cpu_tricks",
        says="float64 reference",
        static_checks=False,
    ),
    Case(
        "r_subsampled_row_sum",
        "relative_error",
        32,
        kernels="cpu_tricks",
        says="float64 reference",
        static_checks=False,
    ),
    Case("r_constant_output", "nonconstant", 9, kernels="cpu_tricks", static_checks=False),
    Case("r_lazy_subclass_output", "output_type", 6),
    Case("r_uninitialized_output", "correctness", 10, kernels="cpu_tricks", static_checks=False),
    Case("r_shape_keyed_cache", "correctness", 4),
    Case("r_switch_after_checks", "timed_outputs", 5, action="profile"),
    Case("r_aten_via_adl", "torch_ops", 14, kernels="cpu_tricks", static_checks=False),
    Case("r_python_operator", "torch_ops", 14),
    Case("r_tf32_through_pybind", "precision_flags", 11, kernels="cpu_tricks", static_checks=False),
    Case("r_patch_clock_through_pybind", "harness_integrity", 2, kernels="cpu_tricks", static_checks=False),
    Case("r_forge_harness_timing", "harness_integrity", 2, kernels="cpu_tricks", action="profile", static_checks=False),
    Case("r_helper_thread", "threads", 1, kernels="cpu_tricks", static_checks=False),
    Case(
        "r_rewrite_input_files",
        "input_files",
        8,
        kernels="cpu_tricks",
        policy="hybrid",
        confine_writes=False,
        static_checks=False,
    ),
    Case("r_forge_baselines_cache", "crash", 2, kernels="cpu_tricks", action="profile", static_checks=False),
    Case("r_plant_bytecode", "crash", 2, kernels="cpu_tricks", static_checks=False),
    Case("r_ghost_kernel", "extension_kernel", 15, policy="hybrid"),
    Case("r_forged_result_line", "correctness", 3),
    Case("r_exit_early", "crash", 3),
    # The candidate's process is untrusted end to end (threats 22-29): each a layer behind
    # the static checks, so they run even where a static finding would stop them first.
    Case("r_skip_timed_calls", "timed_outputs", 25, kernels="cpu_tricks", action="profile", static_checks=False),
    Case("r_skip_after_known_calls", "timed_outputs", 25, kernels="cpu_tricks", action="profile", static_checks=False),
    Case("r_tiny_zeros_when_timed", "timed_outputs", 27, kernels="cpu_tricks", action="profile", static_checks=False),
    Case("r_aliasing_when_timed", "timed_outputs", 27, kernels="cpu_tricks", action="profile", static_checks=False),
    Case("r_torch_ops_when_timed", "torch_ops", 27, kernels="cpu_tricks", action="profile", static_checks=False),
    Case("r_import_thread", "threads", 23, kernels="cpu_import", static_checks=False),
    Case("r_import_precision", "precision_flags", 23, kernels="cpu_import", static_checks=False),
    # Work or reach outside the candidate's own process, and outputs completed after their call
    # (the process filter, the stray-process check, the content fingerprint).
    Case("r_fill_in_revealed_calls", "committed_outputs", 25, kernels="cpu_process_tricks", static_checks=False),
    Case(
        "r_work_in_a_child",
        "crash",
        29,
        kernels="cpu_process_tricks",
        static_checks=False,
        says="PermissionError: [Errno 1] Operation not permitted",
    ),
    Case(
        "r_cpp_clone_task",
        "crash",
        29,
        kernels="cpu_process_tricks",
        static_checks=False,
        says="clone(CLONE_VM): Operation not permitted",
    ),
    Case(
        "r_perf_sample_baselines",
        "crash",
        29,
        kernels="cpu_process_tricks",
        static_checks=False,
        says="perf_event_open on the other processes: Operation not permitted",
    ),
    # Renices, re-pins or reads the limits of another process (the baselines' would be next).
    Case(
        "r_reach_another_process_0",
        "crash",
        29,
        kernels="cpu_process_tricks",
        static_checks=False,
        says="setpriority on another process: Operation not permitted",
    ),
    Case(
        "r_reach_another_process_1",
        "crash",
        29,
        kernels="cpu_process_tricks",
        static_checks=False,
        says="sched_setaffinity on another process: Operation not permitted",
    ),
    Case(
        "r_reach_another_process_2",
        "crash",
        29,
        kernels="cpu_process_tricks",
        static_checks=False,
        says="prlimit on another process: Operation not permitted",
    ),
    # Forked while model_new.py is imported, before the process filter is in place: the worker
    # it leaves running fails the round once timing begins.
    Case("r_import_process", "processes", 23, kernels=None, action="profile", static_checks=False),
    # Claims NaN or negative call times (its reply hook): NaN compares false with every bound and a
    # claim below zero would make the speedup infinite; the controller refuses such a reply.
    Case(
        "r_nan_claims",
        "harness_integrity",
        22,
        kernels="cpu_process_tricks",
        action="profile",
        static_checks=False,
        says="not finite, non-negative",
    ),
    Case(
        "r_text_claims",
        "harness_integrity",
        22,
        kernels="cpu_process_tricks",
        action="profile",
        static_checks=False,
        says="not finite, non-negative",
    ),
    # Turns off the cache sweep before each call in its own process (the harness's caller object,
    # reached through the interpreter): its calls would start warm, the baselines' cold. Three
    # spellings: the threshold raised, the sweep emptied in place, the sweep dropped.
    Case(
        "r_skip_the_flush_0",
        "harness_integrity",
        22,
        kernels="cpu_tricks",
        static_checks=False,
        says="the harness's caller: flush_from was changed",
    ),
    Case(
        "r_skip_the_flush_1",
        "harness_integrity",
        22,
        kernels="cpu_tricks",
        action="profile",
        static_checks=False,
        says="the harness's caller: flush memory was changed",
    ),
    Case(
        "r_skip_the_flush_2",
        "harness_integrity",
        22,
        kernels="cpu_tricks",
        static_checks=False,
        says="the harness's caller: flush was changed",
    ),
    # The same switch, put back before each block of calls ends, so the caller looks intact
    # whenever it is looked at: the time its process spends around its timed calls gives it away.
    Case(
        "r_skip_the_flush_inside_blocks",
        "harness_integrity",
        22,
        kernels="cpu_tricks",
        action="profile",
        static_checks=False,
        says="harness work around each timed call",
    ),
]

# Timing tricks that stay correct, so no check fails: what matters is that they buy no speed.
# Each is profiled beside its honest twin (candidate, twin, threat).
TIMING_TRICKS: list[tuple[str, str, int, str]] = [  # + the trick's kernel set
    ("r_content_keyed_replay", "h_matmul", 4, "cpu_honest"),
    # The times its process reports are rewritten on their way out (json, unwatched): the
    # harness's own clock bounds them from below.
    ("r_forge_replies", "h_relu_destination", 22, "cpu_tricks"),
    # Rescaled cached outputs for rescaled inputs: timed inputs are perturbed element by element,
    # so the cache never hits and the work is paid for (threat 26).
    ("r_scaled_replay", "h_relu_destination", 26, "cpu_tricks"),
    # Stalls while the null blocks measure its process's overhead, then divides its claims: the
    # overhead believed is bounded by that of the baselines' process's null blocks (threat 22).
    ("r_slow_null_blocks_heavy", "h_tanh_chain", 22, "cpu_process_tricks"),
    # Hands back an expanded view of its result (threat 35): every output is made dense inside
    # the timed region, on the account of the side that returned it.
    ("r_expanded_view_output", "h_repeated_relu", 35, "cpu_tricks"),
    # Answers replayed by a key of a few input values that used to repeat between calls (threats
    # 30, 31): integer ids, which every call now draws anew within their range, and signs, which
    # every call now flips at random.
    ("r_replay_by_integer_ids", "h_embedding_linear_relu", 30, "cpu_tricks"),
    ("r_replay_by_signs", "h_fraction_positive", 31, "cpu_tricks"),
]

# Layout work handed to the judge where no honest kernel is as fast as torch's own copy: the
# trick must gain nothing over eager, which does the same work (it read 3.9x before).
LAYOUT_TRICKS: list[tuple[str, int, str]] = [("r_transposed_view_output", 35, "cpu_tricks")]

# The same trick on a kernel whose whole time is below what the outside clock resolves around
# the harness's own work per call (docs/security.md, Limits): its claims still stand, and its
# result must say that the null blocks were overruled and the speedup wants review.
BELOW_RESOLUTION: list[tuple[str, int, str]] = [("r_slow_null_blocks", 22, "cpu_process_tricks")]

# Leaves a busy process behind (threat 29): it must not outlive its evaluation.
ESCAPEES: list[str] = ["r_leave_a_process"]

HONEST: list[Case] = [
    Case("h_add_relu", None, None),
    Case("h_relu_destination", None, None),
    Case("h_scale_shift_tanh", None, None),
    Case("h_gelu", None, None),
    Case("h_row_sum_3d", None, None),
    Case("h_row_max", None, None),
    Case("h_softmax", None, None),
    Case("h_layernorm", None, None),
    Case("h_matmul", None, None),
    Case("h_tanh_chain", None, None),
    Case("h_linear_relu", None, None),
    Case("h_conv2d", None, None),
    Case("h_cumsum", None, None),
    Case("h_hybrid_linear_gelu", None, None, policy="hybrid"),
    Case("h_inline_scale_shift_tanh", None, None, kernels=None),
    Case("h_scaled_row_sum", None, None),
    Case("h_repeated_relu", None, None),
    Case("h_embedding_linear_relu", None, None),
    Case("h_fraction_positive", None, None),
]

# GPU-only tricks and honest CUDA kernels (candidates_gpu/), run on an H200 by tests/gpu.
GPU_ADVERSARIAL: list[Case] = [
    # The cuda_tricks kernel set reaches Python from C++, which the static checks refuse under
    # strict (dynamic_code): each trick runs with them off, to test the layer behind them.
    Case("g_helper_thread_launch", "threads", 1, kernels="cuda_tricks", static_checks=False),
    Case("g_reuse_freed_memory", "correctness", 7, kernels="cuda_tricks", static_checks=False),
    Case(
        "g_shrinking_events",
        "harness_integrity",
        2,
        kernels="cuda_tricks",
        action="profile",
        static_checks=False,
    ),
    Case(
        "g_skip_the_flush",
        "harness_integrity",
        22,
        kernels="cuda_tricks",
        action="profile",
        static_checks=False,
        says="the harness's caller: flush memory was changed",
    ),
    Case("g_aten_via_adl", "torch_ops", 14, kernels="cuda_tricks", static_checks=False),
    Case("g_ghost_kernel", "extension_kernel", 15, kernels="cuda_tricks", policy="hybrid", static_checks=False),
    Case(
        "g_forge_baselines_cache",
        "crash",
        2,
        kernels="cuda_tricks",
        action="profile",
        static_checks=False,
    ),
    Case("g_skip_timed_calls", "timed_outputs", 25, kernels="cuda_tricks", action="profile", static_checks=False),
    Case("g_torch_ops_when_timed", "torch_ops", 27, kernels="cuda_tricks", action="profile", static_checks=False),
    # Approximations whose every output sits inside atol (threat 32): judged from the float64 reference.
    Case(
        "g_softmax_fixed_normalizer",
        "relative_error",
        32,
        kernels="cuda_judged",
        says="float64 reference",
        static_checks=False,
    ),
    Case(
        "g_subsampled_row_sum",
        "relative_error",
        32,
        kernels="cuda_judged",
        says="float64 reference",
        static_checks=False,
    ),
    # Wrong on one timed call in five or six (threat 33): every timed call is checked.
    Case(
        "g_half_one_timed_call_in_five",
        "timed_outputs",
        33,
        kernels="cuda_tricks",
        action="profile",
        static_checks=False,
    ),
    Case(
        "g_stale_one_timed_call_in_six",
        "timed_outputs",
        33,
        kernels="cuda_tricks",
        action="profile",
        static_checks=False,
    ),
    # Its work skipped only when its calls come back to back, as in the bursts that time short
    # kernels from outside (threat 34): the bursts' calls are checked too.
    Case(
        "g_skip_back_to_back",
        "timed_outputs",
        34,
        kernels="cuda_tricks",
        action="profile",
        static_checks=False,
    ),
    # ATen compute with the op guard's dispatch key switched off from C++, beside a kernel of its
    # own (threat 36): the kernels the profiler saw give torch's own compute away.
    Case(
        "g_python_key_excluded",
        "torch_kernels",
        36,
        kernels="cuda_guard_tricks",
        static_checks=False,
        says="launch_clamp_scalar",
    ),
    Case(
        "g_python_key_unset",
        "torch_kernels",
        36,
        kernels="cuda_guard_tricks",
        static_checks=False,
        says="launch_clamp_scalar",
    ),
    # A reduction spelled as a copy (threat 37): an accumulating index_put, two spellings.
    Case(
        "g_row_sum_unsafe_index_put",
        "torch_ops",
        37,
        kernels="cuda_guard_tricks",
        static_checks=False,
        says="accumulate=True",
    ),
    Case(
        "g_row_sum_index_put_",
        "torch_ops",
        37,
        kernels="cuda_guard_tricks",
        static_checks=False,
        says="aten.index_put_",  # not among the ops strict allows at all
    ),
]

# The judge's threats on the GPU that stay correct where they are not caught: replays keyed on
# integer ids (30) or on signs (31), and an expanded view handed back for the judge to copy (35).
# Each is profiled beside its honest twin (kernel set cuda_judged): it must buy no speed.
GPU_JUDGED_TRICKS: list[tuple[str, str, int]] = [
    ("g_replay_by_integer_ids", "gh_embedding_linear_relu", 30),
    ("g_replay_by_signs", "gh_fraction_positive", 31),
    ("g_expanded_view_output", "gh_repeated_relu", 35),
]

# GPU timing tricks that stay correct, each profiled beside its honest twin (candidate, twin,
# threat): they must not buy speed.
GPU_TIMING_TRICKS: list[tuple[str, str, int]] = [
    ("g_side_stream", "gh_slow_relu", 1),
    ("g_fake_stream_join", "gh_slow_relu", 1),
    ("g_beside_lead_in", "gh_slow_relu", 1),
    ("g_unjoined_stream", "gh_slow_relu", 1),
    ("g_forge_replies", "gh_slow_relu", 22),
]

# GPU tricks that make the call itself faster than the baselines' calls can be, by what the
# candidate's process leaves in the device's caches past the harness's flush (candidate, twin,
# threat): the call's own events must read no faster than its twin's.
GPU_CACHE_TRICKS: list[tuple[str, str, int]] = [
    ("g_keep_inputs_in_l2", "gh_fast_row_sum", 22),
]

# GPU work that runs while the baselines are timed (threat 29 on the device): left queued past
# each reply, or a kernel that spins for as long as the candidate's process is stopped. Each is
# profiled beside its honest twin: it must be rejected (`device_contention`) or read no faster
# against eager than the twin.
GPU_BASELINE_TRICKS: list[tuple[str, str, int]] = [
    ("g_leave_work_behind", "gh_slow_relu", 29),
    ("g_busy_while_stopped", "gh_slow_relu", 29),
]

GPU_HONEST: list[Case] = [
    Case("gh_add_relu", None, None, kernels="cuda_honest"),
    Case("gh_row_sum", None, None, kernels="cuda_honest"),
    Case("gh_linear_cublas", None, None, kernels="cuda_honest"),
    # The honest twins of the tricks share the tricks' kernel set, whose other bindings the static
    # checks refuse: their own code is honest, and what they are for is the time beside a trick.
    Case("gh_slow_relu", None, None, kernels="cuda_tricks", static_checks=False),
    Case("gh_fast_row_sum", None, None, kernels="cuda_tricks", static_checks=False),
    Case("gh_inline_add_relu", None, None, kernels=None),
    Case("gh_conv_cudnn", None, None, kernels=None),
    Case("gh_embedding_linear_relu", None, None, kernels="cuda_judged"),
    Case("gh_fraction_positive", None, None, kernels="cuda_judged"),
    Case("gh_softmax", None, None, kernels="cuda_judged"),
    Case("gh_scaled_row_sum", None, None, kernels="cuda_judged"),
    Case("gh_repeated_relu", None, None, kernels="cuda_judged"),
]
