"""BERT encoder inference with a padding attention mask, compiled vs eager.

Covers float32 and bfloat16, static and dynamic (the model is small enough for both); the
sequence output and the pooled output are compared. Dynamic runs change batch size and sequence
length after the first compile.
"""

import pytest

from ..common.utils import (
    MODEL_TOLERANCES,
    Size,
    assert_close,
    dynamo,
    parse_args,
    torch,
    update_dynamo_config,
)
from .helpers import assert_reused, compile_one, dicp_builds, graphs_compiled, mode_dtype_params
from .models.bert import build_bert, make_bert_inputs

args = parse_args()
# (batch, sequence length) per run.
SHAPES = Size([(2, 16)], [(2, 16), (3, 11)])
DTYPES = (torch.float32, torch.bfloat16)
DYNAMIC_DTYPES = (torch.float32, torch.bfloat16)


class TestBert:
    @pytest.mark.parametrize("dynamic,dtype", mode_dtype_params(args, DTYPES, DYNAMIC_DTYPES))
    def test_padded_encoder(self, dtype, dynamic):
        model = build_bert(dtype=dtype)
        compiled = compile_one(model, args, dynamic)
        dynamo.reset()
        update_dynamo_config(dynamic)
        shapes = SHAPES.dynamic if dynamic else SHAPES.static
        for i, (batch, seq_len) in enumerate(shapes):
            inputs = make_bert_inputs(batch, seq_len, seed=i)
            assert not inputs[1].all(), "the inputs must contain padding"
            with torch.no_grad():
                expected = model(*inputs)
                actual = compiled(*inputs)
            for name, a, e in zip(("sequence", "pooled"), actual, expected):
                try:
                    assert_close(a, e, table=MODEL_TOLERANCES)
                except AssertionError as err:
                    raise AssertionError(f"{name} output: {err}") from None
            if i == 0:
                graphs, builds = graphs_compiled(), dicp_builds(args.backend)
            else:
                assert_reused(args.backend, graphs, builds)
