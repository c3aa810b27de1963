import pytest

from ..common.utils import (
    Size,
    compile_model,
    dynamo,
    get_device,
    parse_args,
    torch,
    update_dynamo_config,
)


class OpModule(torch.nn.Module):
    def forward(self, probs):
        res_default = torch.ops.aten.bernoulli.default(probs)
        res_p = torch.ops.aten.bernoulli.p(probs, 0.25)
        return res_default, res_p


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestBernoulli:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
    # large enough for the statistical bound to be tight
    @pytest.mark.parametrize("sizes", [Size((32, 64), (48, 40)), Size((1, 700), (1, 900))])
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_bernoulli(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        # probabilities 0 and 1 give certain outcomes; transpose(0, -1): non-contiguous
        probs = torch.rand(size).to(dtype)
        probs[..., 0], probs[..., 1] = 0, 1
        probs = probs.transpose(0, -1)

        output = model(probs)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(probs.to(device))

        # random: compare properties, never values
        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert (dicp_res.shape, dicp_res.dtype) == (res.shape, res.dtype)
            assert ((dicp_res == 0) | (dicp_res == 1)).all()
        draws, draws_p = (t.cpu().double() for t in dicp_output)
        assert (draws[probs == 0] == 0).all() and (draws[probs == 1] == 1).all()
        # the number of ones is within 5 standard deviations of its expectation
        probs = probs.double()
        assert abs(draws.sum() - probs.sum()) <= 5 * (probs * (1 - probs)).sum().sqrt()
        assert abs(draws_p.mean() - 0.25) <= 5 * (0.25 * 0.75 / draws_p.numel()) ** 0.5
