"""Training a transformer built on F.scaled_dot_product_attention, compiled vs eager.

Every parameter's gradient is compared with eager's, for causal and grouped-query attention,
static and dynamic (the batch and sequence length change between steps). With dropout, the run
matches eager step for step under DICP_FALLBACK_RANDOM, where random ops draw eager's numbers.
"""

import copy
import dataclasses

import pytest

from dicp import config as dicp_config

from ..common.utils import (
    MODEL_TOLERANCES,
    OnDevice,
    Size,
    assert_close,
    device_of,
    dynamo,
    parse_args,
    torch,
    update_dynamo_config,
)
from .helpers import compile_modes, compile_one, is_dicp_backend
from .models.gpt import GptConfig, build_gpt, make_batch

args = parse_args()
# (batch, sequence length) of each step
SHAPES = Size([(2, 12), (2, 12)], [(2, 12), (3, 7), (1, 9)])
CONFIGS = {"causal": GptConfig(), "gqa": GptConfig(num_kv_heads=2)}


def assert_grads_close(compiled_model, model, step):
    for (name, actual), expected in zip(compiled_model.named_parameters(), model.parameters()):
        try:
            assert_close(actual.grad, expected.grad, table=MODEL_TOLERANCES)
        except AssertionError as err:
            raise AssertionError(f"step {step}, gradient of {name}: {err}") from None


class TestTransformerTraining:
    @pytest.mark.parametrize("dynamic", compile_modes(args))
    @pytest.mark.parametrize("variant", CONFIGS)
    def test_gradients_match_eager(self, variant, dynamic):
        cfg = CONFIGS[variant]
        model = build_gpt(cfg).train()
        compiled_model = copy.deepcopy(model)
        loss_fn = compile_one(compiled_model, args, dynamic)
        dynamo.reset()
        update_dynamo_config(dynamic)
        for step, (batch, length) in enumerate(SHAPES.dynamic if dynamic else SHAPES.static):
            inputs = make_batch(batch, length, cfg.vocab_size, seed=step)
            model.zero_grad()
            compiled_model.zero_grad()
            expected = model(*inputs)
            expected.backward()
            actual = loss_fn(*inputs)
            actual.backward()
            assert_close(actual.detach(), expected.detach(), table=MODEL_TOLERANCES)
            assert_grads_close(compiled_model, model, step)

    @pytest.mark.parametrize("dynamic", compile_modes(args))
    def test_dropout_training_matches_eager_with_fallback_random(self, dynamic, monkeypatch):
        if not is_dicp_backend(args.backend):
            pytest.skip("DICP_FALLBACK_RANDOM is a dicp knob")
        monkeypatch.setenv("DICP_FALLBACK_RANDOM", "1")
        cfg = dataclasses.replace(GptConfig(), dropout=0.2)
        model = build_gpt(cfg).train()
        compiled_model = copy.deepcopy(model)
        loss_fn = compile_one(compiled_model, args, dynamic)
        dynamo.reset()
        update_dynamo_config(dynamic)
        optimizers = [torch.optim.SGD(m.parameters(), lr=0.1) for m in (model, compiled_model)]
        # eager on the backend's device: random numbers come from that device's generator
        device = device_of(args.backend)
        eager = model if device == "cpu" else OnDevice(model, model, device)
        for step, (batch, length) in enumerate(SHAPES.dynamic if dynamic else SHAPES.static):
            inputs = make_batch(batch, length, cfg.vocab_size, seed=step)
            losses = []
            for fn, optimizer in zip((eager, loss_fn), optimizers):
                torch.manual_seed(100 + step)  # the same random state for both runs
                optimizer.zero_grad()
                loss = fn(*inputs)
                loss.backward()
                optimizer.step()
                losses.append(loss.detach())
            assert dicp_config.fallback_random
            assert_close(losses[1], losses[0], table=MODEL_TOLERANCES)
            assert_grads_close(compiled_model, model, step)
