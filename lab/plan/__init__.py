"""The parallelism planner: what-if step times of data, model, hybrid (Krizhevsky's one weird
trick) and pipeline parallelism for a model described as layers, on preset GPUs and links, with
codecs per layer and Deep Image's lazy update; per-layer codec advice; the papers' arithmetic
(Dettmers 2016 §2.3.2, Wu et al. 2015 §3.3). Communication times come from `lab.comm.cost`."""
from .advice import CANDIDATES, codec_advice, codec_thresholds
from .devices import DEVICES, Device, custom_device, get_device
from .layers import MODELS, Layer, ModelSpec, custom_model, get_model
from .links import PAPER_LINKS, link_from_bench, link_presets, resolve_link
from .papers import dettmers_alexnet, dettmers_planner, deep_image_scaling, deep_image_speedup
from .strategies import STRATEGIES, Infeasible, StepPlan, crossover, plan_step, plan_sweep
from .wire import WireCodec, wire_codec

__all__ = ["MODELS", "Layer", "ModelSpec", "get_model", "custom_model", "DEVICES", "Device", "get_device",
           "custom_device", "link_from_bench", "resolve_link", "PAPER_LINKS", "link_presets", "STRATEGIES",
           "Infeasible", "StepPlan", "plan_step",
           "plan_sweep", "crossover", "CANDIDATES", "codec_advice", "codec_thresholds", "WireCodec", "wire_codec",
           "dettmers_alexnet", "dettmers_planner", "deep_image_scaling", "deep_image_speedup"]
