"""Snapshot baselines live in the repository's top-level `snapshots/` folder, one folder per test
module (`snapshots/<test module>/<test name>.svg`), as the design card lays out.

pytest-textual-snapshot's `snap_compare` asks syrupy's `snapshot` fixture for its SVG extension;
this `snapshot` hands out the same extension with its folder moved, so comparing, updating
(`make snapshot-update`) and syrupy's unused-snapshot report all use `snapshots/`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pytest_textual_snapshot import SVGImageExtension
from syrupy.assertion import SnapshotAssertion
from syrupy.extensions.base import AbstractSyrupyExtension

BASELINES = Path(__file__).resolve().parents[2] / "snapshots"


class TopLevelSVGExtension(SVGImageExtension):
    @classmethod
    def dirname(cls, *, test_location: Any) -> str:
        return str(BASELINES / test_location.basename)


class _TopLevelBaselines(SnapshotAssertion):
    def use_extension(
        self, extension_class: type[AbstractSyrupyExtension] | None = None
    ) -> SnapshotAssertion:
        if extension_class is SVGImageExtension:
            extension_class = TopLevelSVGExtension
        return super().use_extension(extension_class)


@pytest.fixture
def snapshot(snapshot: SnapshotAssertion) -> SnapshotAssertion:
    return _TopLevelBaselines(
        session=snapshot.session,
        extension_class=snapshot.extension_class,
        test_location=snapshot.test_location,
        update_snapshots=snapshot.update_snapshots,
    )
