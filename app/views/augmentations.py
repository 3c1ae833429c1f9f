"""Deep Image page (Wu et al. 2015 §4.1, Table 1): how six cheap augmentations turn one photo into an enormous
number of training images — a preview grid, every augmentation at parameters you set, Table 1's counts beside
the paper's, and the batched throughput here. One view at a time (a view switch, not tabs: tabs would draw all
four on every change)."""
import streamlit as st

import _common as ui
import _runs as jobs
import chart
from lab import plots
from lab.experiments import (COLOR_SHIFTS, DISTORTION_DEGREES, DISTORTION_KINDS, MAX_DISTORTION_DEGREE, ROTATION_ANGLES,
                             Preview, augmentation_counts, augmentation_preview, augmentation_settings,
                             augmentation_throughput, test_card)

AUGS = list(plots.AUGMENT_LABELS)  # crop, color_cast, vignette, lens_distortion, rotation, flip, all
VIEWS = ["Preview", "Set the parameters", "Table 1 counts", "Throughput here"]
CARDS = [64, 128, 256, 512]


@st.cache_resource(max_entries=16, show_spinner=False)
def _preview_figure(image_size: int, crop: int, samples: int, chosen: tuple, seed: int):
    pv = augmentation_preview(test_card(image_size), samples=samples, crop_size=crop, seed=seed)
    return plots.augment_preview_figure(Preview(pv.original, {k: pv.panels[k] for k in chosen}, pv.seed))


@st.cache_resource(max_entries=32, show_spinner=False)
def _settings_figure(image_size: int, crop: int, top: int, left: int, shifts: tuple, area: float, strength: float,
                     kind: str, degree: float, angle: float, flipped: bool):
    pv = augmentation_settings(test_card(image_size), crop_size=crop, top=top, left=left, shifts=shifts, area=area,
                               strength=strength, kind=kind, degree=degree, angle=angle, flipped=flipped)
    return plots.augment_preview_figure(pv)


@st.cache_data(max_entries=32, show_spinner=False)
def _counts(image_size: int, crop: int):
    return augmentation_counts(image_size, crop)


def _sci(n: int) -> str:
    """A large count in plain words: 1.2 × 10^17."""
    if n < 1e6:
        return f"{n:,}"
    e = len(str(int(n))) - 1
    return f"{n / 10 ** e:.1f} × 10" + str(e).translate(str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹"))


def _whole_pipeline(crop: int, image_size: int) -> str:
    """What the product counts: all six edits, named in the pipeline's order (crop first, §4.1)."""
    return (f"All six edits together (a {crop}-px crop of the {image_size}-px image, then colour cast, vignette, lens "
            "distortion, rotation and flip)")


def _product_sentence(image_size: int, crop: int, detail: bool = True) -> str:
    """The takeaway: the whole pipeline's count, said to be the product of all six edits' counts. Without `detail`
    (the prediction above is not answered yet) it names no single edit's count, so it gives no hint which is
    largest."""
    cdf = _counts(image_size, crop)
    total = int(cdf["possible_changes"].iloc[-1])
    counts = dict(zip(cdf["augmentation"], cdf["possible_changes"]))
    each = (f"; of the six, cropping alone gives {int(counts['crop']):,} and colour casting "
            f"{int(counts['color_cast']):,}" if detail else "")
    return (f"{_whole_pipeline(crop, image_size)} can turn one image into {_sci(total)} different training images, "
            f"the product of the six edits' counts{each}: a network almost never sees the same training image twice.")


def render() -> None:
    """Render the page (called by Home's navigation on every rerun)."""
    st.title("Deep Image: augmentations")
    ui.lesson("How do six cheap image edits turn one photo into more training images than a network can ever see?",
              "Look at the preview (each augmentation drawn on a test card: the grid lines show distortion and "
              "rotation, the disc flips and crops), then at **Table 1 counts**: how many versions each edit makes, "
              "beside the paper's numbers.")
    c1, _ = st.columns([3, 2])
    view = ui.radio("View", VIEWS, "di_view", VIEWS[0], where=c1,
                    help="Preview: random draws of each augmentation; Set the parameters: each one at values you "
                         "choose; Table 1 counts: possible changes beside the paper's; Throughput: timed here")
    with ui.more_settings("More settings: seed"):
        seed = int(ui.number("Seed", "seed", 0, where=st.columns([1, 4])[0], min_value=0, step=1,
                            help="seeds the random draws of the preview and the throughput images, ≥ 0"))
    section = {VIEWS[0]: _preview, VIEWS[1]: _settings, VIEWS[2]: _table1, VIEWS[3]: _throughput}[view]
    ui.shown(lambda: section(seed))
    jobs.release()


def _predict_most(image_size: int, crop: int) -> bool | None:
    """Which single edit makes the most versions of one image? Revealed from Table 1's counts at these sizes."""
    cdf = _counts(image_size, crop)
    single = cdf[cdf["augmentation"].isin([a for a in AUGS if a != "all"])]
    label = plots.AUGMENT_LABELS

    def reveal():
        ranked = single.sort_values("possible_changes", ascending=False)
        top = ranked.iloc[0]
        return label.get(top.augmentation, top.augmentation), (
            "Possible changes at these sizes: " + "; ".join(
                f"{label.get(r.augmentation, r.augmentation)} {_sci(int(r.possible_changes))} ({r.grid})"
                for r in ranked.itertuples()) + ". Three channels shifted independently multiply, while a crop only "
                f"has ({image_size} − {crop})² offsets.")
    return ui.predict(f"Which single edit can turn one {image_size}-px image into the most different {crop}-px "
                      "training images?", [label.get(a, a) for a in single["augmentation"]], reveal, key="guess")


def _preview(seed: int) -> None:
    a1, a2, a3, a4 = st.columns([4, 1, 1, 1])
    chosen = ui.multiselect("Augmentations", AUGS, "augs", AUGS, where=a1, format_func=plots.AUGMENT_LABELS.get,
                            help="which rows to draw; the last, 'all', is the whole pipeline (crop first)")
    samples = ui.slider("Draws each", "draws", 2, 1, 8, where=a2, step=1,
                        help="random draws per augmentation, 1–8 (seeded: the seed is under More settings)")
    image_size = ui.select("Test card (px)", CARDS, "card", 256, where=a3,
                           help="side of the synthetic test image, 64–512 px")
    crop = ui.number("Crop (px)", "crop", 224, where=a4, step=8, min_value=1, max_value=512,
                     help="side of the square crop, at most the card's side; the paper crops 224 of 512")
    answered = _predict_most(int(image_size), int(crop)) is not None if crop <= image_size else True
    ui.takeaway(_product_sentence(int(image_size), int(crop), detail=answered) if crop <= image_size else
                f"The crop ({crop} px) must fit in the test card ({image_size} px).")
    if not chosen:
        st.info("Pick at least one augmentation.")
        return
    st.caption("Colour casting, vignetting, distortion, rotation and flips work on the centre crop; the last row is "
               "the whole pipeline (crop first, as §4.1 says).")
    chart.plotly(_preview_figure(int(image_size), int(crop), int(samples), tuple(chosen), seed),
                 key="augment_preview")


def _settings(seed: int) -> None:
    st.caption("Every augmentation at the values you set, then all of them in the pipeline's order (crop first). "
               f"Zero is the identity. The paper's grids: shifts −20..20 per channel, rotations up to "
               f"±{max(ROTATION_ANGLES)}°, distortion degrees up to {max(DISTORTION_DEGREES)}; the sliders go further so "
               "the effects are easy to see.")
    lo, hi = min(COLOR_SHIFTS), max(COLOR_SHIFTS)
    c1, c2, c3 = st.columns(3)
    red = ui.slider("Colour cast: red", "set_r", 0, lo, hi, where=c1, step=1,
                    help=f"added to the red channel, {lo}..{hi} in 8-bit steps (the paper's grid)")
    strength = ui.slider("Vignette strength", "set_strength", 0.0, 0.0, 1.0, where=c1, step=0.02,
                         help="brightness removed at the corners, 0–1 (paper grid 0.02–0.98)")
    degree = ui.slider("Lens distortion degree", "set_degree", 0.0, 0.0, float(MAX_DISTORTION_DEGREE), where=c2,
                       step=0.01, help=f"0–{MAX_DISTORTION_DEGREE:g}: how far straight lines bend (paper grid up to "
                                       f"{max(DISTORTION_DEGREES)})")
    angle = ui.slider("Rotation (degrees)", "set_angle", 0, -45, 45, where=c2, step=1,
                      help=f"−45..45 degrees (paper grid ±1..±{max(ROTATION_ANGLES)})")
    crop = ui.number("Crop (px)", "set_crop", 224, where=c3, step=8, min_value=1, max_value=512,
                     help="side of the square crop, at most the card's side")
    flipped = ui.checkbox("Horizontal flip", "set_flip", False, where=c3, help="mirror left-right")
    with ui.more_settings("More settings: card, crop offset, other channels, vignette area, distortion kind",
                          key="more_card"):
        m1, m2, m3, m4 = st.columns(4)
        image_size = ui.select("Test card (px)", CARDS, "set_card", 256, where=m1,
                               help="side of the synthetic test image, 64–512 px")
        top = ui.number("Crop top (px)", "set_top", 16, where=m1, step=1, min_value=0,
                        help="crop offset from the top, 0..card − crop")
        left = ui.number("Crop left (px)", "set_left", 16, where=m1, step=1, min_value=0,
                         help="crop offset from the left, 0..card − crop")
        green = ui.slider("Colour cast: green", "set_g", 0, lo, hi, where=m2, step=1,
                          help=f"added to the green channel, {lo}..{hi}")
        blue = ui.slider("Colour cast: blue", "set_b", 0, lo, hi, where=m2, step=1,
                         help=f"added to the blue channel, {lo}..{hi}")
        area = ui.slider("Vignette area", "set_area", 0.5, 0.0, 1.0, where=m3, step=0.025,
                         help="outer ring darkened, as a fraction of the half-diagonal, 0–1")
        kind = ui.select("Lens distortion kind", list(DISTORTION_KINDS), "set_kind", "barrel", where=m4,
                         help="barrel bulges the centre out, pincushion pulls it in")
    shifts = (int(red), int(green), int(blue))
    fig = _settings_figure(int(image_size), int(crop), int(top), int(left), shifts, float(area), float(strength),
                           kind, float(degree), float(angle), bool(flipped))
    cdf = _counts(int(image_size), int(crop))
    total = int(cdf["possible_changes"].iloc[-1])
    changed = [n for n, on in (("colour cast", any(shifts)), ("vignette", strength > 0 and area > 0),
                               ("lens distortion", degree > 0), ("rotation", angle != 0), ("flip", flipped)) if on]
    ui.takeaway((f"These settings change the crop by {', '.join(changed)}" if changed else
                 "At these settings every edit is the identity: move a slider") +
                f" — one of the {_sci(total)} combinations of all six edits (a {crop}-px crop of the {image_size}-px "
                "image and the five edits on it) that the paper's grids allow.")
    chart.plotly(fig, key="augment_settings")


def _table1(seed: int) -> None:
    b1, b2, _ = st.columns([1, 1, 3])
    cimg = ui.number("Image side (px)", "count_image", 512, where=b1, step=1, min_value=1, max_value=100_000,
                     help="side of the training image, px (the paper: 512)")
    ccrop = ui.number("Crop side (px)", "count_crop", 224, where=b2, step=1, min_value=1, max_value=100_000,
                      help="side of the square crop, px (the paper: 224); at most the image side")
    cdf = _counts(int(cimg), int(ccrop))
    part = cdf[cdf["paper"].notna()]
    ui.takeaway(_product_sentence(int(cimg), int(ccrop)))
    crop_row = cdf[cdf["augmentation"] == "crop"].iloc[0]
    same = int(part["matches"].sum())
    pairs = "; ".join(f"{plots.AUGMENT_LABELS.get(r.augmentation, r.augmentation)} {int(r.paper):,} (here "
                      f"{int(r.possible_changes):,})" for r in part.itertuples())
    if same == len(part) == 6:
        text = (f"Table 1: {pairs} — all six match, counted from the grids the ops draw from. The paper gives no "
                "product of them; ours is in the table below.")
    else:
        text = (f"Table 1: {pairs}. Cropping's count depends on the sizes: {int(crop_row['possible_changes']):,} "
                f"offsets for {ccrop} of {cimg} px, where the paper's 82,944 is (512 − 224)² for 224 of 512.")
    ui.paper_callout(text, "table1")
    st.metric("Rows matching the paper", f"{same} of {len(part)}",
              help="counts with a paper number at these sizes that equal it (the product is not in the paper)")
    ui.figure(plots.augment_counts_figure(cdf), cdf, "augment_counts")
    with st.expander("Table with the grids each count comes from"):
        named = cdf.assign(augmentation=cdf["augmentation"].str.replace("_", " "))  # "lens distortion"
        ui.people_table(named, "augment_counts_table", {
            "augmentation": ("Augmentation",), "possible_changes": ("Possible changes (here)",),
            "paper": ("Paper (Table 1)",), "matches": ("Matches the paper",),
            "grid": ("Grid", "", "the parameter values each count is the product of")})


def _throughput(seed: int) -> None:
    st.caption("Images per second of each op batched, against a per-image loop over the same images and "
               "parameters, measured now on this machine (same run; medians of 3).")
    d1, d2, d3 = st.columns(3)
    tb = ui.select_slider("Batch", [1, 2, 4, 8, 16, 32], "tp_batch", 8, where=d1,
                          help="images per call, 1–32 (the per-image loop calls once per image)")
    timg = ui.select("Image (px)", [256, 512], "tp_image", 256, where=d2, help="side of the input images")
    tcrop = ui.select("Crop (px)", [128, 224], "tp_crop", 224, where=d3, help="side of the crop the ops work on")
    params = dict(batch=tb, image=timg, crop=tcrop, seed=seed)

    def go(job: jobs.Job):
        return augmentation_throughput(batch=int(tb), image_size=int(timg), crop_size=int(tcrop), repeats=3,
                                       seed=seed, progress=job.progress)

    job = jobs.controls("Time augmentations", "tp_run", params, go, help="times every op both ways (seconds)")
    jobs.watch("tp_run", lambda j: None)
    if job is not None and job.error:
        st.error(job.error)
    done = jobs.last_result("tp_run")
    if done is None:
        ui.takeaway("Press **Time augmentations** to measure how much batching the ops speeds them up here.")
        return
    df, info = done.result
    if done.token != ui.params_token(params):
        st.caption("Timed with " + ui.described(done.params) +
                   "; press **Time augmentations** for the current choice.")
    whole = df[df["op"] == "all"].iloc[0]
    best = df.sort_values("speedup").iloc[-1]
    ui.takeaway(f"Batched {done.params['batch']} at a time, the whole pipeline runs {whole.batched_img_s:,.0f} "
                f"images/s, {whole.speedup:.2f}x the per-image loop; {plots.AUGMENT_LABELS.get(best.op, best.op)} "
                f"gains most ({best.speedup:.2f}x).")
    st.metric("Whole pipeline, batched", f"{whole.batched_img_s:,.0f} images/s",
              delta=f"{whole.speedup:.2f}x the per-image loop", delta_color="off", delta_arrow="off", help=info["device"])
    ui.figure(plots.augment_throughput_figure(df), df, "augment_throughput")
