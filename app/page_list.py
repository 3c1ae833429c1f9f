"""The one list of dashboard pages: Home's navigation, the overview's table, bench/app_render.py and
the tests all read it (docs/design.md rule 6: a page is one module in views/ plus one entry here).

A page module defines `render() -> None`; its state lives in the URL (`st.query_params`), so a link
reproduces a view."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

DETTMERS = "https://arxiv.org/abs/1511.04561"
SONG = "https://arxiv.org/abs/1805.08939"
BENNUN = "https://arxiv.org/abs/1802.09941"
DEEPIMAGE = "https://arxiv.org/abs/1501.02876"


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
    PageInfo("Transfer", ":material/swap_horiz:", "views.transfer", "transfer",
             "Figure 2: when compressing a message pays — time and speedup against message size, measured between "
             "two processes here and modelled for a link.", f"[Dettmers 2016]({DETTMERS}) §3.3, Figure 2",
             paper_views=('guess=skip',)),  # the callout compares speedups: it shows once the prediction is out
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
             "stale-synchronous, async, EASGD): live curves of loss, test error, bytes and modelled time.",
             f"[Dettmers 2016]({DETTMERS}) §3.4; [Ben-Nun & Hoefler 2018]({BENNUN}) (consistency models)",
             paper_views=('experiment=codecs&hidden=1024&codecs=32-bit&codecs=linear&codecs=mantissa&codecs=static_tree&codecs=dynamic_tree',)),
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
             paper_views=('',)),
]


NAV: dict[str, Any] = {}  # URL path -> the st.Page Home's navigation made of it (filled by Home.py)


@dataclass(frozen=True)
class TourStep:
    """One step of Home's guided tour: a page at a URL state (its query parameters), what to try there
    and what you should see."""

    page: str
    title: str
    params: dict = field(default_factory=dict)
    try_this: str = ""
    you_see: str = ""


def overview_table(pages: list[PageInfo]) -> str:
    """The overview's markdown table: every page but Home, what it teaches, its paper."""
    rows = [f"| **{p.title}** | {p.teaches} | {p.paper} |" for p in pages if p is not HOME]
    return "\n".join(["| Page | What it teaches | Paper |", "|---|---|---|", *rows])


# Home's guided tour: one path through the lab's five capabilities (codecs, collectives, training, dropout,
# Deep Image), each step a deep link. tests/test_app.py checks every step's page honours its parameters.
TOUR: list[TourStep] = [
    TourStep("codecs", "Is 8 bits enough?", {"codecs": ["dynamic_tree", "linear", "fp8_e4m3", "int8"],
                                             "dist": "student_t"},
             "Answer the page's question (or skip it), then switch the distribution between normal and heavy-tailed "
             "student_t, and add codecs.",
             "The takeaway names the type with the lowest error: the dynamic tree's exponent keeps small values "
             "that linear's evenly spaced steps round to zero."),
    TourStep("codecs", "Table 1, beside the paper", {"section": "Table 1 beside the paper", "rounding": "paper"},
             "Compare the paper's column with ours under the original kernel's rounding and under exact rounding.",
             "With the paper's rounding our errors land within a fraction of a point of the published ones; exact "
             "rounding is lower still."),
    TourStep("transfer", "When does compressing a message pay?", {},
             "Answer which is fastest (or skip), then move the link from PCIe 3 to a faster one, or set the codec speed "
             "to what this machine measures.",
             "Under the paper's conditions 8 bits beat 32 above about 50,000 values (Figure 2); a fast link or a "
             "slow codec moves that crossover or removes it."),
    TourStep("step_through", "See an allreduce happen", {"algorithm": "ring", "P": "4", "step": "3"},
             "Press Play, then try tree and recursive doubling at 8 ranks.",
             "Each ring link carries 2(P−1)/P·n bytes, which is why nccl-tests reports busbw = algbw·2(P−1)/P; the "
             "codec's error grows at each re-quantising hop."),
    TourStep("training", "Does 8-bit training learn as well as 32-bit?",
             {"experiment": "codecs", "codecs": ["32-bit", "dynamic_tree", "linear"]},
             "Press Train, then add error feedback or switch to model parallelism.",
             "The 8-bit curves track 32-bit's test error while sending a quarter of the bytes (Dettmers 2016 §3.4)."),
    TourStep("dropout", "Drop rows, not units", {"p": "0.7", "net_hidden": "1024"},
             "Press Train, then narrow the layers to 128 units.",
             "Row and tile dropout reach about the same accuracy as conventional dropout while each epoch runs "
             "faster; at 128 units the layer timing shows no gain (Song et al. 2019, Table I)."),
    TourStep("planner", "Where does data parallelism stop scaling?",
             {"check": "Deep Image Figure 2 (data vs hybrid)"},
             "Predict which strategy wins (or skip), then change the mini-batch per GPU and watch the crossover move.",
             "Communication per step of data vs hybrid parallelism against the GPU count; the callout says why our "
             "crossover differs from the paper's 16."),
    TourStep("pays", "Does compression pay on your cluster?", {"inter": "eth10g"},
             "Answer whether 1-bit SGD pays here (or skip), then set the network between nodes back to InfiniBand NDR, "
             "then to one node of NVLink.",
             "On 10 GbE most codecs beat bf16; inside an NVLink node none do."),
]
