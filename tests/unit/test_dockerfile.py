"""The image builds every package of the project: the Dockerfile copies each one pyproject.toml
packages, and .dockerignore keeps none of them out of the build context (it once listed ``state``,
the default state dir's name, which is also the source package ``state/``)."""

from __future__ import annotations

import fnmatch
import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def packages() -> list[str]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    found = config["tool"]["setuptools"]["packages"]["find"]["include"]
    return [pattern.rstrip("*") for pattern in found]


def test_the_dockerfile_copies_every_package() -> None:
    dockerfile = (REPO / "Dockerfile").read_text()
    copied = set(re.findall(r"^COPY (\w+) \1$", dockerfile, flags=re.MULTILINE))
    assert sorted(set(packages()) - copied) == []


def test_dockerignore_keeps_no_package_out() -> None:
    ignored = [
        line.strip()
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    for package in packages():
        for module in (REPO / package).glob("*.py"):
            relative = module.relative_to(REPO).as_posix()
            hits = [
                p for p in ignored if fnmatch.fnmatch(relative, p) or relative.startswith(p + "/")
            ]
            assert hits == [], f"{relative} is kept out of the image by {hits}"
