"""Plotly figures built from experiment tables, by capability (docs/design.md rule 3: UIs only render these).

codecs, training, dropout, collectives (transfer too), deep_image (augmentations, fusion), plan, pays, race, step_through,
rounding (stochastic rounding; the planner's send-the-factors chart), kernels (the report card's roofline),
operators (work and average parallelism per convolution method),
timesplit (where the time went);
units has the byte and time labels; `refresh`
redraws a notebook FigureWidget in place."""
from types import ModuleType as _ModuleType
from .codecs import value_table_figure, error_bar_figure, error_histogram_figure, codec_speed_figure
from .codecs import table1_figure, block_figure, block_lesson_figure, decade_ticks, number_line_figure, FIELD_COLORS
from .training import TRAIN_AXES, training_curve_figure, reproduction_figure
from .fsdp import fsdp_run_bytes_figure
from .collectives import (transfer_figure, collective_time_figure, busbw_figure, allreduce_trace_figure,
                          error_at_scale_figure)
from .ops import op_model_figure
from .dropout import (DROPOUT_LABELS, dropout_mask_figure, drop_frequency_figure, search_trace_figure,
                      search_distribution_figure, layer_speedup_figure, dropout_table_figure, dropout_curve_figure,
                      dropout_pattern_figure)
from .deep_image import (AUGMENT_LABELS, augment_preview_figure, augment_counts_figure, augment_throughput_figure,
                         fusion_figure, fusion_curve_figure)
from .plan import plan_breakdown_figure, plan_speedup_figure, plan_layers_figure, codec_advice_figure
from .kernels import roofline_figure
from .operators import operators_figure
from .rounding import bias_figure, tiny_updates_figure, low_precision_figure, factor_figure
from .pays import pays_sweep_figure, pays_bars_figure
from .sharded import fsdp_bytes_figure, fsdp_row_frame
from .race import RACE_AXES, race_figure, race_pair_figure
from .step_through import step_through_figure, step_through_frames, step_traffic_figure
from .timesplit import time_split_figure, split_bars_figure
from .widgets import refresh

__all__ = sorted(n for n, v in globals().items() if not n.startswith('_') and not isinstance(v, _ModuleType))
