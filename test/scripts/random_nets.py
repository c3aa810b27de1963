"""Random small nets of nn layers through a dicp backend, against eager: values, every
gradient and the batch-norm buffers, static shapes and dynamic (3 batch sizes, one build).

Image nets draw 2-6 of: convolutions (groups, dilation, stride, reflect/replicate padding,
depthwise, transposed), batch and group norm, 13 activations, max and average pooling (ceil
mode), adaptive pooling, nearest/bilinear/bicubic upsampling and residual blocks, sometimes on a
channels-last input; sequence nets: Linear, LayerNorm, RMSNorm, MultiheadAttention (causal or
not), Conv1d, softmax, cumsum, GLU and an embedding. Each runs in training or eval mode.

    python test/scripts/random_nets.py --seed 0 --count 200

A result differing from eager passes if it is as close to the float64 run as eager's (4x, for
values that cancel to nothing, such as a bias gradient before batch norm). A net eager itself
rejects is skipped. One line per failure; the exit status is 1 if any.
"""

import argparse
import copy
import math
import random
import sys
import traceback

import torch
import torch.nn as nn

import dicp  # noqa: F401  (registers the backends)


class Res(nn.Module):
    def __init__(self, body):
        super().__init__()
        self.body = body

    def forward(self, x):
        return x + self.body(x)


class Lambda(nn.Module):
    def __init__(self, fn, desc):
        super().__init__()
        self.fn, self.desc = fn, desc

    def forward(self, x):
        return self.fn(x)

    def extra_repr(self):
        return self.desc


class OverTime(nn.Module):
    """A Conv1d over a (batch, time, features) sequence."""

    def __init__(self, conv):
        super().__init__()
        self.conv = conv

    def forward(self, x):
        return self.conv(x.transpose(1, 2)).transpose(1, 2)


def act(r):
    return r.choice(
        [
            nn.ReLU(),
            nn.GELU(),
            nn.GELU("tanh"),
            nn.SiLU(),
            nn.Hardswish(),
            nn.LeakyReLU(0.1),
            nn.Tanh(),
            nn.Sigmoid(),
            nn.ELU(),
            nn.Mish(),
            nn.Hardsigmoid(),
            nn.Softplus(),
            nn.ReLU6(),
        ]
    )


def image_layer(r, c, h, w):
    """-> (module, new c, h, w)"""
    k = r.choice(
        ["conv", "conv", "bn", "act", "pool", "avg", "adapt", "up", "res", "gn", "convT", "dw"]
    )
    if k in ("conv", "dw"):
        ks, st, dil = r.choice([1, 3, 5]), r.choice([1, 1, 2]), r.choice([1, 1, 2])
        pad = r.choice([0, ks // 2 * dil, 1])
        groups = c if k == "dw" else r.choice([g for g in (1, 2, 4) if c % g == 0])
        co = c if k == "dw" else r.choice([g * m for g in [groups] for m in (1, 2, 3)])
        ho = (h + 2 * pad - dil * (ks - 1) - 1) // st + 1
        wo = (w + 2 * pad - dil * (ks - 1) - 1) // st + 1
        if ho < 1 or wo < 1:
            return None
        return (
            nn.Conv2d(
                c,
                co,
                ks,
                st,
                pad,
                dil,
                groups,
                bias=r.random() < 0.5,
                padding_mode=r.choice(["zeros"] * 4 + ["reflect", "replicate"])
                if pad < min(h, w)
                else "zeros",
            ),
            co,
            ho,
            wo,
        )
    if k == "convT":
        ks, st, pad = r.choice([2, 3]), r.choice([1, 2]), r.choice([0, 1])
        op = r.choice([0, 1]) if st == 2 else 0
        ho, wo = ((n - 1) * st - 2 * pad + ks + op for n in (h, w))
        if ho < 1 or wo < 1 or ho > 40 or wo > 40:
            return None
        co = r.choice([2, 4, 6])
        return nn.ConvTranspose2d(c, co, ks, st, pad, op, bias=r.random() < 0.5), co, ho, wo
    if k == "bn":
        return nn.BatchNorm2d(c, affine=r.random() < 0.8), c, h, w
    if k == "gn":
        g = r.choice([x for x in (1, 2, c) if c % x == 0])
        return nn.GroupNorm(g, c), c, h, w
    if k == "act":
        return act(r), c, h, w
    if k in ("pool", "avg"):
        ks, st = r.choice([2, 3]), r.choice([1, 2])
        pad = r.choice([0, 1]) if ks == 3 else 0
        ceil = r.random() < 0.4

        def out(n):
            v = (n + 2 * pad - ks + (st - 1 if ceil else 0)) // st + 1
            if ceil and (v - 1) * st >= n + pad:
                v -= 1
            return v

        ho, wo = out(h), out(w)
        if ho < 1 or wo < 1:
            return None
        if k == "pool":
            return nn.MaxPool2d(ks, st, pad, ceil_mode=ceil), c, ho, wo
        return (
            nn.AvgPool2d(ks, st, pad, ceil_mode=ceil, count_include_pad=r.random() < 0.5),
            c,
            ho,
            wo,
        )
    if k == "adapt":
        o = r.choice([1, 2, 3, 5])
        return r.choice([nn.AdaptiveAvgPool2d(o), nn.AdaptiveMaxPool2d(o)]), c, o, o
    if k == "up":
        if h * 2 > 40:
            return None
        mode = r.choice(["nearest", "bilinear", "bicubic"])
        ac = None if mode == "nearest" else r.random() < 0.5
        return nn.Upsample(scale_factor=2, mode=mode, align_corners=ac), c, 2 * h, 2 * w
    if k == "res":
        return Res(nn.Sequential(nn.Conv2d(c, c, 3, 1, 1), nn.BatchNorm2d(c), act(r))), c, h, w


def seq_layer(r, d, t):
    k = r.choice(
        ["lin", "ln", "rms", "act", "attn", "res", "conv1d", "softmax", "cumsum", "drop0", "glu"]
    )
    if k == "lin":
        do = r.choice([4, 6, 8, 12, 16])
        return nn.Linear(d, do, bias=r.random() < 0.7), do
    if k == "ln":
        return nn.LayerNorm(d, elementwise_affine=r.random() < 0.8), d
    if k == "rms":
        return nn.RMSNorm(d), d
    if k == "act":
        return act(r), d
    if k == "attn":
        heads = r.choice([h for h in (1, 2, 4) if d % h == 0])
        causal = r.random() < 0.5
        m = nn.MultiheadAttention(d, heads, batch_first=True, bias=r.random() < 0.7)

        class Attn(nn.Module):
            def __init__(self):
                super().__init__()
                self.m = m

            def forward(self, x):
                mask = None
                if causal:
                    n = x.shape[1]
                    mask = torch.ones(n, n, dtype=torch.bool, device=x.device).triu(1)
                return self.m(x, x, x, attn_mask=mask, need_weights=False)[0]

        return Attn(), d
    if k == "res":
        return Res(
            nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 2 * d), act(r), nn.Linear(2 * d, d))
        ), d
    if k == "conv1d":
        ks, co = r.choice([1, 3]), r.choice([4, 8])
        groups = r.choice([1, 2]) if d % 2 == 0 and co % 2 == 0 else 1
        return OverTime(nn.Conv1d(d, co, ks, padding=ks // 2, groups=groups)), co
    if k == "softmax":
        return Lambda(lambda x: x.softmax(-1) * x.shape[-1], "softmax"), d
    if k == "cumsum":
        return Lambda(lambda x: x.cumsum(1) / x.shape[1], "cumsum"), d
    if k == "drop0":
        return nn.Dropout(0.0), d
    if k == "glu":
        if d % 2:
            return None
        return nn.GLU(-1), d // 2


def build(r):
    kind = r.choice(["image", "image", "seq"])
    layers = []
    if kind == "image":
        c, h, w = r.choice([1, 3, 4]), r.choice([5, 7, 8, 12]), r.choice([5, 6, 9, 12])
        shape = (c, h, w)
        while len(layers) < r.randint(2, 6):
            out = image_layer(r, c, h, w)
            if (
                out is None
                or isinstance(out[0], nn.Conv2d)
                and out[0].padding_mode != "zeros"
                and max(out[0].padding) >= min(h, w)
            ):
                continue
            m, c, h, w = out
            layers.append(m)
        head = r.choice(["flat", "mean", "none"])
        if head == "flat":
            layers += [nn.Flatten(), nn.Linear(c * h * w, 3)]
        elif head == "mean":
            layers += [Lambda(lambda x: x.mean((2, 3)), "mean")]
        return kind, nn.Sequential(*layers), shape
    d, t = r.choice([4, 8, 12]), r.choice([1, 3, 5, 8])
    shape = (t, d)
    emb = r.random() < 0.3
    if emb:
        layers.append(nn.Embedding(11, d, padding_idx=r.choice([None, 0])))
    while len(layers) < r.randint(2, 6):
        out = seq_layer(r, d, t)
        if out is None:
            continue
        m, d = out
        layers.append(m)
    return ("emb" if emb else kind), nn.Sequential(*layers), shape


def make_input(r, kind, shape, batch, g, channels_last):
    if kind == "emb":
        return torch.randint(0, 11, (batch, shape[0]), generator=g)
    x = torch.randn(batch, *shape, generator=g)
    if channels_last and x.dim() == 4:
        x = x.contiguous(memory_format=torch.channels_last)
    return x.requires_grad_()


def run(model, x, train):
    model.train(train)
    model.zero_grad(set_to_none=True)
    out = model(x)
    weight = torch.linspace(-1, 1, out.numel(), dtype=out.dtype).view(out.shape)
    (out * weight).sum().backward()
    grads = [p.grad for p in model.parameters()]
    return [out.detach(), x.grad] + grads + [b.clone() for b in model.buffers()]


def largest_finite(t) -> float:
    """The largest magnitude among `t`'s finite elements (0 if none): a scale no inf or NaN
    of eager's makes unbounded."""
    finite = t[t.isfinite()]
    return finite.abs().max().item() if finite.numel() else 0.0


def largest_difference(x, y) -> float:
    """The largest |x - y| over the elements: none where both hold the same value (an inf, a
    NaN), unbounded where one of them is NaN. Plain `(x - y).abs().max()` is NaN then, and no
    comparison with NaN fails: a NaN in either result passed unseen."""
    x, y = x.double(), y.double()
    same = (x == y) | (x.isnan() & y.isnan())
    difference = (x - y).abs().nan_to_num(nan=math.inf)
    return torch.where(same, 0.0, difference).max().item()


def problems(got, want, exact):
    """The results where `got` is off eager's `want` and not as close to the float64 run
    `exact` as eager is."""
    found = []
    # a sum that cancels to nothing (a bias gradient before batch norm, 0 in float64) is off
    # by rounding in the size of its terms: the largest result stands in for them
    floats = [t for t in want if t is not None and t.is_floating_point()]
    largest = max((largest_finite(t) for t in floats), default=1.0)
    for i, (a, b, e) in enumerate(zip(got, want, exact)):
        if a is None or b is None or not a.is_floating_point():
            if (a is None) != (b is None) or a is not None and not torch.equal(a, b):
                found.append(f"result {i}: differs")
            continue
        scale = max(1.0, largest_finite(b))
        if a.shape != b.shape:
            found.append(f"result {i}: shape {tuple(a.shape)}, eager {tuple(b.shape)}")
            continue
        # where eager overflowed (inf or NaN, the float64 run finite), it is no measure: its
        # error there would excuse any error elsewhere
        judged = b.isfinite() | ~e.isfinite()
        a, b, e = a[judged], b[judged], e[judged]
        if a.numel() and largest_difference(a, b) > 2e-4 * scale:
            ours, eagers = (largest_difference(t, e) for t in (a, b))
            if ours > 4 * eagers + 1e-5 * largest:
                found.append(f"result {i}: error {ours:.3g} against float64, eager's {eagers:.3g}")
    return found


def check(seed, dynamic, backend):
    """The failures of net `seed`, or None if eager rejects it."""
    r = random.Random(seed)
    torch.manual_seed(seed)  # the layers' initial weights
    kind, model, shape = build(r)
    train, channels_last = r.random() < 0.6, r.random() < 0.3
    compiled_model = copy.deepcopy(model)
    compiled = torch.compile(compiled_model, backend=backend, dynamic=dynamic)
    exact_model = copy.deepcopy(model).double()
    found = []
    for batch in [2, 3, 5] if dynamic else [2]:
        x = make_input(
            r, kind, shape, batch, torch.Generator().manual_seed(seed * 7 + batch), channels_last
        )
        try:
            want = run(model, x, train)
        except (RuntimeError, ValueError):
            return None
        exact = run(
            exact_model,
            x.detach().double().requires_grad_(x.requires_grad) if x.is_floating_point() else x,
            train,
        )
        got = run(compiled, x.detach().clone().requires_grad_(x.requires_grad), train)
        found += [f"batch {batch} {p}" for p in problems(got, want, exact)]
    return found


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0, help="first net")
    parser.add_argument("--count", type=int, default=100, help="nets, each static and dynamic")
    parser.add_argument("--backend", default="new_backendgraph")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    failed = skipped = 0
    for seed in range(args.seed, args.seed + args.count):
        for dynamic in (False, True):
            torch._dynamo.reset()
            try:
                found = check(seed, dynamic, args.backend)
            except Exception as error:  # the compiled run raised where eager did not
                found = [traceback.format_exception_only(type(error), error)[-1].strip()[:500]]
            if found is None:
                skipped += 1
                continue
            if found:
                failed += 1
                print(
                    f"seed {seed} {'dynamic' if dynamic else 'static'}: {found[0]}"
                    f"{f' (+{len(found) - 1} more)' if len(found) > 1 else ''}",
                    flush=True,
                )
    print(f"{2 * args.count} nets: {failed} failed, {skipped} rejected by eager")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
