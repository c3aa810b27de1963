"""The `_foreach_*` ops (optimizer steps, clip_grad_norm_), decomposed per list element
(dicp/bridge/pipeline/decompositions_foreach.py): each overload kind (List, Scalar, ScalarList,
Tensor, ScalarAndTensor), in place and functional, over lists of tensors of different sizes."""

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
    def forward(self, a, b, c):
        positive = torch._foreach_add(torch._foreach_abs(c), 0.5)
        updated, zeroed = [x.clone() for x in a], [x.clone() for x in a]
        torch._foreach_addcdiv_(updated, b, torch._foreach_sqrt(positive), value=-0.1)
        torch._foreach_zero_(zeroed)
        results = (
            torch._foreach_add(a, b, alpha=-0.5),
            torch._foreach_mul(a, 1.5),
            torch._foreach_addcmul(a, b, c, [0.5, -2.0, 3.0]),
            torch._foreach_lerp(a, b, 0.3),
            torch._foreach_maximum(a, b),
            torch._foreach_div(b, torch.tensor(4.0)),
            torch._foreach_pow(2.0, c),
            torch._foreach_norm(a),
            zeroed,
            updated,
        )
        return [x for result in results for x in result]


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestForeach:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
    # each list holds sizes 1, odd and even
    @pytest.mark.parametrize("sizes", [Size(((1,), (5,), (4, 6)), ((1,), (7,), (6, 8)))])
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_foreach(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        a, b, c = ([torch.randn(s).to(dtype).requires_grad_() for s in size] for _ in range(3))

        output = model(a, b, c)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(
            [x.to(device) for x in a], [x.to(device) for x in b], [x.to(device) for x in c]
        )

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
        assert_grads_close(output, dicp_output, (*a, *b, *c))
