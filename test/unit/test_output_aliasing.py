"""An output eager computes as new memory is not a view at run time either (aliasing.py), so a
caller may modify it in place, under autograd too."""

import pytest
import torch
import torch.nn.functional as F

from .helpers import compiled, warm_cache  # noqa: F401  (fixture)


def projected(x, w):
    """Wav2Vec2's feature projection: a product reshaped, then a dropout of p=0 (a copy in the
    traced graph, the identity in the compiled one)."""
    return F.dropout((x @ w).view(2, x.shape[0] // 2, w.shape[1]), p=0.0, training=True)


@pytest.mark.parametrize("dynamic", [False, True])
def test_an_output_modified_in_place_keeps_its_gradient(warm_cache, dynamic):
    generator = torch.Generator().manual_seed(7)
    fn = compiled(projected, dynamic)
    for rows in (6, 8, 4):
        x = torch.randn(rows, 5, generator=generator)
        w = torch.randn(5, 4, generator=generator, requires_grad=True)
        mask = torch.rand(2, rows // 2, generator=generator) > 0.5
        outputs = []
        for function in (fn, projected):
            out = function(x, w)
            out[mask] = 0.5  # Wav2Vec2's masked_spec_embed
            outputs.append((out, *torch.autograd.grad((out * out).sum(), w)))
        torch.testing.assert_close(outputs[0], outputs[1])


def inverse_spectra(x):
    """Each ends in a lazily conjugated view (`_conj`): the graph's output is one."""
    return torch.fft.ifft(x), torch.fft.ihfft(x), torch.fft.ifft(x).conj() * 2


@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("shape", [(1,), (5,), (4, 6)])
def test_a_conjugated_view_output_keeps_its_values(warm_cache, dynamic, shape):
    x = torch.randn(shape, generator=torch.Generator().manual_seed(3))
    for got, want in zip(compiled(inverse_spectra, dynamic)(x), inverse_spectra(x), strict=True):
        torch.testing.assert_close(got, want)
