"""What deep-research runs on: the libraries it needs, the version of each installed, and the
range it supports, so that a bug report carries them (`deep-research --version`, the language
server's log) and a library outside its range is one sentence, not a traceback.

The ranges are the installed package's own metadata: pyproject.toml's, written once there.
Without that metadata (the sources run from a checkout or a bundle) the versions are still
shown, and nothing is refused. Reading the metadata costs ~0.1 s: only `--version`, `run`,
`serve` and `mcp` look (docs/decisions.md, issue 44).
"""

from __future__ import annotations

import platform
import sys
from dataclasses import dataclass
from functools import cache
from importlib import metadata

from . import __version__

DISTRIBUTION = "deep-research"


@dataclass(frozen=True)
class Library:
    name: str
    supported: str  # the range pyproject.toml gives, "" when the metadata is not there
    installed: str | None  # None: not installed

    @property
    def fits(self) -> bool:
        if self.installed is None:
            return False
        if not self.supported:
            return True
        from packaging.specifiers import InvalidSpecifier, SpecifierSet
        from packaging.version import InvalidVersion

        try:
            return SpecifierSet(self.supported).contains(self.installed, prereleases=True)
        except (InvalidSpecifier, InvalidVersion):
            return False

    @property
    def install(self) -> str:
        """The command that installs a supported version into the Python that runs deep-research."""
        return f"{sys.executable} -m pip install '{self.name}{self.supported}'"

    def sentence(self) -> str:
        """Why this library cannot be used, and what to do: for a library that does not fit."""
        found = f"{self.name} {self.installed} is installed" if self.installed else f"{self.name} is not installed"
        return (f"deep-research {__version__} needs {self.name} {self.supported or '(any version)'}, but {found}: "
                f"install a supported version with `{self.install}`, or reinstall deep-research, whose install "
                "brings them")


# What deep-research needs when no metadata says it (a checkout run with PYTHONPATH, the VS Code
# bundle): the names only, so that the versions are still shown.
KNOWN = ("pygls", "lsprotocol", "prompt-toolkit", "openai", "httpx", "trafilatura", "lxml-html-clean",
         "pypdf", "markdown-it-py", "mcp", "ddgs", "packaging")


@cache
def libraries() -> tuple[Library, ...]:
    """Every library deep-research needs at run time (extras left out), as installed here."""
    try:
        requires = metadata.requires(DISTRIBUTION) or []
    except metadata.PackageNotFoundError:
        requires = []
    wanted: dict[str, str] = {}
    if requires:
        from packaging.requirements import InvalidRequirement, Requirement

        for line in requires:
            try:
                requirement = Requirement(line)
            except InvalidRequirement:
                continue
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                bounds = sorted(requirement.specifier, key=lambda bound: bound.operator.startswith("<"))
                wanted[requirement.name] = ",".join(str(bound) for bound in bounds)  # lower bound first
    else:
        wanted = dict.fromkeys(KNOWN, "")
    return tuple(Library(name, supported, _installed(name)) for name, supported in wanted.items())


def _installed(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def library(name: str) -> Library:
    """What is known of one library deep-research needs (its range; its installed version)."""
    return next((found for found in libraries() if found.name == name), Library(name, "", _installed(name)))


def unfit(names: tuple[str, ...] = ()) -> list[Library]:
    """The libraries (all, or those named) whose installed version is outside their range."""
    return [library for library in libraries() if (not names or library.name in names) and not library.fits]


def report() -> str:
    """deep-research's version, Python's and the platform's, then each library with its range."""
    lines = [f"deep-research {__version__} (Python {platform.python_version()}, {platform.system()} {platform.machine()})"]
    for library in libraries():
        mark = "" if library.fits else "   <- outside the supported range" if library.installed else "   <- missing"
        supported = f" (supported: {library.supported})" if library.supported else ""
        lines.append(f"  {library.name} {library.installed or 'not installed'}{supported}{mark}")
    return "\n".join(lines)
