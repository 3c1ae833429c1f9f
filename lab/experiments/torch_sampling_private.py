"""The private sampler of torch the seeded distributions rely on, in one place: Gamma(α, 1) draws from a given
`torch.Generator` (torch._standard_gamma; the public torch.distributions.Gamma draws from the global generator
only). tests/test_torch_sampling_private.py pins it, so a torch that moves it fails there by name."""
from __future__ import annotations

import torch


def standard_gamma(concentration: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """One Gamma(α, 1) draw per element of `concentration` (α > 0), from `generator`."""
    return torch._standard_gamma(concentration, generator=generator)


__all__ = ["standard_gamma"]
