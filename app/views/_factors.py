"""The Planner's "send the factors, not the gradient" section (Ben-Nun & Hoefler, "Communication optimizations"):
per FC layer, B·(Cin + Cout) values of the factors (o_{l-1}, δ_l) against ∇w's Cin·Cout, with 8-bit ∇w and
PowerSGD rank r beside, the crossover batch B* = Cin·Cout / (Cin + Cout) marked."""
from __future__ import annotations

import streamlit as st

import _common as ui
from lab import plots
from lab.experiments import FACTOR_MODELS, factor_curves, factor_table

COLUMNS = {
    "layer": ui.Col("Layer"),
    "c_in": ui.Col("Cin", help="inputs of the FC layer (o_{l−1} per sample)"),
    "c_out": ui.Col("Cout", help="outputs of the FC layer (δ_l per sample)"),
    "grad_values": ui.Col("∇w values", help="Cin·Cout: what sending the gradient costs, whatever the batch"),
    "factor_values": ui.Col("Factor values", help="B·(Cin + Cout): the batch's inputs and output errors"),
    "crossover": ui.Col("Crossover B*", help="Cin·Cout / (Cin + Cout): below it the factors are smaller than fp32 "
                                             "∇w", format="%.1f"),
    "crossover_8bit": ui.Col("B* against 8-bit ∇w", help="B*/4: fp32 factors against ∇w in one byte a value",
                             format="%.1f"),
    "powersgd_values": ui.Col("PowerSGD values", help="(Cin + Cout)·r: rank-r factors P and Q, whatever the batch; "
                                                      "the data's factors beat them while B < r"),
    "down_crossover": ui.Col("B* back (all P workers' factors)", help="B*/P: receiving every worker's factors "
                                                                      "instead of w", format="%.1f"),
    "best_up": ui.Col("Fewest bytes up", help="of fp32 ∇w, 8-bit ∇w, PowerSGD rank r and fp32 factors"),
    "factor_bytes": ui.Col("Factor bytes", ui.BYTES, help="4 bytes a value"),
    "grad_bytes": ui.Col("∇w bytes (fp32)", ui.BYTES),
    "grad_8bit_bytes": ui.Col("∇w bytes (8-bit)", ui.BYTES),
    "down_w_values": ui.Col("w values back", help="Cin·Cout"),
    "down_factor_values": ui.Col("Factor values back", help="P·B·(Cin + Cout)"),
}


def factors_section(net: str, batch: int, gpus: int) -> None:
    """The section: a network with FC layers (the planner's, or Dettmers' MLP), its per-worker batch `batch` on
    `gpus` workers, a PowerSGD rank; the table, the chart and a takeaway from them."""
    with ui.folded("Send the factors, not the gradient (Hoefler): FC layers' crossover batch", "factors"):
        st.caption("An FC layer's ∇w over a batch is a sum of B outer products δ_l·o_{l−1}ᵀ: a worker can send the "
                   "B inputs o_{l−1} and output errors δ_l, B·(Cin + Cout) values, and let the parameter server "
                   "form ∇w (Cin·Cout values). Smaller while B < B* = Cin·Cout / (Cin + Cout).")
        names = list(FACTOR_MODELS)
        c1, c2 = st.columns(2)
        model = ui.select("Network (FC layers)", names, "factor_net", net if net in names else names[0], where=c1,
                          help="the planner's networks with FC layers and Dettmers 2016's 784×1024×1024×10 MLP: "
                               + ", ".join(names))
        rank = ui.number("PowerSGD rank r", "factor_rank", 4, where=c2, min_value=1, max_value=1024, step=1,
                         help="rank of PowerSGD's factors, 1..1024: (Cin + Cout)·r values a layer")
        df = factor_table(model, batch=batch, gpus=gpus, rank=int(rank))
        ui.people_table(df, "factor_table", COLUMNS, list(COLUMNS)[:10])
        curves = factor_curves(model, rank=int(rank))
        ui.figure(plots.factor_figure(curves, df), curves, "factor_curves")
        small = df[df.factor_values < df.grad_values]
        big = df.loc[df.crossover.idxmax()]
        ui.takeaway(f"At B = {batch:,} samples per worker ({gpus} workers), the factors are smaller than fp32 ∇w for "
                    f"{len(small)} of {len(df)} FC layers of {model}"
                    + (f" ({', '.join(small.layer)})" if len(small) else "")
                    + f"; the largest crossover is {big.layer}'s B* = {big.crossover:,.1f} ({big.c_in:,}×"
                    f"{big.c_out:,}). Against 8-bit ∇w the factors win only below B*/4 = {big.crossover_8bit:,.1f}, "
                    f"against PowerSGD rank {int(rank)} only below B = {int(rank)}; receiving all {gpus} workers' "
                    f"factors instead of w pays only below B*/P = {big.down_crossover:,.1f}.", key="takeaway-factors")
