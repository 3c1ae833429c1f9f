"""lab/experiments/torch_sampling_private.py: seeded Gamma draws from torch's private sampler."""
from __future__ import annotations

import torch

from lab.experiments.torch_sampling_private import standard_gamma


def _draw(seed: int, alpha: float, n: int = 20000) -> torch.Tensor:
    return standard_gamma(torch.full((n,), alpha), torch.Generator().manual_seed(seed))


def test_draws_follow_the_generator_and_the_gamma_law():
    a, b = _draw(7, 2.5), _draw(7, 2.5)
    assert torch.equal(a, b), f"torch {torch.__version__}: torch._standard_gamma ignores its generator"
    assert not torch.equal(a, _draw(8, 2.5))
    assert (a > 0).all()
    # Gamma(α, 1): mean α, variance α; 20k draws put both within a few percent
    assert abs(a.mean().item() - 2.5) < 0.1 and abs(a.var().item() - 2.5) < 0.25
