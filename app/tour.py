"""Home's guided tour: one path through every page of the lab, each step a deep link into a page's URL state
with what to try there and what you should see. What you should see is computed, when Home draws it, from the
same experiments and settings the linked page uses (`TourStep.see`), so a line never claims a winner or a
number the page does not show; the facts it states come back with it, named, for the tests to hold against
the page. A page of the page list that no written step opens gets a step of its own (`steps`)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import page_list
from lab.experiments import FIRST_CODECS


@dataclass(frozen=True)
class Seen:
    """A step's 'you should see': markdown `text` and the `facts` it states (name -> value: a winner's name, a
    count, a number as the page formats it)."""

    text: str
    facts: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TourStep:
    """One step: a page (URL path) at a URL state (`params`: its query parameters), what to try there, and
    `see()`, the computed 'you should see'. `answers`: that text gives away the page's prediction question,
    so Home folds it until the learner opens it."""

    page: str
    title: str
    chapter: str
    params: dict
    try_this: str
    see: Callable[[], Seen]
    answers: bool = False


def _pct(v: float) -> str:
    """A fraction as the Codecs page shows it: 3 significant digits, then ' %'."""
    return f"{100 * v:.3g} %"


def _values(v: float) -> str:
    """A message size in values as Transfer shows it ('about 53,000', '16.8 million')."""
    if v <= 1:
        return "any size"
    v = float(f"{v:.2g}")
    return f"about {v / 1e6:.3g} million" if v >= 1e6 else f"about {int(v):,}"


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


# --- Codecs

CODECS_STEP = {"codecs": list(FIRST_CODECS), "dist": "student_t"}
CODECS_SAMPLES, SEED = 30_000, 0  # the Codecs page's defaults


def codec_errors(dist: str) -> dict[str, float]:
    """Mean relative error of each codec of CODECS_STEP on `dist` (a distribution spec), as the Codecs page
    measures it by default (nearest rounding of the paper's types, 30,000 samples, seed 0)."""
    from lab.experiments import TABLE1_TYPES, codec_spec, error_table, get_codec

    names = CODECS_STEP["codecs"]
    specs = [codec_spec(n, {"rounding": "nearest"}) if n in TABLE1_TYPES else n for n in names]
    df = error_table([get_codec(s) for s in specs], [dist], samples=CODECS_SAMPLES, seed=SEED)
    return dict(zip(names, df["mean_rel_error"].astype(float)))


def _see_codecs() -> Seen:
    heavy, normal = codec_errors("student_t(3)"), codec_errors("normal(0,1)")
    win, win_n = min(heavy, key=heavy.get), min(normal, key=normal.get)
    ranked = sorted(heavy, key=heavy.get)
    text = (f"By mean relative error on Student-t(3), **{win}** keeps the values closest ({_pct(heavy[win])}), then "
            + ", ".join(f"{c} {_pct(heavy[c])}" for c in ranked[1:]) + ". ")
    if win_n == win:
        text += f"On normal(0, 1) {win_n} leads too ({_pct(normal[win_n])})."
    else:
        text += (f"Switch to normal(0, 1) and **{win_n}** leads instead ({_pct(normal[win_n])}, {win} "
                 f"{_pct(normal[win])}): the winner depends on the data's tails.")
    if "fp8_e4m3" in (win, win_n):
        text += (" fp8_e4m3 keeps 3 mantissa bits at every one of its exponents, so its relative error is about "
                 "the same for small and large values; the paper's types spend their codes below one absmax, "
                 "which heavy tails push up.")
    return Seen(text, {"winner": win, "winner_error": _pct(heavy[win]), "normal_winner": win_n})


T1_STEP = {"section": "Table 1 beside the paper", "rounding": "paper"}
T1_SAMPLES = 100_000  # the Codecs page draws Table 1 at once at 0.1 million samples


def table1_gaps() -> dict[str, float]:
    """Table 1 at the page's instant size: the largest gap in points between our relative error (paper's
    rounding) and the published one, for linear and for the other types; the dynamic tree's error on N(0,1)
    with the paper's rounding and with exact rounding."""
    from lab.experiments import table1

    t1 = table1(samples=T1_SAMPLES, seed=SEED)
    gap = (t1.rel_pct_paper - t1.paper_rel_pct).abs().groupby(t1.type, sort=False).max()
    dyn = t1[(t1.type == "dynamic_tree") & (t1.distribution == "N(0,1)")].iloc[0]
    return {"others": float(gap.drop("linear").max()), "linear": float(gap["linear"]),
            "others_types": [t for t in gap.index if t != "linear"],
            "tree_paper": float(dyn.rel_pct_paper), "tree_exact": float(dyn.rel_pct_nearest),
            "tree_published": float(dyn.paper_rel_pct)}


def _see_table1() -> Seen:
    g = table1_gaps()
    exact = "lower" if g["tree_exact"] < g["tree_paper"] else "not lower"
    return Seen(f"With the paper's rounding our relative errors are within **{g['others']:.2g} points** of the "
                f"published ones for {_and(g['others_types'])}; linear differs by up to **{g['linear']:.2g} points**, "
                "because its step is the sample's absmax / 127, so it follows the largest value drawn. On N(0,1) the "
                f"dynamic tree gives {g['tree_paper']:.2f} % (paper {g['tree_published']:.2f} %); exact rounding is "
                f"{exact}: {g['tree_exact']:.2f} %.",
                {"within": f"{g['others']:.2g}", "linear": f"{g['linear']:.2g}",
                 "tree_exact": f"{g['tree_exact']:.2f}"})


# --- Moving the bytes

FIG2_CODECS = ["dynamic_tree", "linear", "onebit"]  # the Transfer page's defaults: Figure 2's conditions
FIG2_SIZES = [1 << k for k in range(10, 25, 2)]


def transfer_figure2():
    """Figure 2 as the Transfer page models it by default: PCIe 3, the GTX Titan's codec kernels."""
    from lab.experiments import PAPER_CODEC_NS, transfer_model

    return transfer_model(FIG2_SIZES, FIG2_CODECS, "pcie3", codec_ns=PAPER_CODEC_NS, kernel="gtx_titan")


def _see_transfer() -> Seen:
    df = transfer_figure2()
    big = df[(df.n_values == df.n_values.max()) & (df.codec != "fp32")].sort_values("speedup_vs_fp32",
                                                                                    ascending=False)
    top = big.iloc[0]
    even = df.attrs["breakeven"]
    eight = {c.split("[")[0]: b for c, b in even.items()}
    wins = "; ".join(f"{c} {'never wins' if b is None else 'wins from ' + _values(b) + ' values'}"
                     for c, b in eight.items())
    fastest = top.codec.split("[")[0]
    return Seen(f"On PCIe 3 with the paper's GPU kernels: {wins}. At {int(top.n_values) / 1e6:.3g} million values "
                f"**{fastest}** is fastest, {top.speedup_vs_fp32:.2f}x 32-bit. The paper's 8-bit crossover is about "
                "50,000 values; a faster link or a slower codec (set *Codec speed* to *measured here*) moves it or "
                "removes it.",
                {"fastest": fastest, "speedup": f"{top.speedup_vs_fp32:.2f}x",
                 "dynamic_tree_from": _values(eight["dynamic_tree"]) if eight.get("dynamic_tree") else "never"},
                )


STEP_THROUGH = {"algorithm": "ring", "P": "4", "step": "3"}
TRY_AT_8 = ("tree", "recursive_doubling")  # what the step says to try next


def _see_step_through() -> Seen:
    from lab.experiments import step_through

    P = int(STEP_THROUGH["P"])
    tr = step_through(STEP_THROUGH["algorithm"], P, 24, codec="dynamic_tree", seed=SEED)
    s = tr.summary
    x, share = s["busiest_rank_x_n"], s["nccl_share"]
    step = int(STEP_THROUGH["step"])
    sent = int(tr.messages[tr.messages.step < step].bytes.sum())
    at8 = {a: step_through(a, 8, 24, codec="dynamic_tree", seed=SEED).summary for a in ("ring", *TRY_AT_8)}
    return Seen(f"Step {step} of {tr.steps}: {sent:,} B sent so far by all ranks. Over the whole allreduce the busiest "
                f"rank of the ring moves **{x:.3g}·n**, "
                + ("exactly" if abs(x - share) < 1e-9 else f"{x / share:.2g}x") +
                f" the 2(P−1)/P·n = {share:.3g}·n any allreduce must move at P = {P}: why nccl-tests reports busbw "
                f"= algbw × {share:.3g}. At 8 ranks that floor is {at8['ring']['nccl_share']:.3g}·n; the busiest "
                "rank moves "
                + ", ".join(f"{a.replace('_', ' ')} {s['busiest_rank_x_n']:.3g}·n" for a, s in at8.items()) + ".",
                {"steps": f"{step} of {tr.steps}", "sent": f"{sent:,} B", "busiest": f"{x:.3g}·n",
                 "at_8": {a: f"{s['busiest_rank_x_n']:.3g}·n" for a, s in at8.items()}})


OPS_STEP = {"part": "Every collective"}


def _see_collectives() -> Seen:
    from lab.experiments import op_catalog, op_model

    cat = op_catalog()
    per_op = cat.groupby("op", sort=False).name.apply(list).to_dict()
    ops = list(per_op)
    # the page's 'Every collective' tab opens on all_gather, 1 MiB per rank, 8 ranks, ib_fdr
    algs = per_op["all_gather"]
    mdf = op_model("all_gather", algs, 8, [1 << 20], "ib_fdr")
    best = mdf.loc[mdf.model_s.idxmin()].algorithm
    listing = "; ".join(f"{op} ({len(a)}: {', '.join(a)})" for op, a in per_op.items())
    return Seen(f"Every collective a training job uses, each with its algorithms and nccl-tests' busbw factor: "
                f"{listing}. Opened on all-gather of 1 MiB per rank on 8 ranks over ib_fdr, **{best}** is fastest "
                "in the model.", {"ops": ops, "all_gather_fastest": best})


SPLIT_STEP = {"part": "Where the time goes"}


def time_split_committed():
    """The committed measurement the Collectives page's "Where the time goes" tab shows before a run."""
    from lab.experiments import TIME_SPLIT_RESULT, load_time_split

    return load_time_split(str(TIME_SPLIT_RESULT))


def _see_time_split() -> Seen:
    res = time_split_committed()
    split = res.split
    parts = {"codec_s": "codec work", "wire_s": "on the wire", "wait_s": "waiting", "python_s": "Python"}
    by = split.groupby("codec", sort=False)[["seconds", *parts]].mean()
    out, facts = [], {}
    for codec, r in by.iterrows():
        main = max(parts, key=lambda p: r[p])
        out.append(f"{codec} {1e3 * r.seconds:.3g} ms, most of it {parts[main]} ({r[main] / r.seconds:.0%})")
        facts[str(codec)] = f"{1e3 * r.seconds:.3g}"
    cfg = res.config
    return Seen(f"The committed trace ({cfg.get('procs')} processes, {cfg.get('device')}), one allreduce per codec, "
                "mean over ranks: " + "; ".join(out) + ". Each rank's time splits into codec work, the wire, waiting "
                "for a peer and Python; press *Measure here* to split this machine's.", facts)


PAYS_STEP = {"inter": "eth10g"}


def pays_lesson() -> dict:
    """The 'Does compression pay?' page's lesson at its defaults with 10 GbE between nodes."""
    from lab.experiments import does_compression_pay

    return does_compression_pay(model="gpt2_small", cluster="8x8", gpu="h100", intra="nvlink4", inter="eth10g",
                                nics_per_node=None, batch_per_gpu=8, overlap=False).lesson


def _see_pays() -> Seen:
    L = pays_lesson()
    n = L["codecs"]
    from lab.experiments import best_words

    words = best_words(L, "here")
    best = f" ({words})" if words else ""
    return Seen(f"On {L['here']} **{L['pay_here']} of {n}** codecs pay against the best bf16 step of gpt2_small"
                f"{best}; inside one node ({L['inside_node']}) **{L['pay_inside_node']} of {n}** do: a fast link "
                "leaves compression little to save.",
                {"pay_here": f"{L['pay_here']} of {n}", "pay_inside_node": f"{L['pay_inside_node']} of {n}"})


# --- Training

def _see_training() -> Seen:
    return Seen("The wire metrics show what one real step of each run sends (8 bits a value: a quarter of 32-bit's "
                "bytes). After Train, the test-error curves: runs that lie on top of 32-bit's lost nothing to their "
                "codec; the takeaway says whether each final error differs from 32-bit's by more than the test "
                "set's noise. Nothing here is claimed before you run it.")


def modes() -> tuple[list[str], list[str]]:
    """The training modes: the data-parallel ones (sim, ddp, fsdp) and every registered parallelism."""
    from lab.experiments import DATA_PARALLEL_MODES, parallel_strategies

    return list(DATA_PARALLEL_MODES), list(parallel_strategies())


def _see_fsdp() -> Seen:
    return Seen("FSDP2 keeps 1/P of every layer on each rank: it all-gathers a layer's weights before using them and "
                "reduce-scatters its gradients after, so a codec can ride on each of the two. After Train: each run's "
                "bytes per step counted on the wire, its step time and final loss against fp32 FSDP2 and DDP "
                "(predict the byte share first).")


def _see_parallel() -> Seen:
    _, strategies = modes()
    return Seen(f"Every registered way to split a model over ranks: **{_and(strategies)}**, each trained on real "
                "processes, fp32 beside a codec on what the ranks send (activations between stages, partial sums, "
                "tokens to experts): test error and bytes per step for both.", {"strategies": strategies})


def pipeline_bubble() -> dict[str, float]:
    """The Pipeline page's default schedule (1F1B, P = 4, M = 4): bubble by formula and planned, and the
    planned bubble at twice the micro-batches."""
    from lab.experiments import bubble_formula, bubble_of, planned_timeline

    return {"formula": float(bubble_formula("1f1b", 4, 4, None)), "planned": bubble_of(planned_timeline("1f1b", 4, 4)),
            "planned_8": bubble_of(planned_timeline("1f1b", 4, 8))}


def _see_pipeline() -> Seen:
    from lab.experiments import schedule_names

    b = pipeline_bubble()
    return Seen(f"1F1B on 4 ranks with 4 micro-batches leaves the ranks idle **{100 * b['planned']:.1f} %** of the "
                f"step (its formula: {100 * b['formula']:.1f} %); 8 micro-batches bring it to "
                f"{100 * b['planned_8']:.1f} %. Schedules to compare: {', '.join(schedule_names())}.",
                {"planned": f"{100 * b['planned']:.1f} %", "formula": f"{100 * b['formula']:.1f} %"})


RACE_STEP = {"view": "Race to the target"}


def race_result():
    """The race the Training page's race view shows by default: the committed mlp study, its default codecs,
    the first seed, 8x8 nodes with 10 GbE between them."""
    from lab.experiments import RACE_COMMITTED_DEFAULT, committed_race_data, race

    data = committed_race_data("mlp")
    if data is None:
        return None
    specs_all = [s for s in dict.fromkeys(data["runs"]["spec"]) if s != "fp32"]
    shown = [s for s in RACE_COMMITTED_DEFAULT if s in specs_all] or specs_all[:8]
    runs = data["runs"][data["runs"]["spec"].isin(["fp32", *shown])]
    seed = sorted(int(s) for s in data["runs"]["seed"].unique())[0]
    cfg = data["config"]
    return race(runs, data["curves"], task="mlp", seed=seed, optimizer=cfg["optimizer"], seeds_asked=cfg["seeds"],
                specs=["fp32", *shown], cluster="8x8", inter="eth10g", intra="nvlink4", model=None)


def _see_race() -> Seen:
    res = race_result()
    if res is None:
        return Seen("No committed race result here: choose *live race* and press Race.")
    if res.first is None:
        return Seen(f"On {res.cluster} no codec reaches fp32's target in the committed study.")
    where = f"In the committed mlp study priced on {res.cluster}"
    if res.tied:
        head = (f"{where}, no single codec reaches fp32's target first beyond the seeds' spread: **{res.first}** leads "
                f"by its interval's upper end, but the intervals of {_and(res.tied)} overlap its own.")
    else:
        head = f"{where}, **{res.first}** reaches fp32's target first, ahead of every other codec's interval."
    return Seen(head + " Against steps, the 8-bit types and error feedback show what compression costs in accuracy; "
                "a codec that never reaches the target never pays, however cheap its step.",
                {"first": res.first, "tied": list(res.tied)})


PLANNER_STEP = {"check": "Deep Image Figure 2 (data vs hybrid)"}
PLANNER_GPUS = [1, 2, 4, 8, 16, 32, 64]  # the planner's default GPU counts


def planner_crossovers() -> dict[str, Any]:
    """The three crossovers the planner page shows at this step: its own sweep's (AlexNet on PCIe 3, V100,
    128 images per GPU, P in PLANNER_GPUS), the model of Deep Image's Figure 2 (the Table 2 network on K40m
    and FDR InfiniBand, 64 images per GPU, every P to 128, communication only) and the paper's."""
    from lab.experiments import crossover, deep_image_figure2, planner_sweep

    sweep = planner_sweep("alexnet", PLANNER_GPUS, strategies=["data", "hybrid"], codec=None, activation_codec=None,
                          overlap=False, device="v100", algorithm="ring", batch_per_gpu=128, global_batch=None,
                          link="pcie3")
    f2 = deep_image_figure2(overlap=False)
    return {"planner": crossover(sweep, "data", "hybrid"), "figure2": f2.crossover, "paper": f2.paper_crossover,
            "batch": f2.batch_per_gpu, "batch_for_paper": f2.batch_for_paper}


def _p(v: int | None) -> str:
    return "never" if v is None else f"P = {v}"


def _see_planner() -> Seen:
    c = planner_crossovers()
    text = (f"Three crossovers, three setups. **{_p(c['planner'])}**: the planner's own sweep above (AlexNet, V100s on "
            f"PCIe 3, 128 images per GPU, P from {PLANNER_GPUS[0]} to {PLANNER_GPUS[-1]}), total step time. "
            f"**{_p(c['figure2'])}**: the model of Deep Image's Figure 2 below (its Table 2 network, K40m GPUs on FDR "
            f"InfiniBand, {c['batch']} images per GPU, every P to 128), communication only: data parallelism's "
            "allreduce is nearly flat in P while the hybrid's activations grow with it. "
            f"**{_p(c['paper'])}**: the paper's, measured on a network it does not describe")
    text += (f"; at {c['batch_for_paper']} images per GPU the model's crossover falls to it." if c["batch_for_paper"]
             else ".")
    return Seen(text, {"planner": _p(c["planner"]), "figure2": _p(c["figure2"]), "paper": c["paper"]})


# --- Dropout and Deep Image

def _see_dropout() -> Seen:
    return Seen("Before training: Algorithm 1's mix of row patterns still drops every unit about p of the time "
                "(answer the page's question first). After Train: each pattern's test accuracy and epoch time beside "
                "the paper's Table I, measured here; the layer timing says from which width skipping rows pays on "
                "this machine.")


def deep_image_counts() -> dict[str, Any]:
    """Deep Image's Table 1 counts at the paper's sizes (512 px images, 224 px crops)."""
    from lab.experiments import augmentation_counts

    cdf = augmentation_counts(512, 224)
    part = cdf[cdf["paper"].notna()]
    return {"matching": int(part["matches"].sum()), "rows": len(part)}


def _see_deep_image() -> Seen:
    c = deep_image_counts()
    return Seen(f"**{c['matching']} of {c['rows']}** of Table 1's counts of possible changes match ours, each counted "
                "from the grid of values its augmentation draws from; the product of them all, which the paper does "
                "not give, is in the table.", {"matching": f"{c['matching']} of {c['rows']}"})


def _see_fusion() -> Seen:
    return Seen("After Run: each scale's test error and the fused model's; the takeaway says whether averaging beat "
                "the better single scale by more than one seed's luck (the paper's ImageNet gain was a few points of "
                "top-5 error).")


def _see_operators() -> Seen:
    return Seen("Each method's work W, depth D and average parallelism W/D by the survey's formulas beside the threads "
                "this device runs, the multiplications each performs here, and after Time the methods each one's "
                "time against F.conv2d with its spread, its check against F.conv2d and what splitting the batch does "
                "to its workspace.")


WRITTEN: list[TourStep] = [
    TourStep("codecs", "Is 8 bits enough?", "Codecs: how few bits?", CODECS_STEP,
             "Answer the page's question (or skip it), then switch the distribution between heavy-tailed student_t "
             "and normal, and add codecs.", _see_codecs, answers=True),
    TourStep("codecs", "Table 1, beside the paper", "Codecs: how few bits?", T1_STEP,
             "Compare the paper's column with ours under the original kernel's rounding and under exact rounding.",
             _see_table1),
    TourStep("transfer", "When does compressing a message pay?", "Moving the bytes", {},
             "Answer which is fastest (or skip), then move the link from PCIe 3 to a faster one, or set the codec "
             "speed to what this machine measures.", _see_transfer, answers=True),
    TourStep("step_through", "See an allreduce happen", "Moving the bytes", STEP_THROUGH,
             "Press Play, then try " + " and ".join(a.replace("_", " ") for a in TRY_AT_8) + " at 8 ranks.",
             _see_step_through, answers=True),
    TourStep("collectives", "Every collective", "Moving the bytes", OPS_STEP,
             "Pick each collective in turn (all-gather, reduce-scatter, all-to-all, ...) and compare its algorithms' "
             "bus bandwidth as the message grows.", _see_collectives),
    TourStep("collectives", "Where the time goes", "Moving the bytes", SPLIT_STEP,
             "Answer which allreduce finishes first (or skip), then read one rank's timeline and the split of "
             "every call.", _see_time_split, answers=True),
    TourStep("pays", "Does compression pay on your cluster?", "Moving the bytes", PAYS_STEP,
             "Answer whether 1-bit SGD pays here (or skip), then set the network between nodes back to InfiniBand "
             "NDR.", _see_pays, answers=True),
    TourStep("training", "Does 8-bit training learn as well as 32-bit?", "Training in parallel",
             {"experiment": "codecs", "codecs": ["32-bit", "dynamic_tree", "linear"]},
             "Press Train, then add error feedback or switch to model parallelism.", _see_training),
    TourStep("training", "Sharded training: FSDP2 against DDP", "Training in parallel",
             {"experiment": "sharded: FSDP2 vs DDP"},
             "Predict the share of fp32's bytes the codecs send, press Train, then put a codec on the gradients only.",
             _see_fsdp),
    TourStep("training", "Beyond data parallelism", "Training in parallel",
             {"experiment": "beyond data parallel: real ranks"},
             "Pick a parallelism, predict the share of fp32's bytes its codec sends, press Train.", _see_parallel),
    TourStep("pipeline", "Where does a pipeline sit idle?", "Training in parallel", {},
             "Answer which schedule idles least (or skip), then raise the micro-batches and watch the bubble shrink.",
             _see_pipeline),
    TourStep("training", "The race to the target", "Training in parallel", RACE_STEP,
             "Compare the two charts: steps to the target (what a codec costs in accuracy) and modelled time (what "
             "it is worth); then make the network faster.", _see_race),
    TourStep("operators", "Inside one layer: which convolution multiplies least?", "Training in parallel", {},
             "Answer which method does the fewest multiplications (or skip), then widen the channels until another "
             "method wins, and press Time the methods.", _see_operators, answers=True),
    TourStep("planner", "Where does data parallelism stop scaling?", "Training in parallel", PLANNER_STEP,
             "Predict which strategy wins (or skip), then change the mini-batch per GPU and watch the crossover move.",
             _see_planner, answers=True),
    TourStep("dropout", "Drop rows, not units", "Dropout and Deep Image", {"p": "0.7", "net_hidden": "1024"},
             "Answer how often each unit is dropped (or skip), press Train, then narrow the layers to 128 units.",
             _see_dropout),
    TourStep("deep_image", "How many images from one?", "Dropout and Deep Image", {"di_view": "Table 1 counts"},
             "Change the image and crop sizes and watch which counts still match the paper.", _see_deep_image),
    TourStep("fusion", "Two scales, one answer", "Dropout and Deep Image", {},
             "Answer whether fusing helps (or skip), then press Run.", _see_fusion),
]


MORE = "More pages"  # the chapter of the steps made for pages no written step opens


def _page_step(p: page_list.PageInfo) -> TourStep:
    """The step of a page no written step opens: its default view, what it teaches."""
    return TourStep(p.url_path, p.title, MORE, {}, "Open it, answer its question if it asks one, and read "
                    "the takeaway.", lambda p=p: Seen(p.teaches))


def steps() -> list[TourStep]:
    """The tour: the written steps whose page is in the page list, then a step for every other page (read now:
    a page added to the list is in the tour)."""
    pages = [p for p in page_list.PAGES if p is not page_list.HOME]
    paths = {p.url_path for p in pages}
    written = [s for s in WRITTEN if s.page in paths]
    covered = {s.page for s in written}
    return written + [_page_step(p) for p in pages if p.url_path not in covered]


__all__ = ["Seen", "TourStep", "WRITTEN", "steps", "modes"]
