"""What NEW gained, and where a lost definition went under another name.

A rename is a gained definition of the same kind that accepts every call the lost one did
(`calls.accepts`: a replacement with other fields or arguments is reported, not rewritten)
and is, in order: the most similar body in the module the name's module now is
(>= RENAME_SIMILARITY, unique); else the most similar body anywhere in NEW when it stands
out (>= RENAME_FLOOR and at least twice the runner-up's score); else, in that module, the one
definition whose name differs by a typo or a word (`calls.NAME_SIMILARITY`).
"""

from __future__ import annotations

from collections import Counter, defaultdict

from migrator.infer.calls import NAME_SIMILARITY, accepts, close_names, resolved
from migrator.infer.index import Definition, Index, Module, similarity

RENAME_SIMILARITY = 0.6  # Jaccard of token trigrams; edited-but-same functions score higher
RENAME_FLOOR = 0.4  # anywhere in NEW: a rewritten body (more than half its trigrams new)...
RENAME_MARGIN = 0.5  # ...counts when the runner-up scores at most half of it
MIN_BODY_SHINGLES = 6  # bodies smaller than this (`pass`, `return None`) match anything
SHORTLIST = 24  # candidates scored exactly per lost body, by shared sketch hashes

Hit = tuple[str, Definition, float, float]  # module, definition, score, runner-up's score


def distinctive(definition: Definition) -> bool:
    return definition.kind != "variable" and definition.size >= MIN_BODY_SHINGLES


class Gains:
    """Every definition NEW gained, by name and by body digest, as (module, Definition)."""

    def __init__(self, old: Index, new: Index, first_party: set[str] | None = None) -> None:
        self.old, self.new = old, new
        # Top-level packages of either release: an import from anything else is third-party.
        self.first_party = first_party or {m.split(".")[0] for m in (*old.modules, *new.modules)}
        self.by_name: dict[str, list[tuple[str, Definition]]] = defaultdict(list)
        self.by_digest: dict[str, list[tuple[str, Definition]]] = defaultdict(list)
        self.kept: dict[str, list[tuple[str, Definition]]] = defaultdict(list)
        self._bodies: list[tuple[str, Definition]] = []
        self._postings: dict[int, list[int]] = defaultdict(list)
        for dotted in sorted(new.modules):
            previous = old.modules.get(dotted)
            for name, definition in sorted(new.modules[dotted].defs.items()):
                if previous is not None and name in previous.defs:
                    self.kept[name].append((dotted, definition))
                    continue
                self.by_name[name].append((dotted, definition))
                if distinctive(definition):
                    self.by_digest[definition.digest].append((dotted, definition))
                    for h in definition.sketch:
                        self._postings[h].append(len(self._bodies))
                    self._bodies.append((dotted, definition))

    def compatible(self, home: str, lost: Definition, module: str, found: Definition) -> bool:
        """Whether `found` (of NEW `module`) accepts every call of `lost` (of OLD `home`)."""
        before = self.old.modules.get(home)
        after = self.new.modules.get(module)
        old = resolved(lost, before.defs) if before else lost.params
        new = resolved(found, after.defs) if after else found.params
        return accepts(old, new)

    def anywhere(self, home: str, lost: Definition) -> Hit | None:
        """The gained body most like `lost` in all of NEW, when it stands out."""
        if not distinctive(lost):
            return None
        shared: Counter[int] = Counter()
        for h in lost.sketch:
            shared.update(self._postings.get(h, ()))
        scored = []
        for i, _ in shared.most_common(SHORTLIST):
            module, found = self._bodies[i]
            if found.kind == lost.kind and module != home:
                scored.append((similarity(lost, found), module, found.name, found))
        scored.sort(key=lambda t: (-t[0], t[1], t[2]))
        if not scored or scored[0][0] < RENAME_FLOOR:
            return None
        runner_up = scored[1][0] if len(scored) > 1 else 0.0
        score, module, _, found = scored[0]
        if runner_up > score * RENAME_MARGIN or not self.compatible(home, lost, module, found):
            return None
        return module, found, score, runner_up


def best_similar(
    lost: Definition, gained: list[Definition]
) -> tuple[Definition, float, float] | None:
    """(best, its score, the runner-up's score) when best >= RENAME_SIMILARITY and unique."""
    scored = sorted(((similarity(lost, d), d.name, d) for d in gained), key=lambda t: (-t[0], t[1]))
    if not scored or scored[0][0] < RENAME_SIMILARITY:
        return None
    runner_up = scored[1][0] if len(scored) > 1 else 0.0
    if runner_up == scored[0][0]:
        return None
    return scored[0][2], scored[0][0], runner_up


def gained_in(now: Module, old: Index, since: Module | None = None) -> list[Definition]:
    """The definitions `now` has that its OLD self (`since`, default: the OLD module of the
    same name) did not."""
    previous = since if since is not None else old.modules.get(now.dotted)
    return [d for n, d in sorted(now.defs.items()) if previous is None or n not in previous.defs]


def in_module(
    home: str, lost: Definition, now: Module, gained: list[Definition], gains: Gains
) -> Hit | None:
    """A rename inside `now`: by similar body, else by a close name; both must accept the
    old calls."""
    same_kind = [d for d in gained if d.kind == lost.kind]
    hit = best_similar(lost, same_kind)
    if hit is not None and gains.compatible(home, lost, now.dotted, hit[0]):
        return now.dotted, hit[0], hit[1], hit[2]
    close = [
        d
        for d in same_kind
        if close_names(lost.name, d.name) >= NAME_SIMILARITY
        and gains.compatible(home, lost, now.dotted, d)
    ]
    if len(close) == 1:
        return now.dotted, close[0], -1.0, 0.0  # score -1: by name, not by body
    return None
