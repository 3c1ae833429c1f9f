"""Deep Image page (Wu et al. 2015 §4.1, Table 1): the augmentations — a preview grid, every augmentation at
parameters you set, Table 1's counts of possible changes, and the batched throughput here."""
import streamlit as st

import _common as ui
from lab import plots
from lab.experiments import (COLOR_SHIFTS, DISTORTION_DEGREES, DISTORTION_KINDS, MAX_DISTORTION_DEGREE, ROTATION_ANGLES,
                             Preview, augmentation_counts, augmentation_preview, augmentation_settings,
                             augmentation_throughput, test_card)

AUGS = list(plots.AUGMENT_LABELS)  # crop, color_cast, vignette, lens_distortion, rotation, flip, all


def render() -> None:
    """Render the page (called by Home's navigation on every rerun)."""
    st.title("Deep Image: augmentations")
    st.caption("Wu et al. 2015 (Baidu's Deep Image) §4.1: color casting, vignetting, lens distortion, rotation, flipping "
               "and cropping, drawn on a synthetic test card; Table 1 counts the possible changes of each.")
    seed = int(ui.seed(where=st.columns([1, 4])[0]))


    @st.cache_resource(max_entries=16)
    def preview_figure(image_size: int, crop: int, samples: int, chosen: tuple, seed: int):
        pv = augmentation_preview(test_card(image_size), samples=samples, crop_size=crop, seed=seed)
        return plots.augment_preview_figure(Preview(pv.original, {k: pv.panels[k] for k in chosen}, pv.seed))


    @st.cache_data(max_entries=16)
    def counts(image_size: int, crop: int):
        return augmentation_counts(image_size, crop)


    def preview_tab():
        st.caption("Each augmentation drawn several times (seeded) on a synthetic test card; the grid lines show "
                   "distortion and rotation, the disc shows flips and crops. Colour casting, vignetting, distortion, "
                   "rotation and flips work on the centre crop; the last row is the whole pipeline (crop first).")
        a1, a2, a3, a4 = st.columns([3, 1, 1, 1])
        chosen = ui.multiselect("Augmentations", AUGS, "augs", AUGS, where=a1, format_func=plots.AUGMENT_LABELS.get)
        samples = ui.slider("Draws each", "draws", 3, 1, 8, where=a2, step=1)
        image_size = ui.select("Test card (px)", [64, 128, 256, 512], "card", 256, where=a3)
        crop = ui.number("Crop (px)", "crop", 224, where=a4, step=8,
                         help="side of the square crop; the paper crops 224 of 512")
        if not chosen:
            st.info("Pick at least one augmentation.")
        else:
            fig = preview_figure(int(image_size), int(crop), int(samples), tuple(chosen), seed)
            ui.figure(fig, None, "augment_preview")


    @st.cache_resource(max_entries=16)
    def settings_figure(image_size: int, crop: int, top: int, left: int, shifts: tuple, area: float, strength: float,
                        kind: str, degree: float, angle: float, flipped: bool):
        pv = augmentation_settings(test_card(image_size), crop_size=crop, top=top, left=left, shifts=shifts, area=area,
                                   strength=strength, kind=kind, degree=degree, angle=angle, flipped=flipped)
        return plots.augment_preview_figure(pv)


    def settings_tab():
        st.caption("Every augmentation at the parameters you set, then all of them in the pipeline's order (crop "
                   "first). Zero is the identity. The paper's grids: shifts -20..20 per channel, rotations of "
                   f"±{max(ROTATION_ANGLES)} degrees, distortion degrees up to {max(DISTORTION_DEGREES)}; the sliders "
                   "go further so the effects are easy to see.")
        c1, c2, c3, c4 = st.columns(4)
        image_size = ui.select("Test card (px)", [64, 128, 256, 512], "set_card", 256, where=c1)
        crop = ui.number("Crop (px)", "set_crop", 224, where=c1, step=8, help="side of the square crop")
        top = ui.number("Crop top", "set_top", 16, where=c1, step=1, min_value=0)
        left = ui.number("Crop left", "set_left", 16, where=c1, step=1, min_value=0)
        lo, hi = min(COLOR_SHIFTS), max(COLOR_SHIFTS)
        shifts = tuple(int(ui.slider(f"Colour cast: {ch}", f"set_{ch[0].lower()}", 0, lo, hi, where=c2, step=1))
                       for ch in ("Red", "Green", "Blue"))
        area = ui.slider("Vignette area", "set_area", 0.5, 0.0, 1.0, where=c3, step=0.025,
                         help="outer ring darkened, as a fraction of the half-diagonal")
        strength = ui.slider("Vignette strength", "set_strength", 0.0, 0.0, 1.0, where=c3, step=0.02,
                             help="brightness removed at the corners")
        kind = ui.select("Lens distortion", list(DISTORTION_KINDS), "set_kind", "barrel", where=c4)
        degree = ui.slider("Distortion degree", "set_degree", 0.0, 0.0, float(MAX_DISTORTION_DEGREE), where=c4,
                           step=0.01)
        angle = ui.slider("Rotation (degrees)", "set_angle", 0, -45, 45, where=c4, step=1)
        flipped = ui.checkbox("Horizontal flip", "set_flip", False, where=c4)
        fig = settings_figure(int(image_size), int(crop), int(top), int(left), shifts, float(area), float(strength),
                              kind, float(degree), float(angle), bool(flipped))
        ui.figure(fig, None, "augment_settings")


    def counts_tab():
        st.caption("Possible changes per augmentation counted from the grids the ops draw from, the paper's Table 1 "
                   "beside (cropping's count depends on the sizes; the paper's is 224 of 512).")
        b1, b2, _ = st.columns([1, 1, 3])
        cimg = ui.number("Image side (px)", "count_image", 512, where=b1, step=1)
        ccrop = ui.number("Crop side (px)", "count_crop", 224, where=b2, step=1)
        cdf = counts(int(cimg), int(ccrop))
        part = cdf[cdf["paper"].notna()]
        st.metric("Rows matching the paper", f"{int(part['matches'].sum())} of {len(part)}",
                  help="the product of all counts (last row) is not in the paper")
        ui.figure(plots.augment_counts_figure(cdf), cdf, "augment_counts")
        ui.table(cdf, "augment_counts_table")


    def throughput_tab():
        st.caption("Images/s of each op batched against a per-image loop over the same images and parameters, "
                   "measured now on this machine (same run; medians).")
        d1, d2, d3, _ = st.columns([1, 1, 1, 2])
        tb = ui.select_slider("Batch", [1, 2, 4, 8, 16, 32], "tp_batch", 8, where=d1)
        timg = ui.select("Image (px)", [256, 512], "tp_image", 256, where=d2)
        tcrop = ui.select("Crop (px)", [128, 224], "tp_crop", 224, where=d3)
        params = [tb, timg, tcrop, seed]
        if ui.run_button("Time augmentations", "tp_run", params):
            cb = ui.progress()
            df, info = ui.cached_run("augment_throughput", params, lambda: augmentation_throughput(
                batch=int(tb), image_size=int(timg), crop_size=int(tcrop), repeats=3, seed=seed, progress=cb))
            cb(1.0, "done")
            whole = df[df["op"] == "all"].iloc[0]
            st.metric("Whole pipeline, batched", f"{whole.batched_img_s:,.0f} images/s",
                      delta=f"{whole.speedup:.2f}x the per-image loop", delta_color="off", help=info["device"])
            ui.figure(plots.augment_throughput_figure(df), df, "augment_throughput")


    tabs = st.tabs(["Preview grid", "Set the parameters", "Table 1 counts", "Throughput here"])
    for tab, section in zip(tabs, (preview_tab, settings_tab, counts_tab, throughput_tab)):
        with tab:
            ui.shown(section)
