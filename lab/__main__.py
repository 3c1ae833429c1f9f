"""`python -m lab ...` and the `paralab` script: the CLI, lab.cli.main (torchrun runs modules: `torchrun ... -m lab
bench collectives`)."""
import gc


def run() -> None:
    """lab.cli.main, with its imports (torch, pandas, typer: ~2 core-seconds) made while the garbage collector is off,
    then frozen: its full collections walked them ~14 % of the import time, and again at every later full
    collection of the run (~20 % of a short command's CPU was the collector's)."""
    gc.disable()
    try:
        from lab.cli import main
    finally:
        gc.freeze()
        gc.enable()
    main()


if __name__ == "__main__":
    run()
