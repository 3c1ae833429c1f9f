"""`python -m lab ...` = the `paralab` CLI (torchrun runs modules: `torchrun ... -m lab bench collectives`)."""
from lab.cli import main

main()
