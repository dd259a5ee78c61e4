"""The --inputs language: what users type, what comes out, and the errors they see."""

import pytest
import torch

from cuda_agent_cli.errors import InputSpecError
from cuda_agent_cli.task.inputs import (
    Arg,
    CallSpec,
    ListSpec,
    TensorSpec,
    call_from_json,
    call_to_json,
    parse_inputs_spec,
    value_to_python,
)


def test_full_spec_with_named_positional_scalars_and_init():
    spec = parse_inputs_spec(
        "float16[8,4096] cuda, mask=bool[8], idx=int64[8] 0..1000, eps=1e-5; init: 4096, bias=False"
    )
    assert spec.args[0] == Arg(None, TensorSpec("float16", (8, 4096), "cuda"))
    assert spec.args[1] == Arg("mask", TensorSpec("bool", (8,)))
    assert spec.args[2] == Arg("idx", TensorSpec("int64", (8,), None, 0.0, 1000.0))
    assert spec.args[3] == Arg("eps", 1e-5)
    assert spec.init == (Arg(None, 4096), Arg("bias", False))
    assert spec.device() == "cuda"


def test_dtype_aliases_and_scalar_tensor():
    spec = parse_inputs_spec("x=half[2,3], y=bf16[], z=long[4] cuda:1")
    assert [a.value.dtype for a in spec.args] == ["float16", "bfloat16", "int64"]
    assert spec.args[1].value.shape == ()
    assert spec.device() == "cuda"


def test_describe_round_trips_through_the_parser():
    text = "x=float16[8,4096] cuda, y=int64[8] 0..1000, eps=1e-05; init: 4096, eps=1e-06"
    spec = parse_inputs_spec(text)
    assert spec.describe() == text
    assert parse_inputs_spec(spec.describe()) == spec


def test_json_round_trip_keeps_lists_and_tuples():
    spec = CallSpec(
        (Arg(None, ListSpec((TensorSpec("float32", (2,)), TensorSpec("float32", (3,))), "list")), Arg("k", (1, 2))),
        (Arg(None, 3),),
        "capture",
    )
    assert call_from_json(call_to_json(spec)) == spec


@pytest.mark.parametrize(
    "text, words",
    [
        ("x=float17[8]", "unknown dtype `float17`"),
        ("x=float32[8,a]", "dimension `a`"),
        ("x=float32[8] gpu", "`gpu`"),
        ("x=float32[8], float32[4]", "comes after a named one"),
        ("x=float32[8], x=float32[8]", "names `x` twice"),
        ("x=int64[8] 0.5..2", "integer range"),
        ("x=float32[8] 3..1", "LO < HI"),
        ("", "empty"),
        ("x=float32[8],,y=float32[2]", "empty entry"),
        ("init: 4", "no forward arguments"),
        ("x=foo(", "cannot read"),
    ],
)
def test_bad_specs_say_what_is_wrong(text, words):
    with pytest.raises(InputSpecError) as info:
        parse_inputs_spec(text)
    assert words in info.value.one_line()
    assert info.value.exit_code == 2


def test_generated_python_makes_the_described_tensors():
    spec = parse_inputs_spec("a=float16[2,3], b=int32[5] 3..4, c=bool[4], d=float32[6] -1..1, e=7")
    made = [eval(value_to_python(a.value), {"torch": torch}) for a in spec.args]
    assert made[0].dtype == torch.float16 and made[0].shape == (2, 3)
    assert made[1].dtype == torch.int32 and bool((made[1] == 3).all())
    assert made[2].dtype == torch.bool and made[2].shape == (4,)
    assert float(made[3].min()) >= -1 and float(made[3].max()) <= 1
    assert made[4] == 7


def test_signature_lines_show_shapes_dtypes_and_constructor_arguments():
    call = parse_inputs_spec("float16[8,4096] cuda, int64[8] 0..1000, eps=1e-5; init: 4096, eps=1e-6")
    assert call.signature_lines(("x", "ids")) == [
        "forward(x: float16[8,4096] cuda, ids: int64[8] 0..1000, eps=1e-05)",
        "__init__(4096, eps=1e-06)",
    ]
    assert parse_inputs_spec("x=float32[2]").signature_lines() == ["forward(x=float32[2])", "__init__()"]
