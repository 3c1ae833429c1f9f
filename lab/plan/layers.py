"""Model descriptions for the parallelism planner: a list of layers, each with its parameters,
forward FLOPs per sample and activation sizes per sample, and presets of the papers' networks.

Counts are computed from the architectures (not typed in): a convolution with c_in → c_out
channels, k×k kernels and an h×w output has c_out·c_in/groups·k² weights (+ c_out biases) and
2·weights·h·w forward FLOPs (one multiply-add = 2 FLOPs); a dense layer n_in → n_out has
n_in·n_out weights and 2·n_in·n_out FLOPs. Training costs 3× the forward FLOPs (backward = 2×).
Pooling, normalisation and activations are folded into the layers around them (their FLOPs are
small); `inputs` is what a layer reads per sample, after any pooling in front of it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

KINDS = ("conv", "fc", "embedding", "block", "head")


@dataclass(frozen=True)
class Layer:
    """One layer: `params` weights, `flops` forward FLOPs per sample, `inputs` / `outputs` values
    per sample it reads / writes. kind: conv | fc | embedding | block | head (Krizhevsky's hybrid
    makes the "fc" layers model-parallel and keeps the rest data-parallel). `matrices`: the (rows,
    cols) of its weight tensors as PyTorch's PowerSGD hook views them ((out, in·k·k) for a
    convolution); the rest of `params` (biases, norms) are vectors; () when unknown."""

    name: str
    kind: str
    params: int
    flops: float
    inputs: int
    outputs: int
    matrices: tuple[tuple[int, int], ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"layer {self.name!r}: unknown kind {self.kind!r}; allowed: {', '.join(KINDS)}")
        for what in ("params", "flops", "inputs", "outputs"):
            v = getattr(self, what)
            if not v >= 0:
                raise ValueError(f"layer {self.name!r}: {what} must be >= 0, got {v!r}")
        mats = tuple(tuple(int(d) for d in m) for m in self.matrices)
        if any(len(m) != 2 or min(m) < 1 for m in mats) or sum(a * b for a, b in mats) > self.params:
            raise ValueError(f"layer {self.name!r}: matrices {self.matrices!r} must be (rows, cols) pairs >= 1 "
                             f"holding at most its {self.params} parameters")
        object.__setattr__(self, "matrices", mats)


@dataclass(frozen=True)
class ModelSpec:
    """A network as a list of layers in forward order, with what a sample is and a source."""

    name: str
    layers: tuple[Layer, ...]
    sample: str
    source: str

    def __post_init__(self) -> None:
        if not self.layers:
            raise ValueError(f"model {self.name!r} has no layers")
        names = [lay.name for lay in self.layers]
        if len(set(names)) != len(names):
            raise ValueError(f"model {self.name!r}: layer names must be unique")

    @property
    def params(self) -> int:
        return sum(lay.params for lay in self.layers)

    @property
    def flops(self) -> float:
        """Forward FLOPs per sample."""
        return float(sum(lay.flops for lay in self.layers))

    def describe(self) -> str:
        return (f"{self.name}: {len(self.layers)} layers, {self.params / 1e6:.1f} M parameters, "
                f"{self.flops / 1e9:.2f} GFLOP forward per {self.sample}")


def conv(name: str, c_in: int, c_out: int, k: int, out_hw: int | tuple[int, int], *, in_hw=None,
         groups: int = 1, bias: bool = True) -> Layer:
    """A k×k convolution with an out_hw output; in_hw (default out_hw) is its input's spatial size."""
    oh, ow = (out_hw, out_hw) if isinstance(out_hw, int) else out_hw
    ih, iw = (oh, ow) if in_hw is None else ((in_hw, in_hw) if isinstance(in_hw, int) else in_hw)
    weights = c_out * (c_in // groups) * k * k
    mats = ((c_out, c_in // groups * k * k),)  # the weight (c_out, c_in/groups, k, k) as (c_out, -1)
    return Layer(name, "conv", weights + (c_out if bias else 0), 2.0 * weights * oh * ow, c_in * ih * iw,
                 c_out * oh * ow, mats)


def fc(name: str, n_in: int, n_out: int, *, bias: bool = True) -> Layer:
    """A dense layer n_in → n_out."""
    return Layer(name, "fc", n_in * n_out + (n_out if bias else 0), 2.0 * n_in * n_out, n_in, n_out,
                 ((n_out, n_in),))


# -- presets

def alexnet() -> ModelSpec:
    """AlexNet as Krizhevsky et al. 2012 trained it (two-GPU groups in conv2, 4, 5): 60.97 M
    parameters, Dettmers 2016 §2.3.2's "about 60 million"; 224×224×3 input, conv1 → 55×55."""
    layers = (
        conv("conv1", 3, 96, 11, 55, in_hw=224),
        conv("conv2", 96, 256, 5, 27, groups=2),
        conv("conv3", 256, 384, 3, 13),
        conv("conv4", 384, 384, 3, 13, groups=2),
        conv("conv5", 384, 256, 3, 13, groups=2),
        fc("fc6", 256 * 6 * 6, 4096),
        fc("fc7", 4096, 4096),
        fc("fc8", 4096, 1000),
    )
    return ModelSpec("alexnet", layers, "224x224 image", "Krizhevsky et al. 2012, Fig. 2")


def _vgg_convs(bias: bool) -> list[Layer]:
    """VGG's 13 3×3 convolutions (configuration D) on a 224×224 input; a 2×2 max-pool after each block."""
    blocks = ((64, 2), (128, 2), (256, 3), (512, 3), (512, 3))
    out, c_in, hw, i = [], 3, 224, 1
    for width, reps in blocks:
        for r in range(reps):
            out.append(conv(f"conv{i}", c_in, width, 3, hw, bias=bias))
            c_in, i = width, i + 1
        hw //= 2
    return out


def deep_image() -> ModelSpec:
    """Deep Image's basic 16-layer configuration (Wu et al. 2015 Table 2): VGG's 13 convolutions
    (64, 64 | 128, 128 | 256 ×3 | 512 ×3 | 512 ×3, max-pool after each block), then FC 6144, 6144
    and the 1000-way softmax layer, on 224×224 crops. Reading: "the number of weights is 212.7M"
    counts weights without biases (212.74 M; biases would add 0.02 M)."""
    layers = (*_vgg_convs(bias=False), fc("fc1", 512 * 7 * 7, 6144, bias=False),
              fc("fc2", 6144, 6144, bias=False), fc("fc3", 6144, 1000, bias=False))
    return ModelSpec("deep_image", layers, "224x224 crop", "Wu et al. 2015 Table 2 (212.7M weights)")


def vgg16() -> ModelSpec:
    """VGG-16, configuration D of Simonyan & Zisserman 2014: 138.36 M parameters."""
    layers = (*_vgg_convs(bias=True), fc("fc6", 512 * 7 * 7, 4096), fc("fc7", 4096, 4096), fc("fc8", 4096, 1000))
    return ModelSpec("vgg16", layers, "224x224 image", "Simonyan & Zisserman 2014, Table 1 (D)")


def resnet50() -> ModelSpec:
    """ResNet-50 (He et al. 2016, Table 1; torchvision's v1.5, stride on the 3×3): one layer per
    convolution, batch-norm scale/shift folded into its convolution's parameters: 25.56 M."""
    layers: list[Layer] = []

    def cbn(name, c_in, c_out, k, out_hw, in_hw=None):
        c = conv(name, c_in, c_out, k, out_hw, in_hw=in_hw, bias=False)
        layers.append(Layer(c.name, "conv", c.params + 2 * c_out, c.flops, c.inputs, c.outputs, c.matrices))

    cbn("conv1", 3, 64, 7, 112, in_hw=224)
    c_in, hw = 64, 56  # after the 3×3 max-pool
    for stage, (width, blocks) in enumerate(((64, 3), (128, 4), (256, 6), (512, 3)), start=2):
        for b in range(blocks):
            stride = 2 if (b == 0 and stage > 2) else 1
            out_hw = hw // stride
            p = f"conv{stage}_{b + 1}"
            cbn(f"{p}a", c_in, width, 1, hw)
            cbn(f"{p}b", width, width, 3, out_hw, in_hw=hw)
            cbn(f"{p}c", width, 4 * width, 1, out_hw)
            if b == 0:
                cbn(f"{p}_down", c_in, 4 * width, 1, out_hw, in_hw=hw)
            c_in, hw = 4 * width, out_hw
    layers.append(fc("fc", 2048, 1000))
    return ModelSpec("resnet50", tuple(layers), "224x224 image", "He et al. 2016, Table 1 (torchvision v1.5)")


def gpt2_small(seq_len: int = 1024) -> ModelSpec:
    """A GPT-2-small-sized transformer (Radford et al. 2019; 12 layers, d = 768, 12 heads, vocabulary
    50257, 1024 positions, LM head tied to the token embedding): 124.44 M parameters. A sample is one
    sequence of seq_len tokens. Per block and token: 24·d² weights' FLOPs (QKV, projection, 4d MLP)
    + 4·T·d for attention scores and mixing (Kaplan et al. 2020's 2·n_ctx·d per layer, ×2 for FLOPs)."""
    d, vocab, n_layer, ctx = 768, 50257, 12, 1024
    if isinstance(seq_len, bool) or not isinstance(seq_len, int) or not 1 <= seq_len <= ctx:
        raise ValueError(f"seq_len must be an int in 1..{ctx}, got {seq_len!r}")
    T = seq_len
    block_params = 12 * d * d + 13 * d  # qkv 3d²+3d, proj d²+d, mlp 8d²+5d, two layer norms 4d
    layers = [Layer("embed", "embedding", vocab * d + ctx * d, 0.0, T, T * d, ((vocab, d), (ctx, d)))]
    block_mats = ((3 * d, d), (d, d), (4 * d, d), (d, 4 * d))  # qkv, projection, MLP in and out
    for i in range(n_layer):
        layers.append(Layer(f"block{i + 1}", "block", block_params, T * (24.0 * d * d + 4.0 * T * d), T * d, T * d,
                            block_mats))
    layers.append(Layer("lm_head", "head", 2 * d, T * 2.0 * d * vocab, T * d, T * vocab))  # final norm; tied
    return ModelSpec("gpt2_small", tuple(layers), f"sequence of {T} tokens",
                     "Radford et al. 2019 (GPT-2 small: 12 layers, d=768)")


MODELS = {"alexnet": alexnet, "deep_image": deep_image, "vgg16": vgg16, "resnet50": resnet50,
          "gpt2_small": gpt2_small}


def get_model(name_or_spec: str | ModelSpec) -> ModelSpec:
    """A preset by name (alexnet, deep_image, vgg16, resnet50, gpt2_small) or the given ModelSpec."""
    if isinstance(name_or_spec, ModelSpec):
        return name_or_spec
    if isinstance(name_or_spec, str) and name_or_spec in MODELS:
        return MODELS[name_or_spec]()
    raise ValueError(f"unknown model {name_or_spec!r}; presets: {', '.join(MODELS)}")


def custom_model(name: str, layers: Sequence[Layer | dict], sample: str = "sample") -> ModelSpec:
    """A ModelSpec from Layers or dicts with name, kind, params, flops, inputs, outputs."""
    built = tuple(lay if isinstance(lay, Layer) else Layer(**lay) for lay in layers)
    return ModelSpec(name, built, sample, "user-supplied")


__all__ = ["KINDS", "Layer", "ModelSpec", "conv", "fc", "alexnet", "deep_image", "vgg16", "resnet50", "gpt2_small",
           "MODELS", "get_model", "custom_model"]
