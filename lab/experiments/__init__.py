"""One function per experiment the UIs offer; each returns tidy pandas tables (DESIGN.md rule 4)."""
from .catalog import check_codec_spec, codec_catalog, codec_spec
from .collectives import algorithm_catalog, collective_sweep, error_at_scale, transfer_sweep
from .deep_image import (augmentation_counts, augmentation_preview, augmentation_settings, augmentation_throughput,
                         multiscale_fusion)
from .distributions import parse as parse_distribution, sample
from .dropout import (PAPER_LSTM_TABLE2, PAPER_MLP_TABLE1, drop_frequency, layer_speedup, lstm_corpora, lstm_table,
                      mlp_table, pattern_masks, search_trace)
from .errors import error_metrics, error_table
from .inputs import check_range
from .plan import paper_checks, planner_advice, planner_breakdown, planner_sweep
from .table1 import NOTE as TABLE1_NOTE, PAPER_TABLE1, table1
from .training import codec_curves, consistency_curves, ddp_comparison, reproduction, training_curves

__all__ = ["codec_catalog", "codec_spec", "check_codec_spec", "check_range", "error_table", "error_metrics", "sample",
           "parse_distribution", "table1", "PAPER_TABLE1",
           "TABLE1_NOTE", "algorithm_catalog", "collective_sweep", "error_at_scale", "transfer_sweep",
           "training_curves", "codec_curves", "consistency_curves", "ddp_comparison", "reproduction",
           "pattern_masks", "drop_frequency", "search_trace", "layer_speedup", "mlp_table", "lstm_table",
           "lstm_corpora",
           "PAPER_MLP_TABLE1", "PAPER_LSTM_TABLE2",
           "augmentation_preview", "augmentation_settings", "augmentation_counts", "augmentation_throughput", "multiscale_fusion",
           "planner_sweep", "planner_breakdown", "planner_advice", "paper_checks"]
