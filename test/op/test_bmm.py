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
        return torch.ops.aten.bmm.default(a, b)


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestBmm:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
    # Size((B, M, K, N), ...)
    @pytest.mark.parametrize(
        "sizes", [Size((2, 4, 8, 5), (3, 6, 3, 7)), Size((1, 1, 6, 3), (1, 1, 5, 9))]
    )
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_bmm(self, sizes, dtype, compiled_model):
        device = get_device()
        batch, m, k, n = sizes.dynamic if compiled_model.dynamic else sizes.static
        a = torch.randn(batch, m, k, dtype=dtype)
        # b is stored transposed (attention's q @ k^T)
        b = torch.randn(batch, n, k, dtype=dtype).transpose(1, 2)

        output = model(a, b)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(a.to(device), b.to(device))

        assert_close(dicp_output, output)
