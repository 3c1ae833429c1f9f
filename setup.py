"""The wheel's package data that lives outside lab/ in the repository (its top-level layout is fixed,
docs/design.md): kernels/ becomes lab/kernels, bench/results/ lab/reference and app/ lab/app, found at
run time by `lab.packaged.shipped`. Everything else about the distribution is in pyproject.toml."""
from setuptools import find_packages, setup

OUTSIDE = {"lab.kernels": "kernels", "lab.reference": "bench/results", "lab.app": "app"}

setup(
    packages=find_packages(include=["lab", "lab.*"]) + list(OUTSIDE),
    package_dir=OUTSIDE,
    package_data={
        "lab.kernels": ["*.cu", "*.cuh"],
        "lab.reference": ["*.json"],
        # the dashboard: its modules, its views, the chart library it serves (app/static) and its Streamlit
        # settings, read from the entry point's folder when it is started from anywhere else
        "lab.app": ["*.py", "*.js", "views/*.py", "static/*", ".streamlit/config.toml"],
    },
    exclude_package_data={"lab.reference": ["*.partial.json"]},
)
