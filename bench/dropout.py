"""Approximate Random Dropout layer benchmark; same as `paralab bench dropout` (see lab/dropout/bench.py)."""
import sys

from lab.cli import app

if __name__ == "__main__":
    sys.argv = [sys.argv[0], "bench", "dropout", *sys.argv[1:]]
    app()
