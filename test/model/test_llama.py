"""LLaMA decoder inference: greedy generation with a functional KV cache, compiled vs eager.

Covers float32 (static and dynamic) and bfloat16 (static). The prefill step and the decode
step are both compiled (two graphs of the same forward). Dynamic runs generate at a second
(batch, prompt length) after the first compile and must reuse it.
"""

import pytest

from ..common.utils import Size, dynamo, parse_args, torch, update_dynamo_config
from .helpers import (
    HALF_DTYPES,
    assert_reused,
    assert_same_generation,
    compile_one,
    dicp_builds,
    float64_twin,
    graphs_compiled,
    mode_dtype_params,
)
from .models.llama import LlamaConfig, build_llama, greedy_generate

args = parse_args()
NEW_TOKENS = 16
# (batch, prompt length) per generation run. Dynamo's duck sizing gives equal input sizes one
# symbol, so the dynamic batches avoid the cache's other sizes (2 layers, 2 KV heads): a batch of
# 2 would be tied to them and specialized.
SHAPES = Size([(2, 8)], [(3, 8), (4, 5)])
DTYPES = (torch.float32, torch.bfloat16)
DYNAMIC_DTYPES = (torch.float32,)


def make_prompt(batch, prompt_len, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(LlamaConfig().vocab_size, (batch, prompt_len), generator=g)


def teacher_forced_logits(model, prompt, tokens):
    """The logits each greedy step chose from, recomputed in float64 from the same weights
    over the prompt plus eager's tokens in one pass: (steps, batch, vocab)."""
    sequence = torch.cat([prompt, tokens[:, :-1]], dim=1)
    with torch.no_grad():
        logits, _, _ = float64_twin(model)(sequence, torch.arange(sequence.shape[1]))
    return logits[:, prompt.shape[1] - 1 :].transpose(0, 1)


class TestLlama:
    @pytest.mark.parametrize("dynamic,dtype", mode_dtype_params(args, DTYPES, DYNAMIC_DTYPES))
    def test_greedy_generation(self, dtype, dynamic):
        model = build_llama(dtype=dtype)
        compiled = compile_one(model, args, dynamic)
        dynamo.reset()
        update_dynamo_config(dynamic)
        shapes = SHAPES.dynamic if dynamic else SHAPES.static
        for i, (batch, prompt_len) in enumerate(shapes):
            prompt = make_prompt(batch, prompt_len, seed=i)
            with torch.no_grad():
                expected = greedy_generate(model, model, prompt, NEW_TOKENS)
                actual = greedy_generate(compiled, model, prompt, NEW_TOKENS)
            reference = (
                teacher_forced_logits(model, prompt, expected[0]) if dtype in HALF_DTYPES else None
            )
            assert_same_generation(*actual, *expected, reference)
            if i == 0:
                graphs, builds = graphs_compiled(), dicp_builds(args.backend)
            else:
                assert_reused(args.backend, graphs, builds)
