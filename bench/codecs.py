"""Codec throughput benchmark; same as `paralab bench codecs` (see lab/codecs/bench.py)."""
import sys

from lab.cli import app

if __name__ == "__main__":
    sys.argv = [sys.argv[0], "bench", "codecs", *sys.argv[1:]]
    app()
