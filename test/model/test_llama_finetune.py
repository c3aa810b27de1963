"""LoRA fine-tuning of the LLaMA decoder: 3 AdamW steps, compiled model vs eager.

float32 only (training comparisons through an optimizer need the tight float32 bound). Only the
adapters on the attention projections are trainable. The loss module (model + cross entropy) is
compiled; the optimizer step runs eagerly. Dynamic runs change (batch, seq) at every step.
"""

import copy

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
from .helpers import (
    assert_reused,
    assert_state_close,
    compile_modes,
    compile_one,
    dicp_builds,
    graphs_compiled,
)
from .models.llama import CausalLMLoss, LlamaConfig, add_lora, build_llama

args = parse_args()
# (batch, seq) of each AdamW step.
SHAPES = Size([(2, 8)] * 3, [(2, 8), (3, 6), (2, 5)])


def make_batches(shapes, seed=0):
    g = torch.Generator().manual_seed(seed)
    vocab = LlamaConfig().vocab_size
    batches = []
    for batch, seq in shapes:
        tokens = torch.randint(vocab, (batch, seq + 1), generator=g)
        batches.append((tokens[:, :-1], tokens[:, 1:]))
    return batches


def train(loss_fn, model, batches, after_first_step=lambda: None):
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=5e-3, weight_decay=0.01)
    losses = []
    for input_ids, labels in batches:
        optimizer.zero_grad()
        loss = loss_fn(input_ids, labels)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
        if len(losses) == 1:
            after_first_step()
    return torch.stack(losses)


class TestLlamaFinetune:
    @pytest.mark.parametrize("dynamic", compile_modes(args))
    def test_lora_adamw(self, dynamic):
        model = add_lora(build_llama().train())
        compiled_model = copy.deepcopy(model)
        compiled = compile_one(CausalLMLoss(compiled_model), args, dynamic)
        batches = make_batches(SHAPES.dynamic if dynamic else SHAPES.static)
        assert sum(p.requires_grad for p in model.parameters()) == 4 * 2 * model.cfg.num_layers

        expected = train(CausalLMLoss(model), model, batches)
        dynamo.reset()
        update_dynamo_config(dynamic)
        seen = {}
        record = lambda: seen.update(graphs=graphs_compiled(), builds=dicp_builds(args.backend))
        actual = train(compiled, compiled_model, batches, after_first_step=record)

        assert_close(actual, expected, table=MODEL_TOLERANCES)
        assert_state_close(compiled_model, model)
        # Steps 2 and 3 reuse the graphs (forward and backward) compiled at step 1.
        assert_reused(args.backend, seen["graphs"], seen["builds"])
