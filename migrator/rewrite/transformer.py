"""The libcst transformer for import statements (and import statements commented out or
written in doctests: `rewrite_import_line`).

An import is re-planned by `migrator.rewrite.import_plan` and written back with libcst, so
everything the plan does not change - parentheses, comments, continuation lines, spacing - is
rendered byte for byte. The transformer runs on one statement at a time: the locator
(`migrator.rewrite.locator`) finds the statements worth parsing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import libcst as cst
from libcst.helpers import get_full_name_for_node

from migrator.core import findings as F
from migrator.core.edits import NEWLINE
from migrator.rewrite.comment_imports import rewrite_comment
from migrator.rewrite.import_plan import (
    FromImportPlan,
    ImportContext,
    TargetStatement,
    absolute_module,
    from_import_findings,
    import_findings,
    plan_from_import,
    relative_module,
    within_moved_package,
)
from migrator.rewrite.import_split import has_comments, lay_out, name_gaps
from migrator.rewrite.wrap import (
    aligned,
    comment_on_first_line,
    opening_column,
    reindent,
    wrap_from_import,
)


class ImportTransformer(cst.CSTTransformer):
    """Rewrites the import statements of a (small) module; findings carry no positions."""

    def __init__(self, ctx: ImportContext):
        super().__init__()
        self.ctx = ctx
        self.resolver = ctx.resolver
        self.findings: list[F.Finding] = []
        # Whether a statement was wrapped: its continuation lines are new, at the block's indent.
        self.wrapped = False

    def leave_SimpleStatementLine(
        self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine
    ) -> cst.BaseStatement | cst.FlattenSentinel[cst.BaseStatement]:
        groups: list[list[cst.BaseSmallStatement]] = []
        for statement in updated_node.body:
            if isinstance(statement, cst.Import):
                groups.append([self._rewrite_import(statement)])
            elif isinstance(statement, cst.ImportFrom):
                groups.append(self._rewrite_from_import(statement))
            else:
                groups.append([statement])
        if all(len(g) == 1 for g in groups):
            new_line = updated_node.with_changes(body=[g[0] for g in groups])
            if new_line.deep_equals(original_node):
                return new_line
            if self._too_long(new_line) and _multi_name_import(new_line):
                # `import a, b` cannot be wrapped in parentheses: one statement per name.
                names = new_line.body[0].names  # type: ignore[attr-defined]
                return self._split_line(
                    new_line,
                    [
                        cst.Import(names=[n.with_changes(comma=cst.MaybeSentinel.DEFAULT)])
                        for n in names
                    ],
                )
            return self._wrap_if_long(new_line)
        if len(groups) == 1:
            return self._split_line(updated_node, groups[0])
        # `a; from m import x, y` that splits: keep one physical line, separated by `;`.
        semicolon = cst.Semicolon(whitespace_after=cst.SimpleWhitespace(" "))
        flat = [s.with_changes(semicolon=semicolon) for g in groups for s in g]
        flat[-1] = flat[-1].with_changes(semicolon=cst.MaybeSentinel.DEFAULT)
        return updated_node.with_changes(body=flat)

    def leave_Comment(self, original_node: cst.Comment, updated_node: cst.Comment) -> cst.Comment:
        if not self.ctx.comments:
            return updated_node
        lines, findings = rewrite_comment(updated_node.value, self.ctx, rewrite_import_line)
        self.findings.extend(findings)
        return updated_node if lines is None else cst.Comment("; ".join(_join_comment(lines)))

    # -- statements ------------------------------------------------------------------------

    def _split_line(
        self, line: cst.SimpleStatementLine, statements: list[cst.BaseSmallStatement]
    ) -> cst.FlattenSentinel[cst.BaseStatement]:
        """One line per resulting statement; the first keeps leading lines and the comment."""
        out: list[cst.BaseStatement] = []
        for index, statement in enumerate(statements):
            trailing = line.trailing_whitespace if index == 0 else cst.TrailingWhitespace()
            new_line = cst.SimpleStatementLine(
                body=[statement],
                leading_lines=line.leading_lines if index == 0 else (),
                trailing_whitespace=trailing,
            )
            out.append(self._wrap_if_long(new_line))
        return cst.FlattenSentinel(out)

    def _rewrite_import(self, node: cst.Import) -> cst.Import:
        dotted = [get_full_name_for_node(alias.name) or "" for alias in node.names]
        self.findings.extend(import_findings(dotted, self.resolver))
        names = []
        for alias, name in zip(node.names, dotted, strict=True):
            resolution = self.resolver.resolve_module(name) if self.resolver.is_ours(name) else None
            if resolution is not None and resolution.changed:
                alias = alias.with_changes(name=dotted_node(resolution.new))
            names.append(alias)
        return node.with_changes(names=names)

    def _absolute(self, node: cst.ImportFrom) -> str | None:
        module = get_full_name_for_node(node.module) if node.module else None
        return absolute_module(self.ctx.package, len(node.relative), module)

    def _rewrite_from_import(self, node: cst.ImportFrom) -> list[cst.BaseSmallStatement]:
        module = self._absolute(node)
        if module is None or not self.resolver.is_ours(module):
            return [node]
        if node.relative and within_moved_package(self.ctx.package, module, self.resolver):
            return [node]
        star = isinstance(node.names, cst.ImportStar)
        names: list[tuple[str, str | None]] = (
            [("*", None)]
            if star
            else [(get_full_name_for_node(a.name) or "", a.evaluated_alias) for a in node.names]  # type: ignore[union-attr]
        )
        plan = plan_from_import(module, names, self.resolver)
        self.findings.extend(
            from_import_findings(module, bool(node.relative), star, plan, self.resolver)
        )
        if not plan.changed:
            return [node]
        if not plan.split:
            return [self._retarget(node, plan.targets[0])]
        statements = [self._fresh_from_import(node, target) for target in plan.targets]
        if isinstance(node.lpar, cst.LeftParen):
            return list(self._keep_comments(node, plan, statements))
        return list(statements)

    def _keep_comments(
        self, node: cst.ImportFrom, plan: FromImportPlan, statements: list[cst.ImportFrom]
    ) -> list[cst.ImportFrom]:
        """A resulting statement that carries comments of `node` keeps its parenthesized
        layout, each comment beside (or above) its own name; the others are one line."""
        gaps = name_gaps(node)
        out = []
        for number, (target, statement) in enumerate(zip(plan.targets, statements, strict=True)):
            indices = [entry.index for entry in target.names]
            if has_comments(gaps, indices, number == 0):
                laid = lay_out(node, gaps, statement, indices, number == 0)
                # `sites.imports` indents the lines of a split at the block's indentation.
                statement = reindent(laid, self._continuation(node, laid, dedent=True))
            out.append(statement)
        return out

    def _continuation(
        self, old: cst.ImportFrom, new: cst.ImportFrom, dedent: bool
    ) -> Callable[[int], int]:
        """Where a continuation line of `old` starts in `new`, by its column in `old`: lines
        aligned under the first name follow it when the first line grew or shrank; with
        `dedent`, columns become relative to the block's indentation."""
        indent = self.ctx.indent
        before = indent + opening_column(old) if aligned(old) else -1
        after = indent + opening_column(new)
        cut = indent if dedent else 0
        return lambda column: max(0, (after if column == before else column) - cut)

    def _module_fields(self, node: cst.ImportFrom, target: str) -> dict[str, object]:
        """`module` and `relative` fields naming absolute `target`, relative if `node` was."""
        if not node.relative:
            return {"module": dotted_node(target)}
        level = len(node.relative)
        # The file stays where it is (even inside a package the table moves): its imports
        # are written relative to its current package. `vam refactor`, which moves files,
        # anchors them at the package's new home instead.
        anchor = self.ctx.package or ""
        if self.ctx.anchor_at_new_home:
            anchor = self.resolver.resolve_module(anchor).new
        dots, rest = relative_module(anchor, level, target)
        if dots == 0:
            return {"module": dotted_node(target), "relative": []}
        return {"module": dotted_node(rest) if rest else None, "relative": [cst.Dot()] * dots}

    def _retarget(self, node: cst.ImportFrom, target: TargetStatement) -> cst.ImportFrom:
        """Same statement, new module text and names: keeps parentheses, comments, layout."""
        changes = self._module_fields(node, target.module)
        if not isinstance(node.names, cst.ImportStar):
            aliases = []
            for alias, entry in zip(node.names, target.names, strict=True):
                if entry.resolution is not None and entry.name != get_full_name_for_node(
                    alias.name
                ):
                    alias = alias.with_changes(
                        name=dotted_node(entry.name),
                        asname=cst.AsName(name=cst.Name(entry.alias))
                        if entry.alias
                        else alias.asname,
                    )
                aliases.append(alias)
            changes["names"] = aliases
        if node.module is None and changes.get("module") is not None:
            changes["whitespace_after_from"] = cst.SimpleWhitespace(" ")
        new = node.with_changes(**changes)
        # Re-aligning is formatting: only for a project that configures it (a line length).
        if self.ctx.line_length is None or not aligned(node):
            return new
        return reindent(new, self._continuation(node, new, dedent=False))

    def _fresh_from_import(self, node: cst.ImportFrom, target: TargetStatement) -> cst.ImportFrom:
        """A one-line `from <module> import a[ as b], ...` for a split statement."""
        aliases = [
            cst.ImportAlias(
                name=dotted_node(entry.name),
                asname=cst.AsName(name=cst.Name(entry.alias)) if entry.alias else None,
                comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")),
            )
            for entry in target.names
        ]
        aliases[-1] = aliases[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        fields = self._module_fields(node, target.module)
        return cst.ImportFrom(
            module=fields["module"],  # type: ignore[arg-type]
            names=aliases,
            relative=fields.get("relative", ()),  # type: ignore[arg-type]
        )

    def _too_long(self, line: cst.SimpleStatementLine) -> bool:
        """True if a line of `line` exceeds the configured line length (the first line sits
        at the block's indentation; continuation lines carry their own)."""
        if self.ctx.line_length is None:
            return False
        lines = NEWLINE.split(cst.Module(body=[line]).code.rstrip("\r\n"))
        widths = [self.ctx.indent + len(lines[0]), *(len(rest) for rest in lines[1:])]
        return max(widths) > self.ctx.line_length

    def _wrap_if_long(self, line: cst.SimpleStatementLine) -> cst.SimpleStatementLine:
        """Wrap (or re-flow) a from-import that the rewrite made too long, in the file's
        style. A statement with comments between its names is left as it is: re-flowing it
        would have to move them."""
        limit = self.ctx.line_length
        if limit is None or len(line.body) != 1 or not isinstance(line.body[0], cst.ImportFrom):
            return line
        if not self._too_long(line) or _comments_in(line.body[0]):
            return line
        self.wrapped = True
        wrapped = wrap_from_import(line.body[0], self.ctx.style, self.ctx.indent, limit)
        return comment_on_first_line(line.with_changes(body=[wrapped]))


def rewrite_import_line(
    lead: str, code: str, ctx: ImportContext, kind: str = "comment"
) -> tuple[list[str] | None, list[F.Finding]] | None:
    """Re-plan one import statement written after `lead` (`# `, `>>> `) in text.

    Returns the new lines (each with `lead`; None when nothing changes) and the findings
    (of `kind`, without positions), or None when `code` is not a single import statement.
    """
    try:
        statement = cst.parse_statement(code)
    except cst.ParserSyntaxError:
        return None
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return None
    if not isinstance(statement.body[0], (cst.Import, cst.ImportFrom)):
        return None
    sub = ImportTransformer(ImportContext(ctx.resolver, ctx.package, comments=False))
    new = cst.Module(body=[statement]).visit(sub)
    findings = [replace(f, kind=kind) for f in sub.findings]
    if not any(f.fixable for f in findings):
        return None, findings
    return [lead + line for line in new.code.rstrip("\r\n").splitlines()], findings


def _join_comment(lines: list[str]) -> list[str]:
    """A trailing comment cannot span lines: continuation statements lose their `#`."""
    return [lines[0], *(line.lstrip("#").lstrip() for line in lines[1:])]


def _comments_in(node: cst.CSTNode | None) -> list[str]:
    found: list[str] = []

    class _Collect(cst.CSTVisitor):
        def visit_Comment(self, comment: cst.Comment) -> None:
            found.append(comment.value)

    if node is not None:
        node.visit(_Collect())
    return found


def _multi_name_import(line: cst.SimpleStatementLine) -> bool:
    return (
        len(line.body) == 1 and isinstance(line.body[0], cst.Import) and len(line.body[0].names) > 1
    )


def dotted_node(dotted: str) -> cst.Attribute | cst.Name:
    parts = dotted.split(".")
    node: cst.Attribute | cst.Name = cst.Name(parts[0])
    for part in parts[1:]:
        node = cst.Attribute(value=node, attr=cst.Name(part))
    return node
