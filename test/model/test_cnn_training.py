"""A small CNN with a ResNet stem pool (MaxPool2d(3, 2, 1)) and nearest upsampling, trained
compiled vs eager at input sizes 7, 8, 15 and 16: every parameter's gradient must match.

The pool's and the upsample's backward store through computed indices (issue 18); at these
sizes overlapping windows make several outputs send gradient to one input element.
"""

import copy

import pytest

from ..common.utils import (
    MODEL_TOLERANCES,
    assert_close,
    dynamo,
    parse_args,
    torch,
    update_dynamo_config,
)
from .helpers import compile_modes, compile_one
from .models import seeded

args = parse_args()
IMAGE_SIZES = (7, 8, 15, 16)


class StemNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, padding=1),
            torch.nn.BatchNorm2d(8),
            torch.nn.ReLU(),
            torch.nn.MaxPool2d(3, 2, 1),
        )
        self.body = torch.nn.Conv2d(8, 8, 3, padding=1)
        self.head = torch.nn.Conv2d(8, 4, 1)

    def forward(self, x):
        y = self.body(self.stem(x))
        y = torch.nn.functional.interpolate(y, scale_factor=2, mode="nearest")
        return self.head(y).pow(2).mean()


def build(seed=0):
    with seeded(seed):
        return StemNet().train()


class TestCnnTraining:
    @pytest.mark.parametrize("dynamic", compile_modes(args))
    def test_pool_and_upsample_gradients(self, dynamic):
        model = build()
        compiled_model = copy.deepcopy(model)
        loss_fn = compile_one(compiled_model, args, dynamic)
        dynamo.reset()
        update_dynamo_config(dynamic)
        for step, size in enumerate(IMAGE_SIZES):
            images = torch.randn(2, 3, size, size, generator=torch.Generator().manual_seed(step))
            model.zero_grad()
            compiled_model.zero_grad()
            model(images).backward()
            loss_fn(images).backward()
            for (name, actual), expected in zip(
                compiled_model.named_parameters(), model.parameters()
            ):
                try:
                    assert_close(actual.grad, expected.grad, table=MODEL_TOLERANCES)
                except AssertionError as err:
                    raise AssertionError(f"size {size}, gradient of {name}: {err}") from None
