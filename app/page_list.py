"""The one list of dashboard pages: Home's navigation, the overview's table, bench/app_render.py and
the tests all read it (docs/design.md rule 6: a page is one module in views/ plus one entry here).

A page module defines `render() -> None`; its state lives in the URL (`st.query_params`), so a link
reproduces a view."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

DETTMERS = "https://arxiv.org/abs/1511.04561"
SONG = "https://arxiv.org/abs/1805.08939"
BENNUN = "https://arxiv.org/abs/1802.09941"
DEEPIMAGE = "https://arxiv.org/abs/1501.02876"
GPIPE = "https://arxiv.org/abs/1811.06965"
MEGATRON = "https://arxiv.org/abs/2104.04473"
ZEROBUBBLE = "https://arxiv.org/abs/2401.10241"
DEEPSEEK = "https://arxiv.org/abs/2412.19437"


@dataclass(frozen=True)
class PageInfo:
    """A dashboard page: its title, icon, module (under app/, with a `render()`), URL path, what it
    teaches and the paper sections it reproduces (markdown)."""

    title: str
    icon: str
    module: str
    url_path: str
    teaches: str
    paper: str = ""
    paper_views: tuple[str, ...] = ()  # URL query strings of the page's views named after a paper's table or
    # figure: each shows the paper's numbers beside ours with a callout (ui.paper_callout); the browser tests open each


HOME = PageInfo("Home", ":material/home:", "views.overview", "", "The device in use, what each page teaches, and "
                "the papers' sections.")
PAGES: list[PageInfo] = [
    HOME,
    PageInfo("Codecs", ":material/data_array:", "views.codecs", "codecs",
             "The four 8-bit data types (linear, mantissa, static tree, dynamic tree), your own bit layouts, "
             "fp16/bf16/fp8/int8 and the gradient compressors (1-bit SGD, TernGrad, QSGD, top-k): value tables, "
             "error histograms, the Table 1 preset with the original kernel's rounding or exact rounding, "
             "encode/decode speed here.", f"[Dettmers 2016]({DETTMERS}) §3.1–3.2, Table 1",
             paper_views=('section=Table 1 beside the paper',)),
    PageInfo("Stochastic rounding", ":material/casino:", "views.rounding", "rounding",
             "Rounding to nearest against stochastic rounding on any grid (fp16, bf16, fp8, the value tables): a "
             "weight under updates smaller than half a gap stalls or keeps moving, the bias E[Q(x)] − x across x, "
             "and a short training run with the weights stored in the format.",
             f"[Ben-Nun & Hoefler 2018]({BENNUN}) (communication optimizations: stochastic rounding); Gupta et al. "
             "2015 §3"),
    PageInfo("Transfer", ":material/swap_horiz:", "views.transfer", "transfer",
             "Figure 2: when compressing a message pays — time and speedup against message size, measured between "
             "two processes here and modelled for a link.", f"[Dettmers 2016]({DETTMERS}) §3.3, Figure 2",
             paper_views=('guess=skip',)),  # the callout compares speedups: it shows once the prediction is out
    PageInfo("Kernels", ":material/memory:", "views.kernels", "kernels", "Why is this kernel memory bound? The lab's CUDA kernels without a GPU: registers, occupancy and why it is limited, DRAM bytes and SASS instructions per value, each kernel on the roofline of H100, H200 and B200.", "Williams, Waterman & Patterson 2009 (the roofline); Ding & Williams 2019 (the instruction roofline)"),
    PageInfo("Collectives", ":material/hub:", "views.collectives", "collectives",
             "Tree, recursive doubling, ring, Rabenseifner, butterfly sync and parameter server: modelled vs "
             "measured time, bus bandwidth against the lower bound, a step-by-step view of each algorithm, error of "
             "compressed allreduce at scale.",
             f"[Ben-Nun & Hoefler 2018]({BENNUN}) (allreduce and its cost model); [Deep Image]({DEEPIMAGE}) §3.1 "
             "(butterfly sync)"),
    PageInfo("Step through", ":material/animation:", "views.step_through", "step_through",
             "One allreduce on 2..8 ranks, message by message, for any registered algorithm: arrows between ranks, "
             "bytes per link, each rank's buffer filling with partial sums, the codec's error at each re-quantising "
             "hop; algbw vs busbw for the same run and why busbw = algbw·2(P−1)/P.",
             f"[Ben-Nun & Hoefler 2018]({BENNUN}) (allreduce algorithms); [Dettmers 2016]({DETTMERS}) §3.2 "
             "(decode-add-encode per hop); nccl-tests PERFORMANCE.md (busbw)"),
    PageInfo("Does compression pay?", ":material/balance:", "views.pays", "pays",
             "Every codec × allreduce (flat ring, hierarchical, ZeRO++'s all-to-all, in-network NVLS/SHARP) on a "
             "two-level cluster against a bf16 baseline, codec time and overlap counted: the speedup of a training "
             "step against the network bandwidth and the break-even bandwidth below which each codec pays.",
             "[ZeRO++](https://arxiv.org/abs/2306.10209) §4.3 (qgZ); [Agarwal et al. 2022]"
             "(https://arxiv.org/abs/2103.00543) (does compression pay?); nccl-tests' busbw of NVLS",
             paper_views=('',)),
    PageInfo("Training", ":material/model_training:", "views.training", "training",
             "Data- and model-parallel training with a codec on the wire, and the consistency models (sync, "
             "stale-synchronous, async, EASGD): live curves of loss, test error, bytes and modelled time; pipeline, "
             "tensor, hybrid and expert parallelism on real ranks, fp32 beside a codec on what they send.",
             f"[Dettmers 2016]({DETTMERS}) §3.4; [Ben-Nun & Hoefler 2018]({BENNUN}) (consistency models)",
             paper_views=('experiment=codecs&hidden=1024&codecs=32-bit&codecs=linear&codecs=mantissa&codecs=static_tree&codecs=dynamic_tree',)),
    PageInfo("Pipeline", ":material/view_timeline:", "views.pipeline", "pipeline",
             "Pipeline schedules (GPipe, 1F1B, interleaved, looped BFS, zero bubble, DualPipeV): each rank's planned "
             "timeline beside the published bubble formula, then a run on real ranks with a codec on the stages' "
             "sends: the measured timeline, its bubble against the formula, the activations each stage holds.",
             f"[GPipe]({GPIPE}) §2.2; [Narayanan et al. 2021]({MEGATRON}) §2.2 (1F1B, interleaved); "
             f"[Qi et al. 2024]({ZEROBUBBLE}) (zero bubble); [DeepSeek-V3]({DEEPSEEK}) §3.2.1 (DualPipe); "
             f"[Ben-Nun & Hoefler 2018]({BENNUN}) (layer pipelining)"),
    PageInfo("Operators", ":material/functions:", "views.operators", "operators",
             "Inside one layer: work, depth and average parallelism (W/D) of a fully connected layer and of direct, "
             "im2col, FFT and Winograd convolution beside the threads here; each method checked against F.conv2d "
             "and timed, the batch split into micro-batches (µ-cuDNN).",
             f"[Ben-Nun & Hoefler 2018]({BENNUN}) (work–depth, the FC and convolution tables, µ-cuDNN)"),
    PageInfo("Dropout", ":material/grid_on:", "views.dropout", "dropout",
             "Approximate Random Dropout: row and tile patterns, the search for the pattern distribution "
             "(Algorithm 1), layer speedup against the 1/(1−p) ceiling, MLP and LSTM runs.",
             f"[Song et al. 2019]({SONG}) §III–IV, Tables I–II",
             paper_views=('',)),
    PageInfo("Deep Image", ":material/image:", "views.augmentations", "deep_image",
             "The augmentations of Deep Image: previews, every augmentation at parameters you set, Table 1's "
             "counts of possible changes, batched throughput here.", f"[Wu et al. 2015]({DEEPIMAGE}) §4.1, Table 1",
             paper_views=('di_view=Table 1 counts',)),
    PageInfo("Planner", ":material/account_tree:", "views.planner", "planner",
             "The parallelism planner: step time of data, model, hybrid and pipeline parallelism against the GPU "
             "count, codec advice per layer, the papers' scaling figures beside the model.",
             f"[Wu et al. 2015]({DEEPIMAGE}) §3.3, Figures 2–3; [Dettmers 2016]({DETTMERS}) §2.3.2",
             paper_views=('', 'check=Deep Image Figure 2 (data vs hybrid)', 'check=Deep Image Figure 3 (speedup per mini-batch)')),
    PageInfo("Fusion", ":material/layers:", "views.fusion", "fusion",
             "Multi-scale fusion: the same small CNN at two input scales, softmax outputs averaged.",
             f"[Wu et al. 2015]({DEEPIMAGE}) §4.2",
             paper_views=('guess=skip',)),  # the paper's numbers would answer the question: they wait for it
]


NAV: dict[str, Any] = {}  # URL path -> the st.Page Home's navigation made of it (filled by Home.py)
