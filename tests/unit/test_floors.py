"""pyproject.toml's lower bounds are the versions the floors' CI leg (.ci/floors) installs and tests."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).parents[2]


def test_every_dependencys_lower_bound_is_pinned_in_the_floors_file() -> None:
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    bounds = {}
    for line in dependencies:
        requirement = Requirement(line)
        lower = [s.version for s in requirement.specifier if s.operator in (">=", "==")]
        bounds[canonicalize_name(requirement.name)] = Version(lower[0]) if lower else None
    pinned = {}
    for line in (ROOT / ".ci" / "floors.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.partition("==")
            pinned[canonicalize_name(name)] = Version(version)
    assert None not in bounds.values(), f"a dependency without a lower bound: {bounds}"
    assert pinned == bounds
