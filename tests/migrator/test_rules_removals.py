"""Every `[[step.removed]]` row of the bundled pack against its pair of released sdists: the
removed name must exist nowhere in the step's release under any name that `vam rules infer`'s
matching can pair it with (same name, identical body, or a body at least as similar as infer's
rename threshold), else the row hides a move. 0.29.0rc1 once called a module removed that had
moved into `ascend_store.backend` with its class renamed; this is the check that finds that.

A pairing the pack decided by hand is not a move (a rewrite with another interface, a copy of
a table): the row's hint names the paired name, so the reader sees the successor."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

import pytest

import rules
from migrator.core.sources import open_release
from migrator.infer.candidate import MAX_CANDIDATES
from migrator.infer.index import Definition, Index, build_indexes
from migrator.infer.modules import THRESHOLD
from migrator.infer.symbols import MIN_BODY_SHINGLES, Gains, best_similar
from tests.migrator.conftest import REPO
from tests.migrator.test_rules_early_history import EARLY_PAIRS
from tests.migrator.test_rules_history import PAIRS

ALL_PAIRS = [*EARLY_PAIRS, *PAIRS]


def _sdist(version: str) -> Path:
    sys.path.insert(0, str(REPO / "benchmarks"))
    from sdists import sdist  # fetched from the configured index, cached outside the repo

    return sdist(version)


@lru_cache(maxsize=2)
def _indexes(old: str, new: str) -> tuple[Index, Index, Gains]:
    before, after = open_release(_sdist(old)), open_release(_sdist(new))
    old_index, new_index = build_indexes(before.files, after.files, ["vllm_ascend"])
    return old_index, new_index, Gains(old_index, new_index)


def pairings(definition: Definition, home: str, gains: Gains) -> list[str]:
    """The NEW names infer's matchers could pair `definition` (of OLD module `home`) with:
    the few NEW modules that gained its name; else the gained definitions with its body; else
    the one gained definition of its kind whose body is most similar, above the threshold."""
    named = [f"{m}.{d.name}" for m, d in gains.by_name.get(definition.name, []) if m != home]
    if 0 < len(named) <= MAX_CANDIDATES or definition.kind == "variable":
        return named if len(named) <= MAX_CANDIDATES else []
    if definition.size >= MIN_BODY_SHINGLES:
        same = [f"{m}.{d.name}" for m, d in gains.by_digest.get(definition.digest, [])
                if d.kind == definition.kind]
        if same:
            return same
    gained = [(m, d) for hits in gains.by_name.values() for m, d in hits
              if d.kind == definition.kind and m != home]
    where = {id(d): m for m, d in gained}
    hit = best_similar(definition, [d for _, d in gained])
    return [f"{where[id(hit[0])]}.{hit[0].name}"] if hit else []


def _considered(defs: dict[str, Definition]) -> dict[str, Definition]:
    plain = {n: d for n, d in defs.items() if not n.startswith("__")}
    return {n: d for n, d in plain.items() if d.kind != "variable"} or plain


def survivors(old: Index, new: Index, gains: Gains, removed: str,
              covered: Callable[[str], bool]) -> list[str]:
    """Where `removed` (an OLD module, package or `module.name`) is in NEW, as infer could
    pair it; names that a longer row of the step covers (`covered`) are not looked for."""
    if old.has(removed):
        return _module_survivors(old, new, gains, removed, covered)
    module, _, name = removed.rpartition(".")
    now = new.modules.get(module)
    if now is not None and now.binds(name):
        return [f"{removed} (still bound)"]
    return pairings(old.modules[module].defs[name], module, gains)


def _module_survivors(old: Index, new: Index, gains: Gains, removed: str,
                      covered: Callable[[str], bool]) -> list[str]:
    out = []
    for dotted in sorted(m for m in old.modules if m == removed or m.startswith(removed + ".")):
        if new.has(dotted):
            out.append(f"{dotted} (still a module)")
            continue
        if covered(dotted):
            continue
        considered = _considered(old.modules[dotted].defs)
        landed: Counter[str] = Counter()
        for name, definition in considered.items():
            if not covered(f"{dotted}.{name}"):
                for target in pairings(definition, dotted, gains):
                    landed[target.rpartition(".")[0]] += 1
        out += [module for module, count in landed.items()
                if count / len(considered) >= THRESHOLD]
    return out


def _covered_by(step: rules.Step, removal: rules.Removal) -> Callable[[str], bool]:
    longer = [r.old for r in (*step.moves(), *step.removed)
              if r.old.startswith(removal.old + ".")]
    return lambda name: any(name == o or name.startswith(o + ".") for o in longer)


def _undecided(found: list[str], hint: str) -> list[str]:
    """Pairings the hint does not name (a named one is a recorded hand decision)."""
    return [f for f in found if f.split(" ")[0].rpartition(".")[2] not in hint
            and f.split(" ")[0] not in hint]


@pytest.mark.parametrize(("old", "new", "version"), ALL_PAIRS)
def test_every_removal_is_gone_from_its_release(old: str, new: str, version: str) -> None:
    step = rules.load_pack("vllm_ascend").step(version)
    old_index, new_index, gains = _indexes(old, new)
    hidden = {}
    for removal in step.removed:
        found = survivors(old_index, new_index, gains, removal.old, _covered_by(step, removal))
        if _undecided(found, removal.hint):
            hidden[removal.old] = found
    assert hidden == {}


def test_the_check_finds_a_module_that_moved_with_its_class_renamed() -> None:
    # The 0.29.0rc1 row as it was first shipped: mooncake_session_tracker "removed".
    old_index, new_index, gains = _indexes("0.28.0rc1", "0.29.0rc1")
    base = "vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store"
    found = survivors(old_index, new_index, gains, f"{base}.mooncake_session_tracker",
                      lambda name: False)
    assert found == [f"{base}.backend.session_tracker"]
    tracker = old_index.modules[f"{base}.mooncake_session_tracker"].defs["MooncakeSessionTracker"]
    assert pairings(tracker, f"{base}.mooncake_session_tracker", gains) == [
        f"{base}.backend.session_tracker.LayerwiseSessionTracker"]
    # A function that really left (no body like it anywhere in 0.29.0rc1) pairs with nothing.
    assert survivors(old_index, new_index, gains, f"{base}.metadata.is_block_key_layerwise",
                     lambda name: False) == []


def test_a_name_still_bound_in_the_release_is_no_removal() -> None:
    old_index, new_index, gains = _indexes("0.28.0rc1", "0.29.0rc1")
    name = "vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.metadata.ReqMeta"
    assert survivors(old_index, new_index, gains, name, lambda n: False) == [
        f"{name} (still bound)"]
