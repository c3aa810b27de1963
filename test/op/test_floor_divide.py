import pytest

from ..common.utils import (
    Size,
    assert_close,
    compile_model,
    dynamo,
    get_device,
    parse_args,
    torch,
    update_dynamo_config,
)


class OpModule(torch.nn.Module):
    def forward(self, a, b):
        res_tensor = torch.ops.aten.floor_divide.default(a, b)
        res_mode = torch.ops.aten.div.Tensor_mode(a, b, rounding_mode="floor")
        res_scalar = torch.ops.aten.floor_divide.default(a, 0.1)
        return res_tensor, res_mode, res_scalar


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)

# Python's // is the floor of the exact quotient: 1 // 0.1 is 9 although 1 / 0.1 rounds to 10;
# an infinite dividend gives nan; a zero divisor gives a / b. Found by the fuzzer.
SPECIAL = [
    (1.0, 0.1),
    (-1.0, 0.1),
    (1.0, -0.1),
    (0.3, 0.1),
    (float("inf"), 1.0),
    (-float("inf"), 3.0),
    (float("nan"), 2.0),
    (5.0, float("inf")),
    (-5.0, float("inf")),
    (2.5, 0.0),
    (-0.0, 4.0),
    (0.0, -4.0),
]


class TestFloorDivide:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
    @pytest.mark.parametrize(
        "sizes", [Size((1,), (5,)), Size((3, 7), (6, 5)), Size((4, 1, 6), (5, 1, 4))]
    )
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_floor_divide(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        a, b = torch.randn(size) * 10, torch.randn(size).sign() * (torch.rand(size) + 0.05)
        flat_a, flat_b = a.view(-1), b.view(-1)
        for i, (x, y) in enumerate(SPECIAL[: flat_a.numel()]):
            flat_a[i], flat_b[i] = x, y
        # transpose(0, -1) makes the operands non-contiguous when both end dims are > 1
        a, b = a.to(dtype).transpose(0, -1), b.to(dtype).transpose(0, -1)

        output = model(a, b)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(a.to(device), b.to(device))

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
