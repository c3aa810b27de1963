"""Whole training steps compiled as users compile them: forward, backward and the optimizer's
update in one `torch.compile`d function (or the update alone, PyTorch's compiled-optimizer
recipe), over the patterns a training loop is made of. Each runs 3 steps against the same
loop in eager and compares every loss, parameter and buffer.

`pytest --cold-warm` runs each pattern twice in a fresh process (test/common/cold_warm.py):
the warm run, served by the caches, must compute bit for bit what the cold run did. The
optimizer's graph holds the parameters and its state as attributes, which AOTAutograd lifts
to inputs: a warm AOT-cache hit once called it without them and crashed.
"""

import copy
from dataclasses import dataclass, field

import pytest

from ..common.utils import (
    MODEL_TOLERANCES,
    assert_close,
    dynamo,
    parse_args,
    torch,
    update_dynamo_config,
)
from .helpers import compile_modes
from .models import seeded

args = parse_args()
STEPS = 3
BATCHES = {False: (8, 8, 8), True: (8, 5, 11)}  # batch size per step: static, dynamic


class Net(torch.nn.Module):
    """Linear layers, a layer norm, a batch norm (buffers updated in place) and GELU."""

    def __init__(self, width=12):
        super().__init__()
        self.inner = torch.nn.Sequential(
            torch.nn.Linear(10, width),
            torch.nn.LayerNorm(width),
            torch.nn.GELU(),
            # no bias before the batch norm: its gradient is 0 but for rounding, which Adam's
            # update divides by its own size, to a step of +-lr either way
            torch.nn.Linear(width, width, bias=False),
            torch.nn.BatchNorm1d(width),
            torch.nn.ReLU(),
            torch.nn.Linear(width, 3),
        )

    def forward(self, x):
        return self.inner(x)


class ConvNet(torch.nn.Module):
    """Convolutions, batch norms, a max pool and an average pool over 8x8 images: new_backendgraph
    runs them channels-last and returns the activations it saves for the backward so (the
    backward is compiled for those layouts; cold against warm, the caches must keep both)."""

    def __init__(self, width=8):
        super().__init__()

        def block(cin, cout):
            conv = torch.nn.Conv2d(cin, cout, 3, padding=1, bias=False)
            return [conv, torch.nn.BatchNorm2d(cout), torch.nn.ReLU()]

        self.inner = torch.nn.Sequential(
            *block(3, width),
            torch.nn.MaxPool2d(2),
            *block(width, 2 * width),
            torch.nn.AdaptiveAvgPool2d(1),
            torch.nn.Flatten(),
            torch.nn.Linear(2 * width, 3),
        )

    def forward(self, x):
        return self.inner(x)


@dataclass(frozen=True)
class Pattern:
    optimizer: str = "SGD"
    options: dict = field(default_factory=dict)
    zero_grad_inside: bool = True
    clip: bool = False
    scheduler: bool = False
    models: int = 1
    compile_optimizer_only: bool = False
    env: dict = field(default_factory=dict)
    conv: bool = False  # ConvNet on images rather than Net on vectors


PATTERNS = {
    "sgd": Pattern(),
    "sgd_momentum": Pattern(options={"momentum": 0.9, "nesterov": True}),
    "adam": Pattern("Adam", {"foreach": False}),
    "adam_foreach": Pattern("Adam", {"foreach": True}),
    "adamw": Pattern("AdamW", {"foreach": False, "weight_decay": 0.1}),
    "adamw_foreach": Pattern("AdamW", {"foreach": True, "weight_decay": 0.1}),
    "zero_grad_outside": Pattern("Adam", zero_grad_inside=False),
    "grad_clipping": Pattern(options={"momentum": 0.5}, clip=True),
    "lr_scheduler": Pattern("AdamW", scheduler=True),
    "two_models": Pattern("Adam", models=2),
    "optimizer_step_only": Pattern("AdamW", compile_optimizer_only=True),
    # The graph cache alone serves a warm start (the AOT cache is for static graphs)
    "graph_cache_only": Pattern("Adam", env={"DICP_AOT_CACHE": "0"}),
    "conv_sgd_momentum": Pattern(options={"momentum": 0.9}, conv=True),
    "conv_graph_cache_only": Pattern(
        options={"momentum": 0.9}, conv=True, env={"DICP_AOT_CACHE": "0"}
    ),
}


def build(pattern, index):
    with seeded(index):
        model = (ConvNet(8 + 4 * index) if pattern.conv else Net(12 + 4 * index)).train()
    # A tensor learning rate: a scheduler changes its value, not a constant dynamo guards on
    lr = torch.tensor(0.01) if pattern.scheduler else 0.01
    optimizer = getattr(torch.optim, pattern.optimizer)(
        model.parameters(), lr=lr, **pattern.options
    )
    scheduler = (
        torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
        if pattern.scheduler
        else None
    )
    return model, optimizer, scheduler


def step_function(pattern, model, optimizer):
    def step(x, y):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        if pattern.clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        optimizer.step()
        if pattern.zero_grad_inside:
            optimizer.zero_grad()
        return loss.detach()

    return step


def compiled_step(pattern, model, optimizer, dynamic):
    if not pattern.compile_optimizer_only:
        return torch.compile(
            step_function(pattern, model, optimizer), backend=args.backend, dynamic=dynamic
        )
    update = torch.compile(optimizer.step, backend=args.backend, dynamic=dynamic)

    def step(x, y):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        update()
        optimizer.zero_grad()
        return loss.detach()

    return step


def batches(dynamic, conv=False):
    g = torch.Generator().manual_seed(0)
    sample = (3, 8, 8) if conv else (10,)
    return [
        (torch.randn(n, *sample, generator=g), torch.randint(0, 3, (n,), generator=g))
        for n in BATCHES[dynamic]
    ]


def train(pattern, runs, data):
    """`runs`: (model, optimizer, scheduler, step) per model. The losses of every step."""
    losses = []
    for x, y in data:
        for _model, optimizer, scheduler, step in runs:
            if not pattern.zero_grad_inside:
                optimizer.zero_grad()
            losses.append(step(x, y))
            if scheduler is not None:
                scheduler.step()
    return torch.stack(losses)


def eager_and_compiled(pattern, dynamic):
    eager, compiled = [], []
    for index in range(pattern.models):
        model, optimizer, scheduler = build(pattern, index)
        eager.append((model, optimizer, scheduler, step_function(pattern, model, optimizer)))
        model, optimizer, scheduler = build(pattern, index)
        compiled.append(
            (model, optimizer, scheduler, compiled_step(pattern, model, optimizer, dynamic))
        )
    return eager, compiled


@pytest.mark.parametrize("dynamic", compile_modes(args))
@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_training_steps_match_eager(name, dynamic, monkeypatch):
    pattern = PATTERNS[name]
    for knob, value in pattern.env.items():
        monkeypatch.setenv(knob, value)
    dynamo.reset()
    update_dynamo_config(dynamic)
    eager, compiled = eager_and_compiled(pattern, dynamic)
    expected = train(pattern, eager, batches(dynamic, pattern.conv))
    actual = train(pattern, compiled, batches(dynamic, pattern.conv))
    assert_close(actual, expected, table=MODEL_TOLERANCES)
    for (want, *_), (got, *_) in zip(eager, compiled):
        for (name_, value), expected_value in zip(
            got.state_dict().items(), want.state_dict().values()
        ):
            try:
                assert_close(value, expected_value, table=MODEL_TOLERANCES)
            except AssertionError as error:
                raise AssertionError(f"{name_} after {STEPS} steps: {error}") from None


@pytest.mark.parametrize("dynamic", compile_modes(args))
def test_inference_mode(dynamic):
    """Evaluation under torch.inference_mode(): inference graphs, no backward."""
    dynamo.reset()
    update_dynamo_config(dynamic)
    with seeded(0):
        model = Net().eval()
    compiled = torch.compile(copy.deepcopy(model), backend=args.backend, dynamic=dynamic)
    with torch.inference_mode():
        for x, _ in batches(dynamic):
            assert_close(compiled(x), model(x), table=MODEL_TOLERANCES)
