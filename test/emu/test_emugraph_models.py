"""Models compiled by emugraph on emu, with the device's memory isolation on (a host read of
device memory crashes): a LLaMA-style block (RMSNorm, causal attention by
`scaled_dot_product_attention` or by an explicit masked softmax, SiLU-gated MLP), a small CNN
whose batch norm trains (its running statistics are buffers the compiled graph updates), and
Hugging Face's LlamaForCausalLM from a tiny random config. Each is compared with the same
weights in eager mode on the CPU: the outputs, every parameter's gradient, and the weights and
buffers after an SGD step. Every result the compiled model returns must be on emu.

The training step is what a user writes: the model compiled (forward and backward are compiled
graphs), the loss, `backward()` and the optimizer's step in eager mode on the device.
"""

import copy
import dataclasses
import math
from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import dicp.emu

from .conftest import compiled

pytestmark = pytest.mark.usefixtures("fresh_dynamo")
# float32 through a few layers and their backward, summed in another order than eager's
TOLERANCE = dict(atol=1e-4, rtol=1e-4)
DIM, HEADS = 32, 4


@pytest.fixture(autouse=True, scope="module")
def isolated():
    """The comparisons hold with device memory closed to the host (DICP_EMU_ISOLATION=1, the
    default): a kernel or fallback reading it from the host would crash the test."""
    assert dicp.emu._C.isolation()


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1 + 0.1 * torch.randn(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class CausalAttention(nn.Module):
    def __init__(self, dim, heads, explicit_softmax):
        super().__init__()
        self.heads, self.explicit_softmax = heads, explicit_softmax
        self.q, self.k, self.v, self.o = (nn.Linear(dim, dim, bias=False) for _ in range(4))

    def forward(self, x):
        batch, length, dim = x.shape
        q, k, v = (
            w(x).view(batch, length, self.heads, -1).transpose(1, 2)
            for w in (self.q, self.k, self.v)
        )
        mixed = (
            self.masked_softmax(q, k, v)
            if self.explicit_softmax
            else F.scaled_dot_product_attention(q, k, v, is_causal=True)
        )
        return self.o(mixed.transpose(1, 2).reshape(batch, length, dim))

    @staticmethod
    def masked_softmax(q, k, v):
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        length = q.shape[-2]
        later = torch.ones(length, length, dtype=torch.bool, device=q.device).triu(1)
        return scores.masked_fill(later, float("-inf")).softmax(-1) @ v


class LlamaBlock(nn.Module):
    def __init__(self, explicit_softmax, dim=DIM, heads=HEADS, hidden=64):
        super().__init__()
        self.attention_norm, self.mlp_norm = RMSNorm(dim), RMSNorm(dim)
        self.attention = CausalAttention(dim, heads, explicit_softmax)
        self.gate, self.up = nn.Linear(dim, hidden, bias=False), nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        h = x + self.attention(self.attention_norm(x))
        n = self.mlp_norm(h)
        return h + self.down(F.silu(self.gate(n)) * self.up(n))


def small_cnn():
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(8 * 4 * 4, 10),
    )


@dataclasses.dataclass
class Case:
    model: Callable[[], nn.Module]
    input: Callable[[int], torch.Tensor]  # a batch of `n`


CASES = {
    # the sequence grows with the batch: a dynamic graph also varies the causal mask's size
    "llama_block_sdpa": Case(
        lambda: LlamaBlock(explicit_softmax=False), lambda n: torch.randn(n, n + 3, DIM)
    ),
    "llama_block_softmax": Case(
        lambda: LlamaBlock(explicit_softmax=True), lambda n: torch.randn(n, n + 3, DIM)
    ),
    "cnn": Case(small_cnn, lambda n: torch.randn(n, 3, 8, 8)),
}
DYNAMIC = pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])


def batches(dynamic):
    """A static graph sees one batch size; a dynamic one serves two sizes from one build."""
    return [2, 3] if dynamic else [2]


def host_and_device(make_model):
    """The model, seeded, on the CPU, and a copy of the same weights on emu."""
    torch.manual_seed(0)
    host = make_model()
    return host, copy.deepcopy(host).to("emu")


def assert_on_emu_and_close(got, want):
    got, want = list(got), list(want)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.device.type == "emu", g.device
        torch.testing.assert_close(g.cpu(), w, **TOLERANCE)


def assert_same_state(device, host):
    """Every parameter and buffer (batch norm's running statistics and its step count)."""
    got, want = dict(device.named_buffers()), dict(host.named_buffers())
    got.update(device.named_parameters())
    want.update(host.named_parameters())
    assert got.keys() == want.keys()
    assert_on_emu_and_close(got.values(), want.values())


def assert_same_gradients(device, host):
    got, want = dict(device.named_parameters()), dict(host.named_parameters())
    assert all(p.grad is not None for p in [*got.values(), *want.values()])
    assert_on_emu_and_close([p.grad for p in got.values()], [want[n].grad for n in got])


@DYNAMIC
@pytest.mark.parametrize("name", CASES)
def test_inference_matches_cpu_eager(name, dynamic):
    case = CASES[name]
    host, device = host_and_device(case.model)
    for m in (host, device):
        m.eval()
    model = compiled(device, dynamic)
    with torch.no_grad():
        for n in batches(dynamic):
            x = case.input(n)
            assert_on_emu_and_close([model(x.to("emu"))], [host(x)])


@DYNAMIC
@pytest.mark.parametrize("name", CASES)
def test_a_training_step_matches_cpu_eager(name, dynamic):
    """Outputs, gradients, then weights and buffers after SGD's step: the forward graph
    updates batch norm's running statistics on the device, the backward graph makes the
    gradients, the eager optimizer reads them there."""
    case = CASES[name]
    host, device = host_and_device(case.model)
    model = compiled(device, dynamic)
    optimizers = [torch.optim.SGD(m.parameters(), lr=0.1) for m in (host, device)]
    for n in batches(dynamic):
        x = case.input(n)
        want = host(x)
        target = torch.randn_like(want)
        got = model(x.to("emu"))
        F.mse_loss(want, target).backward()
        F.mse_loss(got, target.to("emu")).backward()
        assert_on_emu_and_close([got], [want.detach()])
        assert_same_gradients(device, host)
        for optimizer in optimizers:
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        assert_same_state(device, host)


def tiny_llama():
    """Hugging Face's LlamaForCausalLM from a tiny random config (nothing downloaded): two
    layers, grouped-query attention (4 heads over 2 key-value heads), rotary embeddings."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        hidden_size=DIM,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=HEADS,
        num_key_value_heads=2,
        vocab_size=64,
        max_position_embeddings=64,
    )
    return LlamaForCausalLM(config)


@DYNAMIC
def test_hugging_face_llama_logits_and_gradients_match_cpu_eager(dynamic):
    pytest.importorskip("transformers")
    host, device = host_and_device(tiny_llama)
    model = compiled(device, dynamic)
    for n in batches(dynamic):
        tokens = torch.randint(0, 64, (n, n + 5))
        with torch.no_grad():
            assert_on_emu_and_close([model(tokens.to("emu")).logits], [host(tokens).logits])
        got = model(tokens.to("emu"), labels=tokens.to("emu"))
        want = host(tokens, labels=tokens)
        assert_on_emu_and_close([got.logits, got.loss], [want.logits.detach(), want.loss.detach()])
        got.loss.backward()
        want.loss.backward()
        assert_same_gradients(device, host)
        for m in (host, device):
            m.zero_grad(set_to_none=True)


def peak_of_steps(model, x):
    """The allocator's peak over a training step (loss, backward, SGD with momentum) above the
    memory at rest, after two steps of warm-up (gradients and momentum allocated)."""
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def step():
        model(x).square().mean().backward()
        optimizer.step()
        optimizer.zero_grad()

    for _ in range(2):
        step()
    torch.emu.synchronize()
    rest = torch.emu.memory_allocated()
    torch.emu.reset_peak_memory_stats()
    step()
    torch.emu.synchronize()
    return torch.emu.max_memory_allocated() - rest


@pytest.mark.parametrize("name", ["llama_block_sdpa", "cnn"])
def test_a_compiled_training_steps_peak_memory_is_at_most_eagers(name):
    """Issue 46: the compiled graphs hold no more device memory than eager's autograd (which
    frees each saved tensor once its node ran), though their launches return before the
    kernels ran. Allocator statistics of one process, not a timing."""
    case = CASES[name]
    _, eager = host_and_device(case.model)
    x = case.input(16).to("emu")
    eager_peak = peak_of_steps(eager, x)
    compiled_peak = peak_of_steps(compiled(copy.deepcopy(eager)), x)
    assert compiled_peak <= eager_peak, (compiled_peak, eager_peak)
