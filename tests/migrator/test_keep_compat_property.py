"""`--keep-compat VERSION` over the steps of every bundled pack, on files of every old name in
every form migrate fixes (as `test_written_for.py` generates them, with the imports of symbols
that left their module too): a second run changes
nothing, `vam check` with the same `--to` finds nothing stale but what the run reported for a
human, and `--drop-compat VERSION` afterwards writes byte for byte what a plain migrate
writes."""

from __future__ import annotations

import random

import pytest

import rules
from migrator.core import findings as F
from migrator.core.resolver import Resolver
from migrator.rewrite.engine import Engine, Options
from tests.migrator.test_written_for import _fixable, _old_names, _stale

# Kept small for CI: per pack, at most this many (--from, --to, --keep-compat) runs.
_CASES = 8


def _cases(pack: rules.Pack) -> list[tuple[str | None, str | None, str]]:
    """(--from, --to, --keep-compat): code written for a release and kept working on it,
    taken to the next step or to the newest; and kept working on a release between --from and
    --to (the steps up to it are rewritten plainly). A seeded sample of the pairs of steps."""
    versions = [step.version for step in pack.steps]
    # Every name of the table in one file, kept for the first step (the rest are lanes).
    chosen = [(None, None, versions[0])]
    if len(versions) > 2:  # from the release before the last two steps to the newest
        chosen.append((versions[-3], None, versions[-3]))
    rest = [(version, versions[i + 1], version) for i, version in enumerate(versions[:-1])]
    rest += [(version, versions[i + 2], versions[i + 1]) for i, version in enumerate(versions[:-2])]
    count = min(len(rest), _CASES - len(chosen))
    return chosen + sorted(random.Random(20).sample(rest, count), key=str)


def _module_for(pack: rules.Pack, start: str | None, end: str | None) -> str:
    """Every old name valid at `start` that is not removed: imported (alone, and with its
    siblings in one statement), as a `mock.patch` target; as a chain and through a local name
    for its parent where migrate can rewrite those in place."""
    resolver = Resolver(pack, start, end)
    lines = ["from unittest import mock", "import importlib", ""]
    body = []
    siblings: dict[str, list[str]] = {}
    for i, name in enumerate(_old_names(pack, start, end)):
        if resolver.resolve(name).removed is not None:
            continue
        parent, _, leaf = name.rpartition(".")
        lines.append(f"from {parent} import {leaf} as n{i}")
        siblings.setdefault(parent, []).append(leaf)
        body.append(f'p{i} = mock.patch("{name}")')
        if resolver.resolve(parent).removed is None:
            body.append(f'm{i} = importlib.import_module("{parent}")')
        if not _fixable(resolver, name):
            continue
        lines.append(f"import {name.partition('.')[0]}")
        body.append(f"c{i} = {name}")
        if "." in parent and _fixable(resolver, name, parent):
            grand, _, mid = parent.rpartition(".")
            lines.append(f"from {grand} import {mid} as a{i}")
            body.append(f"u{i} = a{i}.{leaf}")
    lines += [f"from {parent} import {', '.join(sorted(set(leaves)))}"
              for parent, leaves in siblings.items() if len(set(leaves)) > 1]
    return "\n".join([*lines, "", *body]) + "\n"


def _engine(pack: rules.Pack, start: str | None, end: str | None, **options: object) -> Engine:
    return Engine(Resolver(pack, start, end), Options(**options))  # type: ignore[arg-type]


@pytest.mark.parametrize("pack_name", sorted(rules.bundled()))
def test_keep_compat_is_settled_check_clean_and_dropped_to_a_plain_migrate(
    pack_name: str,
) -> None:
    pack = rules.load_pack(pack_name)
    problems = []
    lanes = 0
    for start, end, version in _cases(pack):
        where = f"--from {start} --to {end} --keep-compat {version}"
        source = _module_for(pack, start, end)
        keep = {"keep_compat": version, "version_helper_module": "plugin_compat"}
        kept, found = _engine(pack, start, end, **keep).transform_python(source, None)
        lanes += kept.count(f'vllm_version_is("{version}")')
        again = _engine(pack, start, end, **keep).transform_python(kept, None)[0]
        dropped = _engine(pack, start, end, drop_compat=version).transform_python(kept, None)[0]
        plain = _engine(pack, start, end).transform_python(source, None)[0]
        if again != kept:
            problems.append(f"{where}: a second run changes the file")
        if dropped != plain:
            diff = [(a, b) for a, b in zip(plain.splitlines(), dropped.splitlines(), strict=False)
                    if a != b]
            problems.append(f"{where}: --drop-compat differs from a plain migrate: {diff[:3]}")
        told = {f.old for f in found if f.code == F.NEEDS_HUMAN}
        check = _engine(pack, None, end, report_only=True).transform_python(kept, None)[1]
        stale = _stale([f for f in check if f.old not in told])
        if stale:
            problems.append(f"{where}: check finds {stale[:3]} ({len(stale)} in all)")
    assert not problems, "\n".join(problems)
    assert lanes, "no dual lane was written: the sample proves nothing"


@pytest.mark.parametrize("pack_name", sorted(rules.bundled()))
def test_try_style_over_one_step_is_settled_and_dropped_to_a_plain_migrate(
    pack_name: str,
) -> None:
    """`--compat-style try` across one step (what `--drop-compat` collapses a try pair for:
    the old path moved in the first step after VERSION)."""
    pack = rules.load_pack(pack_name)
    versions = [step.version for step in pack.steps]
    pairs = list(zip(versions, versions[1:], strict=False))
    problems = []
    tries = 0
    for start, end in random.Random(20).sample(pairs, min(3, len(pairs))):
        where = f"--from {start} --to {end}"
        source = _module_for(pack, start, end)
        keep = {"keep_compat": start, "compat_style": "try", "version_helper_module": "h"}
        kept, _ = _engine(pack, start, end, **keep).transform_python(source, None)
        tries += kept.count("except ImportError:")
        if _engine(pack, start, end, **keep).transform_python(kept, None)[0] != kept:
            problems.append(f"{where}: a second run changes the file")
        dropped = _engine(pack, start, end, drop_compat=start).transform_python(kept, None)[0]
        if dropped != _engine(pack, start, end).transform_python(source, None)[0]:
            problems.append(f"{where}: --drop-compat differs from a plain migrate")
    assert not problems, "\n".join(problems)
    assert tries, "no try block was written: the sample proves nothing"


@pytest.mark.parametrize("pack_name", sorted(rules.bundled()))
def test_try_style_across_several_steps_is_dropped_to_a_plain_migrate(pack_name: str) -> None:
    """`--compat-style try` from a release to two or more steps later: the pairs vam writes
    cover moves of every step after VERSION up to --to, and `--drop-compat VERSION` collapses
    them all."""
    pack = rules.load_pack(pack_name)
    versions = [step.version for step in pack.steps]
    spans = [(v, versions[i + 2]) for i, v in enumerate(versions[:-2])]
    spans += [(versions[0], None)] if len(versions) > 2 else []
    problems = []
    tries = 0
    for start, end in random.Random(21).sample(spans, min(2, len(spans))):
        source = _module_for(pack, start, end)
        keep = {"keep_compat": start, "compat_style": "try", "version_helper_module": "h"}
        kept, _ = _engine(pack, start, end, **keep).transform_python(source, None)
        tries += kept.count("except ImportError:")
        dropped = _engine(pack, start, end, drop_compat=start).transform_python(kept, None)[0]
        if dropped != _engine(pack, start, end).transform_python(source, None)[0]:
            problems.append(f"--from {start} --to {end}: --drop-compat differs from a plain "
                            f"migrate ({dropped.count('except ImportError:')} try blocks left)")
    assert not problems, "\n".join(problems)
    assert tries or len(versions) < 3, "no try block was written: the sample proves nothing"
