"""The names a module of a source tree binds at its top, star imports followed, for
`vam rules validate --against` and the check `vam rules infer` runs on its table
(`migrator.core.tables.check_against`, which reads plain bindings itself).

The answer is verify-imports' own (`Project.namespace`): `from .x import *` binds x's literal
`__all__`, else every name x binds that does not start with `_`, x's star imports followed in
turn; a cycle is cut where it closes and a chain deeper than `project.MAX_STAR_DEPTH` is not
followed further. So `vllm.distributed.get_tp_group`, served by `from .parallel_state import *`
in vllm/distributed/__init__.py, exists for both commands alike.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

from migrator.verify_imports.discovery import NAMESPACE, package_layout
from migrator.verify_imports.project import Project


class TreeNames:
    """`names(tree, module)`: what `module` of the tree at `tree` binds (empty when the tree
    has no such module with source). Each top-level package of a tree is indexed once and each
    file parsed at most once, on demand."""

    def __init__(self) -> None:
        self._projects: dict[tuple[Path, str], Project] = {}

    def __call__(self, tree: Path, module: str) -> Collection[str]:
        top = module.partition(".")[0]
        project = self._projects.get((tree, top))
        if project is None:
            # A file map, even empty, means "what ships": no packaging config is read.
            project = Project(package_layout(tree, [top]), {})
            self._projects[tree, top] = project
        found = project.modules.get(module)
        if found is None or found.kind == NAMESPACE:
            return ()
        return project.namespace(module).bindings.keys()
