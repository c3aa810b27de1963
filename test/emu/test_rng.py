"""Random numbers on the device: a generator per device, reproducible from its seed."""

import pytest
import torch

DRAWS = {
    "randn": lambda d: torch.randn(64, device=d),
    "rand": lambda d: torch.rand(64, device=d),
    "randint": lambda d: torch.randint(0, 1000, (64,), device=d),
    "normal_": lambda d: torch.empty(64, device=d).normal_(2.0, 3.0),
    "bernoulli_": lambda d: torch.empty(64, device=d).bernoulli_(0.3),
    "randperm (fallback)": lambda d: torch.randperm(64, device=d),
    "dropout": lambda d: torch.nn.functional.dropout(torch.ones(64, device=d), 0.5),
}


@pytest.mark.parametrize("draw", sorted(DRAWS))
def test_manual_seed_reproduces_itself(draw):
    torch.emu.manual_seed(1234)
    first = DRAWS[draw]("emu").cpu()
    torch.emu.manual_seed(1234)
    again = DRAWS[draw]("emu").cpu()
    torch.emu.manual_seed(4321)
    other = DRAWS[draw]("emu").cpu()
    assert torch.equal(first, again)
    assert not torch.equal(first, other)


def test_the_device_stream_of_numbers_ignores_the_host_generator():
    torch.emu.manual_seed(7)
    first = torch.randn(16, device="emu").cpu()
    torch.emu.manual_seed(7)
    torch.rand(1000)  # draws from the CPU generator in between
    assert torch.equal(torch.randn(16, device="emu").cpu(), first)


def test_two_devices_have_separate_generators():
    torch.emu.manual_seed_all(99)
    on_1 = torch.randn(16, device="emu:1").cpu()
    torch.emu.manual_seed_all(99)
    torch.randn(1000, device="emu:0")  # device 0 draws; device 1's sequence is its own
    assert not torch.equal(torch.emu.get_rng_state(0), torch.emu.get_rng_state(1))
    assert torch.equal(torch.randn(16, device="emu:1").cpu(), on_1)


def test_rng_state_round_trips():
    state = torch.emu.get_rng_state()
    first = torch.rand(8, device="emu").cpu()
    torch.emu.set_rng_state(state)
    assert torch.equal(torch.rand(8, device="emu").cpu(), first)


def test_an_explicit_generator():
    generator = torch.Generator(device="emu")
    assert generator.device == torch.device("emu", 0)
    generator.manual_seed(5)
    first = torch.rand(8, device="emu", generator=generator).cpu()
    generator.manual_seed(5)
    assert torch.equal(torch.rand(8, device="emu", generator=generator).cpu(), first)


def test_torch_manual_seed_seeds_the_device_too():
    torch.manual_seed(3)
    first = torch.randn(8, device="emu").cpu()
    torch.manual_seed(3)
    assert torch.equal(torch.randn(8, device="emu").cpu(), first)
    assert torch.emu.initial_seed() == 3
