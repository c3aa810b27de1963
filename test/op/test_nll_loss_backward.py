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
    def forward(self, grad, grad_none, log_probs, target, weight, total_weight):
        backward = torch.ops.aten.nll_loss_backward.default
        # reductions: 0 none, 1 mean, 2 sum
        res_mean = backward(grad, log_probs, target, weight, 1, -100, total_weight)
        res_sum = backward(grad, log_probs, target, None, 2, -100, total_weight)
        res_none = backward(grad_none, log_probs, target, weight, 0, -100, total_weight)
        return res_mean, res_sum, res_none


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestNllLossBackward:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
    # Size((N, C), ...), and a single (C,) sample with a 0-d target
    @pytest.mark.parametrize(
        "sizes", [Size((8, 5), (6, 7)), Size((1, 4), (1, 9)), Size((5,), (7,))]
    )
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_nll_loss_backward(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        classes = size[-1]
        # log-probabilities stored transposed (non-contiguous when N > 1)
        log_probs = torch.randn(size[::-1]).log_softmax(0).t().to(dtype)
        target = torch.randint(0, classes, size[:-1])
        # about a fifth of the targets are ignored (ignore_index=-100)
        target = torch.where(torch.rand(target.shape) < 0.2, -100, target)
        weight = (torch.rand(classes) + 0.5).to(dtype)
        _, total_weight = torch.ops.aten.nll_loss_forward.default(
            log_probs, target, weight, 1, -100
        )
        grad = torch.randn((), dtype=dtype)
        grad_none = torch.randn(target.shape, dtype=dtype)
        inputs = (grad, grad_none, log_probs, target, weight, total_weight)

        output = model(*inputs)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(*(t.to(device) for t in inputs))

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
