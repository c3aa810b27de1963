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
    def forward(self, grad, indices, num_weights):
        backward = torch.ops.aten.embedding_dense_backward.default
        res_default = backward(grad, indices, num_weights, -1, False)
        # row 0 is padding (no gradient); gradients scaled by 1 / index frequency
        res_padding_freq = backward(grad, indices, num_weights, 0, True)
        return res_default, res_padding_freq


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestEmbeddingDenseBackward:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
    # Size((weight size, indices size), ...)
    @pytest.mark.parametrize(
        "sizes", [Size(((10, 8), (2, 3)), ((16, 4), (3, 5))), Size(((6, 4), (1,)), ((9, 6), (7,)))]
    )
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_embedding_dense_backward(self, sizes, dtype, compiled_model):
        device = get_device()
        (num_weights, dim), indices_size = sizes.dynamic if compiled_model.dynamic else sizes.static
        # repeated indices accumulate; index 0 is the padding row
        indices = torch.randint(0, num_weights, indices_size)
        # grad is stored with the embedding dim first: non-contiguous
        grad = torch.randn(dim, *indices_size, dtype=dtype).movedim(0, -1)

        output = model(grad, indices, num_weights)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(grad.to(device), indices.to(device), num_weights)

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
