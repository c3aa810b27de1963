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
    def forward(self, log_probs, target, weight):
        nll_loss = torch.ops.aten.nll_loss_forward.default
        # reductions: 0 none, 1 mean, 2 sum; each returns (loss, total_weight)
        res_mean = nll_loss(log_probs, target, weight, 1, -100)
        res_sum = nll_loss(log_probs, target, None, 2, -100)
        res_none = nll_loss(log_probs, target, weight, 0, -100)
        # total_weight is unspecified without a reduction
        return (*res_mean, *res_sum, res_none[0])


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestNllLossForward:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
    # Size((N, C), ...), and a single (C,) sample with a 0-d target
    @pytest.mark.parametrize(
        "sizes", [Size((8, 5), (6, 7)), Size((1, 4), (1, 9)), Size((5,), (7,))]
    )
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_nll_loss_forward(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        classes = size[-1]
        # log-probabilities stored transposed (non-contiguous when N > 1)
        log_probs = torch.randn(size[::-1]).log_softmax(0).t().to(dtype)
        target = torch.randint(0, classes, size[:-1])
        # about a fifth of the targets are ignored (ignore_index=-100)
        target = torch.where(torch.rand(target.shape) < 0.2, -100, target)
        weight = (torch.rand(classes) + 0.5).to(dtype)

        output = model(log_probs, target, weight)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(
            log_probs.to(device), target.to(device), weight.to(device)
        )

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
