"""The facts of a project's files, kept between runs in `migrator.core.indexcache` (kind
"verify-api-project"): one entry per project and reading (the folders given, the upstream
packages, the target version the guards were decided for, the guard names), holding each
file's facts under the sha256 of its bytes. A warm run parses only the files that changed.
`decode(encode(x)) == x`; `decode` raises ValueError on anything else.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from migrator.core import indexcache
from migrator.verify_api.project import Call, FileFacts, Method, ProjectClass, Use
from migrator.verify_api.signature import Signature

KIND = "verify-api-project"
CODE = tuple(Path(__file__).parent / name for name in ("project.py", "guards.py", "nodes.py",
                                                       "factcache.py", "signature.py"))


def key(*parts: str) -> str:
    return indexcache.files_key({}, *parts)


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def load(entry: str) -> dict[str, Any]:
    """{file sha256: encoded facts} of the entry (empty on a miss)."""
    stored = indexcache.load(KIND, entry, indexcache.code_tag(CODE))
    return stored if isinstance(stored, dict) else {}


def store(entry: str, payload: dict[str, Any]) -> None:
    indexcache.store(KIND, entry, indexcache.code_tag(CODE), payload)


def _use(u: Use) -> list[Any]:
    call = None if u.call is None else [u.call.positional, list(u.call.keywords)]
    return [u.line, u.col, u.scope, u.base, list(u.chain), call]


def _unuse(d: list[Any]) -> Use:
    line, col, scope, base, chain, call = d
    how = None if call is None else Call(int(call[0]), tuple(str(k) for k in call[1]))
    return Use(int(line), int(col), str(scope), str(base), tuple(chain), how)


def encode(facts: FileFacts) -> list[Any]:
    classes = [[c.qual, c.line, c.bases,
                [[m.name, m.sig.to_json(), m.line, m.col, [_use(u) for u in m.supers]]
                 for m in c.methods.values()],
                sorted(c.attrs), c.types, [_use(u) for u in c.reads]] for c in facts.classes]
    return [facts.module, classes, [_use(u) for u in facts.uses],
            [_use(u) for u in facts.writes]]


def decode(data: Any, path: str) -> FileFacts:
    """The facts `encode` wrote, for the file shown as `path`.

    Raises ValueError when `data` is not what `encode` writes."""
    try:
        module, classes, uses, writes = data
        facts = FileFacts(path, str(module), uses=[_unuse(u) for u in uses],
                          writes=[_unuse(u) for u in writes])
        for qual, line, bases, methods, attrs, types, reads in classes:
            cls = ProjectClass(str(qual), path, int(line), [str(b) for b in bases],
                               attrs=set(attrs), types=dict(types),
                               reads=[_unuse(u) for u in reads])
            for name, sig, m_line, m_col, supers in methods:
                cls.methods[name] = Method(name, Signature.from_json(sig), int(m_line),
                                           int(m_col), [_unuse(u) for u in supers])
            facts.classes.append(cls)
    except (TypeError, ValueError, KeyError, IndexError, AttributeError) as exc:
        raise ValueError(f"not a verify-api project entry: {exc!r}") from None
    return facts
