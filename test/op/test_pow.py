import pytest

from ..common.utils import (
    Size,
    assert_close,
    assert_grads_close,
    compile_model,
    dynamo,
    get_device,
    parse_args,
    torch,
    update_dynamo_config,
)


class OpModule(torch.nn.Module):
    def forward(self, a, b):
        res_tensor = torch.ops.aten.pow.Tensor_Tensor(a, b)
        res_broadcast = torch.ops.aten.pow.Tensor_Tensor(a, b[0])
        res_square = torch.ops.aten.pow.Tensor_Scalar(a, 2)
        res_sqrt = torch.ops.aten.pow.Tensor_Scalar(a, 0.5)
        res_scalar_base = torch.ops.aten.pow.Scalar(2, b)
        return res_tensor, res_broadcast, res_square, res_sqrt, res_scalar_base


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestPow:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
    @pytest.mark.parametrize("sizes", [Size((5,), (7,)), Size((3, 1, 4), (5, 1, 2))])
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_pow(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        # bases in [0.5, 3.5) and exponents in [0, 4): defined for floats and integers
        # transpose(0, -1) makes b non-contiguous when both end dims are > 1; b[0] broadcasts
        b = (torch.rand(size) * 4).to(dtype).transpose(0, -1)
        a = (torch.rand(b.shape) * 3 + 0.5).to(dtype)

        output = model(a, b)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(a.to(device), b.to(device))

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)


class PowByNumber(torch.nn.Module):
    def __init__(self, exponent):
        super().__init__()
        self.exponent = exponent

    def forward(self, a):
        return torch.pow(a, self.exponent)


# Eager special-cases these exponents (x * x, sqrt, 1 / sqrt, ...): other rounding than pow's
# and other values at -0 and -inf. Products and quotients are correctly rounded in both, so
# their bits must be eager's; sqrt and pow must be within a rounding (eager's float sqrt is
# MKL's, one ulp off in places), with eager's zeros (signs too), infinities and NaNs.
EDGES = [
    -0.0,
    0.0,
    float("inf"),
    -float("inf"),
    float("nan"),
    1e-20,
    3.0000002,
    7.1234567,
    -2.5,
    1.5e19,
]
EXACT = (2, 3, -2, -1, 2.0)


def _same_specials(got, want):
    """Zeros (with their signs), infinities and NaNs where eager has them."""
    special = ~torch.isfinite(want) | (want == 0)
    return (
        got.dtype == want.dtype
        and torch.equal(got.isnan(), want.isnan())
        and torch.equal(got[special].nan_to_num(), want[special].nan_to_num())
        and torch.equal(
            torch.signbit(got[special & ~want.isnan()]),
            torch.signbit(want[special & ~want.isnan()]),
        )
    )


@pytest.mark.parametrize("exponent", [2, 3, -2, 0.5, -0.5, -1, 2.0, 1.5])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
@pytest.mark.parametrize("length", [1, 7, 10])
def test_pow_by_number_is_eagers(exponent, dtype, length):
    model = PowByNumber(exponent)
    a = (torch.tensor(EDGES) if length == 10 else torch.randn(length) * 3).to(dtype)
    for compiled in compile_model(model, args.backend, args.dynamic):
        dynamo.reset()
        update_dynamo_config(compiled.dynamic)
        got, want = compiled.model(a.to(get_device())).cpu(), model(a)
        assert _same_specials(got, want), (got, want)
        finite = torch.isfinite(want) & (want != 0)
        if exponent in EXACT:
            assert torch.equal(got[finite], want[finite]), (got, want)
        else:
            assert_close(got[finite], want[finite])


@pytest.mark.parametrize("exponent", [2, 3, -2, 0.5, -0.5, -1])
@pytest.mark.parametrize("length", [1, 7, 10])
def test_pow_by_number_gradient(exponent, length):
    model = PowByNumber(exponent)
    a = torch.rand(length) * 3 + 0.25
    for compiled in compile_model(model, args.backend, args.dynamic):
        dynamo.reset()
        update_dynamo_config(compiled.dynamic)
        x = a.clone().requires_grad_()
        output, dicp_output = model(x), compiled.model(x)
        assert_close(dicp_output, output)
        assert_grads_close([output], [dicp_output], [x])
