import operator

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
    def forward(self, a):
        chunks = torch.ops.aten.split.Tensor(a, 2, -1)
        var_mean = torch.ops.aten.var_mean.correction(a, [0], correction=1)
        first = operator.getitem(chunks, 0)
        last = operator.getitem(chunks, -1)
        mean = operator.getitem(var_mean, 1)
        return first, last, mean


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestGetitem:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
    # split into chunks of 2 fixes the chunk count, so the resized case keeps the split dim
    @pytest.mark.parametrize(
        "sizes", [Size((5,), (7,)), Size((3, 1, 4), (5, 1, 2), resized=(5, 1, 3))]
    )
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_getitem(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        # transpose(0, -1) makes the input non-contiguous when both end dims are > 1
        input1 = torch.randn(size, dtype=dtype).transpose(0, -1)

        output = model(input1)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(input1.to(device))

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
