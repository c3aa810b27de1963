import pytest

from ..common.utils import (
    Size,
    assert_close,
    compile_model,
    dynamo,
    float64_run,
    get_device,
    parse_args,
    torch,
    update_dynamo_config,
)


class OpModule(torch.nn.Module):
    def forward(self, q, k, v, k_grouped, v_grouped, bool_mask, float_mask):
        sdpa = torch.nn.functional.scaled_dot_product_attention
        return (
            sdpa(q, k, v, dropout_p=0.0),
            sdpa(q, k, v, is_causal=True),
            sdpa(q, k, v, attn_mask=bool_mask),
            sdpa(q, k, v, attn_mask=float_mask, scale=0.3),
            # grouped-query attention: every kv head serves two query heads
            sdpa(q, k_grouped, v_grouped, is_causal=True, enable_gqa=True),
        )


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


def make_inputs(size, dtype):
    batch, heads, length, head_dim = size
    q = torch.randn(size, dtype=dtype)
    k, v = torch.randn(size, dtype=dtype), torch.randn(size, dtype=dtype)
    grouped = (batch, heads // 2, length, head_dim)
    k_grouped, v_grouped = torch.randn(grouped, dtype=dtype), torch.randn(grouped, dtype=dtype)
    # every query row keeps at least its own key, so no row is all -inf
    bool_mask = (torch.rand(length, length) > 0.4) | torch.eye(length, dtype=torch.bool)
    float_mask = torch.randn(batch, 1, length, length, dtype=dtype)
    return [q, k, v, k_grouped, v_grouped, bool_mask, float_mask]


def gradients(fn, inputs, weights):
    """Outputs of fn and the gradients of sum(output * weight) w.r.t. every float input."""
    leaves = [t.detach().clone().requires_grad_(t.is_floating_point()) for t in inputs]
    outputs = fn(*leaves)
    loss = sum((out.float() * w.to(out.device)).sum() for out, w in zip(outputs, weights))
    loss.backward()
    return [out.detach() for out in outputs], [t.grad for t in leaves if t.is_floating_point()]


class TestScaledDotProductAttention:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
    # (batch, heads, length, head dim): length 1, odd and even; heads stay even for GQA. A
    # dynamic size and its resized twin keep the same equalities between dims (the batch never
    # equals the GQA heads, heads//2): dynamo gives equal sizes one symbol, so breaking one is
    # a new graph, not a size its code must take
    @pytest.mark.parametrize(
        "sizes",
        [
            Size((2, 4, 7, 8), (3, 4, 9, 8), resized=(5, 4, 12, 8)),
            Size((1, 2, 1, 16), (1, 2, 5, 16), resized=(1, 2, 6, 16)),
            Size((1, 4, 8, 4), (3, 4, 6, 4), resized=(5, 4, 11, 4)),
        ],
    )
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_scaled_dot_product_attention(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        inputs = make_inputs(size, dtype)
        weights = [torch.randn(size) for _ in range(5)]

        output, grads = gradients(model, inputs, weights)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output, dicp_grads = gradients(
            compiled_model.model, [t.to(device) for t in inputs], weights
        )

        reference_output, reference_grads = float64_run(
            lambda *xs: gradients(model, xs, [w.double() for w in weights]), *inputs
        )
        for dicp_res, res, ref in zip(dicp_output, output, reference_output, strict=True):
            assert_close(dicp_res, res, reference=ref)
        for dicp_grad, grad, ref in zip(dicp_grads, grads, reference_grads, strict=True):
            assert_close(dicp_grad, grad, reference=ref)
