"""An outside paralab plugin package: `codec` (sign + scale), `allreduce` (naive: every rank sends its
vector to every other rank) and `all_gather` (naive: every rank sends its row to every other rank),
found by paralab through the entry points in pyproject.toml."""
