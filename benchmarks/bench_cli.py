"""The benchmarks' command lines: `--help` shows the whole module docstring (how to run it,
what it measures, what it needs) and every option's default."""

from __future__ import annotations

import argparse


class _HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """The docstring as written, plus "(default: ...)" after each option's help."""


def parser(doc: str | None) -> argparse.ArgumentParser:
    """An `ArgumentParser` whose description is `doc` (a module's `__doc__`)."""
    return argparse.ArgumentParser(description=doc, formatter_class=_HelpFormatter)
