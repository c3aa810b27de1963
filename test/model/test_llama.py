"""LLaMA decoder inference: greedy generation with a functional KV cache, compiled vs eager.

Covers float32 (static and dynamic) and bfloat16 (static). The prefill step and the decode
step are both compiled (two graphs of the same forward). Dynamic runs generate at a second
(batch, prompt length) after the first compile and must reuse it.
"""
import pytest

from ..common.utils import Size, dynamo, parse_args, torch, update_dynamo_config
from .helpers import (known_failure, assert_reused, assert_same_generation, compile_one, dicp_builds,
                      graphs_compiled, mode_dtype_params)
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


class TestLlama:
    @pytest.mark.parametrize("dynamic,dtype", mode_dtype_params(args, DTYPES, DYNAMIC_DTYPES))
    def test_greedy_generation(self, dtype, dynamic, request):
        known_failure(request, args, dtype == torch.bfloat16,
                      "bf16 logits differ from eager by 0.097 > 0.08 (fused kernels keep "
                      "float intermediates, eager rounds each op); tolerance vs accuracy "
                      "not yet analysed, issue 4")
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
            assert_same_generation(*actual, *expected)
            if i == 0:
                graphs, builds = graphs_compiled(), dicp_builds(args.backend)
            else:
                assert_reused(args.backend, graphs, builds)
