"""Send the factors, not the gradient (Ben-Nun & Hoefler, "Communication optimizations": "send FC factors
(o_{l-1}, o_l), compute ∇w on the parameter server; broadcast factors to not receive full w").

A fully connected layer's weight gradient over a mini-batch of B samples is a sum of B outer products,
∇w = Σ_b δ_b · o_{l-1,b}ᵀ, so a worker can send the B input activations o_{l-1} (Cin values each) and the B
output errors δ_l (Cout values each): B·(Cin + Cout) values instead of ∇w's Cin·Cout. Sending the factors is
smaller exactly when B < B* = Cin·Cout / (Cin + Cout). Going back, a worker receives either the full w (Cin·Cout
values) or every worker's factors (P·B·(Cin + Cout)) and computes the update itself, smaller while B < B* / P.
Beside them: ∇w in 8 bits (Dettmers 2016: a quarter of fp32's bytes, Cin·Cout bytes) and PowerSGD rank r
(Vogels et al. 2019: (Cin + Cout)·r values), which the factors beat exactly when B < r.
Values are 4-byte floats unless a row says 8-bit."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .layers import ModelSpec, fc, get_model


def dettmers_mlp() -> ModelSpec:
    """Dettmers 2016 §4.1's MNIST network, 784 × 1024 × 1024 × 10 (dense layers)."""
    return ModelSpec("dettmers_mlp", (fc("fc1", 784, 1024), fc("fc2", 1024, 1024), fc("fc3", 1024, 10)),
                     "28x28 image", "Dettmers 2016 §4.1 (784x1024x1024x10)")


#: the models the factor lesson offers: the planner's with FC layers, and Dettmers' MLP
FACTOR_MODELS = {"alexnet": None, "vgg16": None, "deep_image": None, "dettmers_mlp": dettmers_mlp}


@dataclass(frozen=True)
class FCShape:
    """One fully connected layer: `name`, `c_in` inputs, `c_out` outputs."""

    name: str
    c_in: int
    c_out: int


def crossover_batch(c_in: int, c_out: int) -> float:
    """B* = Cin·Cout / (Cin + Cout): the batch at which the factors B·(Cin + Cout) equal ∇w's Cin·Cout values."""
    if min(c_in, c_out) < 1:
        raise ValueError(f"Cin={c_in}, Cout={c_out}: allowed whole numbers >= 1")
    return c_in * c_out / (c_in + c_out)


def fc_layers(model: str | ModelSpec) -> list[FCShape]:
    """The fully connected layers of a model (a planner preset, 'dettmers_mlp' or a ModelSpec), in order."""
    if isinstance(model, str) and model in FACTOR_MODELS and FACTOR_MODELS[model] is not None:
        spec = FACTOR_MODELS[model]()
    else:
        try:
            spec = get_model(model)
        except ValueError:
            raise ValueError(f"model {model!r}: allowed {', '.join(FACTOR_MODELS)}") from None
    out = [FCShape(l.name, l.inputs, l.outputs) for l in spec.layers if l.kind == "fc"]
    if not out:
        raise ValueError(f"model {spec.name!r} has no fully connected layer; allowed: {', '.join(FACTOR_MODELS)}")
    return out


def _check(batch: int, gpus: int, rank: int) -> None:
    for what, v in (("batch", batch), ("gpus", gpus), ("rank", rank)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"{what}={v!r}: allowed a whole number >= 1")


def factor_table(model: str | ModelSpec, batch: int, gpus: int = 8, rank: int = 4) -> pd.DataFrame:
    """Per FC layer of `model` at a per-worker mini-batch `batch` on `gpus` workers, the values each worker sends
    up and receives back each way. Columns: layer, c_in, c_out, grad_values (Cin·Cout), factor_values
    (B·(Cin + Cout)), grad_8bit_bytes (Cin·Cout), factor_bytes and grad_bytes (4 per value), powersgd_values
    ((Cin + Cout)·r), crossover (B*), crossover_8bit (B at which the fp32 factors equal 8-bit ∇w: B*/4),
    down_w_values (Cin·Cout), down_factor_values (P·B·(Cin + Cout)), down_crossover (B*/P), best_up (the
    fewest bytes up among 'fp32 ∇w', '8-bit ∇w', 'PowerSGD rank r', 'factors'). attrs: batch, gpus, rank."""
    _check(batch, gpus, rank)
    rows = []
    for l in fc_layers(model):
        s = l.c_in + l.c_out
        grad = l.c_in * l.c_out
        up = {"fp32 ∇w": 4 * grad, "8-bit ∇w": grad, f"PowerSGD rank {rank}": 4 * s * rank,
              "factors": 4 * batch * s}
        rows.append(dict(layer=l.name, c_in=l.c_in, c_out=l.c_out, grad_values=grad, factor_values=batch * s,
                         grad_bytes=4 * grad, grad_8bit_bytes=grad, factor_bytes=4 * batch * s,
                         powersgd_values=s * rank, crossover=crossover_batch(l.c_in, l.c_out),
                         crossover_8bit=crossover_batch(l.c_in, l.c_out) / 4, down_w_values=grad,
                         down_factor_values=gpus * batch * s, down_crossover=crossover_batch(l.c_in, l.c_out) / gpus,
                         best_up=min(up, key=up.get)))
    out = pd.DataFrame(rows)
    out.attrs.update(batch=batch, gpus=gpus, rank=rank)
    return out


def factor_curves(model: str | ModelSpec, rank: int = 4, batches: np.ndarray | None = None) -> pd.DataFrame:
    """Bytes one worker sends up per FC layer against the per-worker batch B: the factors (4·B·(Cin + Cout)),
    fp32 ∇w, 8-bit ∇w and PowerSGD rank r (flat in B). Columns: layer, batch, what, bytes."""
    _check(1, 1, rank)
    b = np.unique(np.round(np.logspace(0, 14, 57, base=2))).astype(int) if batches is None else np.asarray(batches)
    rows = []
    for l in fc_layers(model):
        s, grad = l.c_in + l.c_out, l.c_in * l.c_out
        for what, v in (("factors (o_l−1, δ_l), fp32", 4 * b * s), ("∇w, fp32", np.full(len(b), 4 * grad)),
                        ("∇w, 8-bit", np.full(len(b), grad)), (f"PowerSGD rank {rank}, fp32", np.full(len(b), 4 * s * rank))):
            rows.append(pd.DataFrame({"layer": l.name, "batch": b, "what": what, "bytes": v.astype(float)}))
    return pd.concat(rows, ignore_index=True)


__all__ = ["FACTOR_MODELS", "FCShape", "crossover_batch", "dettmers_mlp", "factor_curves", "factor_table",
           "fc_layers"]
