"""One function per experiment the UIs offer; each returns tidy pandas tables (DESIGN.md rule 4)."""
from .collectives import collective_sweep, error_at_scale, transfer_sweep
from .distributions import parse as parse_distribution, sample
from .errors import error_metrics, error_table
from .table1 import NOTE as TABLE1_NOTE, PAPER_TABLE1, table1

__all__ = ["error_table", "error_metrics", "sample", "parse_distribution", "table1", "PAPER_TABLE1",
           "TABLE1_NOTE", "collective_sweep", "error_at_scale", "transfer_sweep"]
