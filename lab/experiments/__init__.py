"""The only door for the UIs (docs/design.md rules 3-4): one function per experiment, each with keyword
arguments and a `progress` callback, returning tidy pandas tables; plus the choice lists the UIs show
(`choices`: codecs, algorithms, links, data sets, dropout kinds, ...) and the one result writer
(`results`). `app/`, `notebooks/` and `lab/cli/` import this package, `lab.plots` and `lab.backend`
only; tests/test_layers.py runs the import-linter contracts that keep it so.

Every name is imported plainly from its module below, so importing this package imports all of them, torch
and the plugin registries included (about 2 core-seconds, half of it torch): a UI pays that once, at its
start. `paralab --help` pays it too, since the CLI's option defaults and choice lists come from here.
`ALGORITHMS` and `CLUSTER_ALGORITHMS` are read from the registries on every access, so a plugin registered
later is in them.

    collectives  transfer and allreduce sweeps (model and measured), the step trace, error at scale
    step_through one allreduce on 2..8 ranks, message by message: buffers, bytes per link, codec error, busbw
    trace        the step-through as tables (`paralab trace`): messages, bytes per link and rank, algbw/busbw
    timesplit    where the time went: per-rank split (wire, waiting, codec, Python) and timeline from --trace
    benchmarks   `paralab bench ...`: the nccl-tests-style allreduce sweep, Figure 2 transfer, compressed
                 allreduce, codec speed
    errors       codec error tables, histograms, speed, captured tensors; codec_table1: Dettmers 2016 Table 1
    bits         the bit explorer (Float Toy): one code of a hardware float, value table or block-scaled format, bit
                 by bit; a typed value in every format; the paper types' bit patterns field by field (Figure 1)
    rounding     stochastic rounding against nearest on any grid: bias, tiny updates, low-precision training
    topk_assumption  Alistarh et al. 2018's Assumption 1: ||TopK(mean) - mean(TopK)|| / ||mean|| against P and k
    spread       the spread of repeated measurements: the median's 95 % interval, within noise or not
    operators    Ben-Nun & Hoefler 2018's operator level: work, depth and W/D of FC and convolution layers, each convolution
                 method checked against F.conv2d and timed, micro-batching (µ-cuDNN)
    training     simulated/DDP training curves, consistency models, the §3.4 reproduction
    fsdp         FSDP2 with codecs on its all-gather / reduce-scatter beside fp32 FSDP2 and DDP
    parallelism  pipeline, tensor, hybrid and expert parallelism on real ranks (every registered strategy)
    dropout      Song et al. 2019: patterns, Algorithm 1, layer speedup, MLP/LSTM tables
    deep_image   Wu et al. 2015: augmentations, multi-scale fusion; plan: the parallelism planner
    pays         does compression pay on a two-level cluster against bf16
    sharded      what FSDP / ZeRO++ sends per step, and ZeRO++'s 3M -> 0.75M volume
    converge     time to accuracy: steps to fp32's target per codec spec, penalty with CIs
    race         the race to the target: converge curves against steps and modelled time, lessons
"""
from __future__ import annotations

from typing import Any

from . import choices, pays
from .inputs import check_backend, check_range
from .distributions import sample, parse as parse_distribution
from .errors import (FIRST_CODECS, error_metrics, error_table, error_histogram, codec_speed, capture_tensors, load_tensor,
                     CAPTURE_KINDS, block_view, block_scaling_lesson, lesson_data, BLOCK_PICKS, BLOCK_LESSON_CODECS,
                     BLOCK_LESSON_DATA)
from .bits import (CodeView, FLOATS, check_code, code_bits, compare_formats, digits as format_digits, element_format,
                   explorable, explore, grid, kind as format_kind, number_line, requantize_block, round_to_code,
                   PAPER_TYPES, MANTISSA_BAND, WORKED_EXAMPLES, mantissa_band, paper_code, paper_codes_of,
                   worked_examples)
from .rounding import (ROUNDINGS, bias_sweep, check_format as check_rounding_format,
                       grid_formats as rounding_formats, low_precision_training, tiny_updates)
from .spread import median_interval, separable
from .topk_assumption import topk_assumption, RATIOS as TOPK_ASSUMPTION_RATIOS
from .codec_table1 import (table1, PAPER_TABLE1, NOTE as TABLE1_NOTE, TYPES as TABLE1_TYPES,
                           EXTENDED_TYPES as BLOCK_SCALED_TYPES)
from .catalog import check_codec_spec, codec_catalog, codec_spec
from .collectives import (algorithm_catalog, collective_sweep, error_at_scale, transfer_sweep, transfer_model,
                          within_noise,
                          collective_model, allreduce_trace, PAPER_CODEC_NS, op_catalog, op_names, op_model,
                          OpBenchmark, op_benchmark, format_op_table, op_rows)
from .step_through import (StepThrough, step_through, step_algorithms, step_codecs, traffic_summary, step_time,
                           busbw_table, algorithm_traffic, STEP_P, STEP_VALUES, MAX_VALUES, op_step_through,
                           op_busbw_text, OP_BUSBW_WHY)
from .trace import TraceTables, trace_tables, trace_takeaway, TRACE_SIZE
from .timesplit import (TimeSplit, time_split, split_table, split_takeaway, timeline_table, trace_summary, RANGE_KINDS,
                        LIVE_CODECS, LIVE_VALUES, load_time_split, COMMITTED as TIME_SPLIT_RESULT)
from .benchmarks import (parse_size, size_sweep, format_collectives, in_torchrun, CollectivesBenchmark,
                         collectives_benchmark, collective_rows, transfer_rows, transfer_benchmark,
                         compressed_benchmark, codec_bench_sizes, codec_benchmark)
from .training import (TrainConfig, TrainResult, train, training_curves, codec_curves, consistency_curves,
                       consistency_names, ddp_comparison, reproduction_summary, ddp_training, reproduction, dataset_info,
                       check_dataset)
from .fsdp import fsdp_training, fsdp_settings, fsdp_run_codecs, FSDP_RUN_COLLECTIVES
from .parallelism import (DATA_PARALLEL_MODES, ParallelResult, parallel_strategies, strategy_options, option_modes,
                          parse_setting,
                          strategy_catalog, parallel_settings, check_link_rate, parallel_training,
                          partial_parallel_summary, schedule_names, planned_timeline, bubble_formula, bubble_of,
                          pipeline_fit)
from .dropout import (pattern_masks, drop_frequency, search_trace, layer_speedup, mlp_table, lstm_corpora, lstm_table,
                      KIND_LABELS, MODEL_KINDS, LAYER_KINDS, DEFAULT_TILE, PAPER_MLP_TABLE1, TABLE1_HIDDEN,
                      PAPER_LSTM_TABLE2, DEFAULT_RATES)
from .dropout_warps import warp_divergence, warp_grid, element_wise_skip_fraction
from .dropout_submodels import sub_model_counts, tile_sizes
from .dropout_batch import lstm_batch_sweep
from .operators import (conv_work_depth_table, fc_work_depth_table, depth_growth, time_conv_methods,
                        microbatch_choice, operators_takeaway)
from .deep_image import (test_card, Preview, augmentation_preview, augmentation_settings, augmentation_counts,
                         augmentation_throughput, FusionResult, multiscale_fusion, Figure2, deep_image_figure2)
from .plan import DEFAULT_GPUS, planner_sweep, planner_breakdown, planner_advice, advice_time_to_accuracy, paper_checks
from lab.plan.factors import FACTOR_MODELS, crossover_batch, factor_curves, factor_table
from .pays import (INTRA_LINKS, INTER_LINKS, LINK_ALIASES, PAYS_BANDWIDTHS, PAPER_PAYS, PaysResult,
                   does_compression_pay, pays_takeaway, nvls_table, best_words)
from .choices import (LINKS, custom_link, codec_names, codec_help, get_codec, TableCodec, DATASETS, CORPORA, DataError,
                      CommError, USER_ERRORS, check_rate, CONSISTENCY_KINDS, CONSISTENCY_GRAPHS, DEVICES, MODELS, STRATEGIES, crossover,
                      custom_device, get_model, link_presets, resolve_link, COLOR_SHIFTS, ROTATION_ANGLES,
                      DISTORTION_DEGREES, DISTORTION_KINDS, MAX_DISTORTION_DEGREE)
from .sharded import (PAR_STRATEGIES, ZERO_PP_SWITCHES, ZERO_PP_DEFAULT, FSDP_ALGORITHMS, FSDP_COLLECTIVES,
                      PAPER_ZEROPP_VOLUME, fsdp_codecs, parse_zero_pp, fsdp_model, fsdp_traffic, fsdp_takeaway,
                      zeropp_volume)
from .kernel_report import kernel_report, kernel_report_table, kernel_measure
from .results import jsonable, write_result, results_dir, check_writable, RESULTS_ENV
from .converge import (converge, converge_config, convergence_summary, converge_takeaway, ConvergeResult,
                       ConvergeError, Penalty, load_penalties, result_name, expand_specs, codec_coverage,
                       converge_tasks, converge_task_descriptions, CONVERGE_MODES, converge_modes)
from .race import (race, race_lessons, step_times, modelled_seconds, committed_race_data, race_data, RaceResult,
                   RACE_LESSON_SPECS, RACE_LIVE_DEFAULT, RACE_COMMITTED_DEFAULT, race_live_specs)


def __getattr__(name: str) -> Any:
    """The choice lists read from a registry on every access, so a plugin registered later is in them."""
    if name == "ALGORITHMS":
        return choices.ALGORITHMS
    if name == "CLUSTER_ALGORITHMS":
        return pays.CLUSTER_ALGORITHMS
    if name == "CONVERGE_TASKS":
        return converge_tasks()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
