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
    def forward(self, weight, indices, indices_int32):
        res_int64 = torch.ops.aten.embedding.default(weight, indices)
        res_int32 = torch.ops.aten.embedding.default(weight, indices_int32, 0)
        return res_int64, res_int32


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestEmbedding:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
    # Size((weight size, indices size), ...)
    @pytest.mark.parametrize(
        "sizes", [Size(((10, 8), (2, 3)), ((16, 4), (3, 5))), Size(((6, 4), (1,)), ((9, 6), (7,)))]
    )
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_embedding(self, sizes, dtype, compiled_model):
        device = get_device()
        weight_size, indices_size = sizes.dynamic if compiled_model.dynamic else sizes.static
        # a transposed table, as when embeddings are tied to an output projection
        weight = torch.randn(weight_size[::-1], dtype=dtype).t()
        # repeated indices, and index 0 (padding_idx) which still reads its row
        indices = torch.randint(0, weight_size[0], indices_size)
        indices_int32 = torch.randint(0, weight_size[0], indices_size, dtype=torch.int32)

        output = model(weight, indices, indices_int32)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(
            weight.to(device), indices.to(device), indices_int32.to(device)
        )

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
