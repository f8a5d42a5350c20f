"""The top-level `themes/` folder ships as the package `fusion_tui.themes` (pyproject has the rest)."""

from setuptools import find_packages, setup

setup(
    packages=[*find_packages(include=["fusion_tui*"]), "fusion_tui.themes"],
    package_dir={"fusion_tui.themes": "themes"},
)
