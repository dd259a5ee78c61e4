"""The module's contract (docs/security.md, threats 39-45): attacks that keep one output right
while breaking what a user of the module relies on, and the honest twins that must keep passing.

Each class has two spellings or more. `rejected_by` names the checks any one of which may stop
an attack (which one fires first can depend on the allocator or on the order of the calls);
a timing trick that stays correct must instead buy no speed over its twin.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ContractCase:
    name: str
    threat: int
    rejected_by: tuple[str, ...]
    kernels: str = "cpu_contract"
    action: str = "verify"
    static_checks: bool = True
    # Words the failed check's detail must contain, where one check alone names the defence.
    says: str | None = None


ATTACKS: list[ContractCase] = [
    # 39: tensors inside dicts, dataclasses and nested containers, replayed by their address.
    ContractCase("c_dict_address_cache", 39, ("correctness", "timed_outputs"), action="profile"),
    ContractCase("c_nested_address_cache", 39, ("correctness", "timed_outputs"), action="profile"),
    ContractCase("c_dataclass_address_cache", 39, ("correctness", "timed_outputs"), action="profile"),
    # 40: a mask's zeros assumed to stay where the first set had them.
    ContractCase("c_mask_lower_triangle", 40, ("correctness",)),
    # 41: precision below the module's float32, inside the paper's 1e-2.
    ContractCase("c_linear_bf16_weight", 41, ("relative_error",), says="float64 reference"),
    ContractCase("c_matmul_fp16_operands", 41, ("relative_error",), says="float64 reference"),
    ContractCase("c_softmax_quick_exp", 41, ("relative_error",), says="float64 reference"),
    # 42: module state left out or rewritten where it lies.
    ContractCase("c_batchnorm_frozen_stats", 42, ("module_state",), says="running_mean"),
    ContractCase("c_weight_transposed_in_place", 42, ("module_state", "changed_weights")),
    ContractCase("c_scale_folded_into_weight", 42, ("module_state", "changed_weights")),
    # 42: an input the reference writes in place, left as it was.
    ContractCase("c_input_left_as_it_was", 42, ("inputs_unchanged",), says="changes input [0] in place"),
    # 43: weight-derived data kept past a new state_dict or an optimizer's step.
    ContractCase("c_gram_cached_on_instance", 43, ("changed_weights",)),
    ContractCase("c_gram_cached_by_address", 43, ("changed_weights",)),
    # 44: library compute under its linker names (BLAS's Fortran entry point, ATen's CPU kernel
    # declared as a C function by its mangled name), which no source rule knows: the built
    # library's undefined symbols give it away.
    ContractCase("c_blas_fortran_name", 44, ("library_calls",), kernels="cpu_library_names", says="sgemm_"),
    ContractCase("c_aten_kernel_by_name", 44, ("library_calls",), kernels="cpu_library_names", says="at::cpu::mm"),
]

# Shortcuts keyed on structure a fixed set would repeat (40): replays by integer ids and
# offsets or by segment lengths, and the blocks a mask had zero on its first call skipped from
# then on. Every call draws them anew from a generator the reference accepts, so the replay never
# hits and no block stays dead: rejected, or no faster than the honest twin (trick, twin).
TIMING: list[tuple[str, str, int]] = [
    ("c_bag_replayed_by_ids", "ch_bag_sum", 40),
    ("c_segments_replayed_by_lengths", "ch_table_segments", 40),
    ("c_mask_blocks_kept", "ch_masked_blocks", 40),
]

HONEST: list[str] = [
    "ch_dict_matmul",
    "ch_dataclass_matmul",
    "ch_namedtuple_in_dict",
    "ch_bag_sum",
    "ch_table_segments",
    "ch_masked_row_sum",
    "ch_masked_blocks",
    "ch_linear_plain",
    "ch_softmax_exact",
    "ch_batchnorm_train",
    "ch_input_changed_in_place",
    "ch_gram_prepack_watched",
]

# The same classes on the GPU (tests/gpu/test_contract_gpu.py; candidates_gpu/, kernel sets
# cuda_contract and cuda_library_names).
GPU_ATTACKS: list[ContractCase] = [
    ContractCase(
        "g_dict_address_cache", 39, ("correctness", "timed_outputs"), kernels="cuda_contract", action="profile"
    ),
    ContractCase("g_mask_lower_triangle", 40, ("correctness",), kernels="cuda_contract"),
    ContractCase("g_matmul_fp16_operands", 41, ("relative_error",), kernels="cuda_contract", says="float64 reference"),
    ContractCase("g_batchnorm_frozen_stats", 42, ("module_state",), kernels="cuda_contract", says="running_mean"),
    ContractCase("g_gram_cached_by_address", 43, ("changed_weights",), kernels="cuda_contract"),
    ContractCase("g_cublas_geam_by_pointer", 44, ("library_calls",), kernels="cuda_library_names", says="cublasSgeam"),
]

GPU_HONEST: list[str] = [
    "gh_dict_matmul",
    "gh_masked_row_sum",
    "gh_matmul_plain",
    "gh_batchnorm_train",
    "gh_gram_prepack_watched",
]
