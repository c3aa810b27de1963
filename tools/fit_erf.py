"""Fits the polynomials of dicp::erf in the runtime header (dicp_runtime.h) and prints them.

    python tools/fit_erf.py

|x| < 1: erf(x) = x + x P(x^2), P fitted to erf(x)/x - 1 (degree 6, error relative to erf(x)/x).
|x| >= 1: erf(x) = 1 - e^(h(x) - x^2), h fitted to log(erfc(x)) + x^2 on [1, 4] (degree 6),
its error weighted by erfc(x): an error d in the exponent moves erf by erfc(x) d.
Both minimize the maximum weighted error by Lawson's iteratively reweighted least squares at
Chebyshev nodes, in float64.
"""

import math

import torch


def minimax_fit(f, variable, low, high, degree, relative_to=None, nodes=4000, iterations=30):
    """Coefficients (lowest first) of a polynomial in `variable(x)` approximating f(x) on
    [low, high] with small maximum error divided by `relative_to(x)` (default f(x)), and
    that error."""
    k = torch.arange(nodes, dtype=torch.float64)
    x = (low + high) / 2 + (high - low) / 2 * torch.cos(math.pi * (k + 0.5) / nodes)
    target, v = f(x), variable(x)
    reference = target if relative_to is None else relative_to(x)
    powers = torch.stack([v**i for i in range(degree + 1)], 1)
    weights = torch.full_like(x, 1.0 / nodes)
    for _ in range(iterations):
        scale = (weights / reference**2).sqrt()
        coefficients = torch.linalg.lstsq(powers * scale[:, None], (target * scale)[:, None])
        coefficients = coefficients.solution[:, 0]
        error = ((powers @ coefficients - target) / reference).abs()
        weights = weights * error / (weights * error).sum()
    return coefficients, error.max().item()


def main():
    erf, erfc = torch.special.erf, torch.special.erfc
    central, central_error = minimax_fit(
        lambda x: erf(x) / x - 1, lambda x: x * x, 1e-6, 1.0, 6, relative_to=lambda x: erf(x) / x
    )
    tail, tail_error = minimax_fit(
        lambda x: torch.log(erfc(x)) + x * x,
        lambda x: x,
        1.0,
        4.0,
        6,
        relative_to=lambda x: 1 / erfc(x),
    )
    for name, coefficients, error in [
        ("P(x^2)", central, central_error),
        ("h(x)", tail, tail_error),
    ]:
        print(f"{name}, weighted error {error:.2e}, highest degree first:")
        print("  " + ", ".join(f"{c:.9e}f" for c in coefficients.float().tolist()[::-1]))


if __name__ == "__main__":
    main()
