"""Rewrites one Python module: locate reference sites with `ast`, edit them in place.

Parsing a whole module into a concrete syntax tree costs ~20x more than CPython's own
parser, and most of a module holds no reference. So the C parser locates the sites on
lines that spell a moved name - import statements, attribute chains, string literals,
f-strings, comments - and each site is edited as a span of the original text: imports
through the libcst `ImportTransformer` (the statement alone is parsed), everything else
through the text rewriter. Bytes outside the edited spans never change.
"""

from __future__ import annotations

import ast
import re
import warnings
from dataclasses import dataclass

from migrator import findings as F
from migrator import text as T
from migrator.comments import rewrite_comment, rewrite_import_line
from migrator.imports import (
    ImportContext,
    ImportStyle,
    absolute_module,
    detect_style,
    from_import_findings,
    import_findings,
    plan_from_import,
)
from migrator.locator import Locator, Sites, SourceMap, dotted_name, top_level_aliases
from migrator.resolver import Resolver

_REST_IS_COMMENT = re.compile(r"[ \t\f]*(#[^\r\n]*)?")
_DOCTEST_IMPORT = re.compile(r"(?m)^([ \t]*>>>[ \t]+)((?:from|import)[ \t][^\r\n]*)$")
# A dotted prefix completed at run time: f"pkg.{x}", "pkg.{}".format(x), "pkg.%s" % x.
_OPEN_PREFIX = re.compile(rf"(?<![A-Za-z0-9_.])({T.IDENT}(?:\.{T.IDENT})*)\.(?:\{{|%)")


@dataclass(frozen=True)
class PythonOptions:
    """`package` anchors relative imports (None: left alone); `line_length` None: no wrapping;
    `rewrite` False: findings only (imports are then judged from the ast, without libcst)."""

    package: str | None = None
    comments: bool = True
    line_length: int | None = None
    rewrite: bool = True


@dataclass
class _Edit:
    start: int
    end: int
    new: str


class PythonRewriter:
    """Rewrites one module's source text; see the module docstring."""

    def __init__(self, resolver: Resolver, trigger: re.Pattern[str]):
        self.resolver = resolver
        self.trigger = trigger

    def rewrite(self, text: str, options: PythonOptions) -> tuple[str, list[F.Finding]]:
        """(new text, findings with positions).

        Raises:
            SyntaxError: `text` is not valid Python (for the running interpreter).
        """
        if T.ignores_file(text):
            return text, []
        smap = SourceMap(text)
        lines = {smap.position(m.start())[0] for m in self.trigger.finditer(text)}
        if not lines:
            return text, []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SyntaxWarnings of the user's code are not ours
            tree = ast.parse(text)
        aliases = top_level_aliases(tree, options.package)
        locator = Locator(lines, self.resolver.packages, aliases)
        locator.visit(tree)
        run = _Run(
            self.resolver,
            smap,
            options,
            T.ignored_lines(text),
            aliases,
            detect_style(text) if options.line_length else ImportStyle.BLACK,
        )
        run.imports(locator.sites.imports)
        run.chains(locator.sites.chains)
        run.strings(locator.sites.strings, locator.sites.docstrings)
        run.fstrings(locator.sites.fstrings)
        run.calls(locator.sites.calls)
        run.comments(lines, locator.sites)
        if run.needed_imports:
            run.add_imports(tree)
        return run.apply(), sorted(run.findings, key=lambda f: (f.line, f.col))


class _Run:
    """The edits and findings of one rewrite."""

    def __init__(
        self,
        resolver: Resolver,
        smap: SourceMap,
        options: PythonOptions,
        ignored: set[int],
        aliases: dict[str, str],
        style: ImportStyle,
    ):
        self.resolver = resolver
        self.smap = smap
        self.options = options
        self.ignored = ignored
        self.aliases = aliases
        self.style = style
        self.edits: list[_Edit] = []
        self.findings: list[F.Finding] = []
        # (new module, old module) -> chain edits that need `import new.module` to work.
        self.needed_imports: dict[tuple[str, str], list[tuple[_Edit, F.Finding]]] = {}
        self.import_lines: set[int] = set()
        nl = T.NEWLINE.search(smap.text)
        self.newline = nl.group() if nl else "\n"

    # -- bookkeeping -----------------------------------------------------------------------

    def _skip(self, start: int, end: int) -> bool:
        if not self.ignored:
            return False
        first, last = self.smap.position(start)[0], self.smap.position(max(start, end - 1))[0]
        return any(line in self.ignored for line in range(first, last + 1))

    def _at(self, finding: F.Finding, offset: int) -> F.Finding:
        line, col = self.smap.position(offset)
        return F.Finding(
            "",
            line,
            col,
            finding.code,
            finding.kind,
            finding.message,
            finding.old,
            finding.new,
            finding.step,
        )

    def apply(self) -> str:
        text = self.smap.text
        out, pos = [], 0
        for edit in sorted(self.edits, key=lambda e: e.start):
            if edit.start < pos:
                continue  # overlapping sites cannot happen; never corrupt text if they do
            out.append(text[pos : edit.start])
            out.append(edit.new)
            pos = edit.end
        out.append(text[pos:])
        return "".join(out)

    # -- import statements -----------------------------------------------------------------

    def imports(self, statements: list[ast.stmt]) -> None:
        for node in statements:
            start, end = self.smap.span(node)
            rest = _REST_IS_COMMENT.match(self.smap.text, end)
            line_end = self.smap.line_end(end)
            if rest is not None and rest.end() == line_end:
                end = line_end  # take the trailing comment along: a split keeps it on top
            first = self.smap.position(start)[0]
            last = self.smap.position(end)[0]
            self.import_lines.update(range(first, last + 1))
            if self._skip(start, end):
                continue
            if self.options.rewrite:
                self._import(start, end, self.smap.text[start:end])
            else:
                self.findings.extend(self._at(f, start) for f in self._import_findings(node))

    def _import_findings(self, node: ast.stmt) -> list[F.Finding]:
        """The findings `_import` would report, from the ast alone."""
        if isinstance(node, ast.Import):
            return import_findings([alias.name for alias in node.names], self.resolver)
        assert isinstance(node, ast.ImportFrom)
        module = absolute_module(self.options.package, node.level, node.module)
        if module is None or not self.resolver.is_ours(module):
            return []
        names = [(alias.name, alias.asname) for alias in node.names]
        star = names == [("*", None)]
        plan = plan_from_import(module, names, self.resolver)
        return from_import_findings(module, node.level > 0, star, plan, self.resolver)

    def _import(self, start: int, end: int, segment: str) -> None:
        indent = self.smap.indentation(start)
        ctx = ImportContext(
            self.resolver,
            self.options.package,
            line_length=self.options.line_length if indent is not None else None,
            style=self.style,
            indent=len(indent or ""),
            comments=self.options.comments,
        )
        import libcst as cst  # only files with an import to rewrite pay for libcst

        from migrator.transformer import ImportTransformer

        try:
            module = cst.parse_module(
                segment + self.newline, config=cst.PartialParserConfig(default_newline=self.newline)
            )
        except cst.ParserSyntaxError:
            self._text_span(start, end, "from-import")  # syntax newer than libcst knows
            return
        transformer = ImportTransformer(ctx)
        new_module = module.visit(transformer)
        self.findings.extend(self._at(f, start) for f in transformer.findings)
        # The segment never ends in a newline; libcst may or may not keep the one added
        # (it drops a lone CR at the end of a module).
        new = new_module.code.rstrip("\r\n")
        if new == segment:
            return
        if len(new_module.body) > 1 and indent is None:
            new = "; ".join(cst.Module(body=[s]).code.rstrip("\r\n") for s in new_module.body)
        elif len(new_module.body) > 1 or transformer.wrapped or not T.NEWLINE.search(segment):
            # Lines this rewrite created sit at the statement's own indentation.
            new = new.replace(self.newline, self.newline + (indent or ""))
        self.edits.append(_Edit(start, end, new))

    # -- attribute chains ------------------------------------------------------------------

    def chains(self, chains: list[tuple[ast.Attribute, str]]) -> None:
        for node, name in chains:
            start, end = self.smap.span(node)
            if self._skip(start, end):
                continue
            head = name.partition(".")[0]
            if head not in self.resolver.packages:
                self._alias_chain(start, name, head)
                continue
            resolution = self.resolver.resolve(name)
            if resolution.removed:
                self.findings.append(self._at(F.removed("attribute", resolution), start))
            if not resolution.changed:
                continue
            if self.smap.text[start:end] != name:
                self.findings.append(
                    self._at(
                        F.needs_human(
                            "attribute",
                            f"'{name}' is written with spaces or over several lines; it moved to "
                            f"'{resolution.new}' ({F.steps_of(resolution)})",
                            old=name,
                        ),
                        start,
                    )
                )
                continue
            finding = self._at(F.moved("attribute", resolution), start)
            edit = _Edit(start, end, resolution.new)
            symbols = [hit for hit in resolution.hits if hit.kind == "symbol"]
            if not symbols:
                self.findings.append(finding)
                self.edits.append(edit)
            for hit in symbols[:1]:
                # Held back until `add_imports` knows the new module can be imported here.
                key = (hit.new.rpartition(".")[0], hit.old.rpartition(".")[0])
                self.needed_imports.setdefault(key, []).append((edit, finding))

    def _alias_chain(self, start: int, name: str, head: str) -> None:
        """`m.moved_name` where `m` is bound to an unmoved module whose names moved."""
        bound = self.aliases[head]
        if not self.resolver.is_ours(bound) or self.resolver.resolve(bound).changed:
            return
        full = bound + name[len(head) :]
        resolution = self.resolver.resolve(full)
        if resolution.changed:
            self.findings.append(
                self._at(
                    F.needs_human(
                        "attribute",
                        f"'{name}' reaches '{full}' through the local name '{head}'; it "
                        f"moved to '{resolution.new}' ({F.steps_of(resolution)})",
                        old=full,
                    ),
                    start,
                )
            )

    def add_imports(self, tree: ast.Module) -> None:
        """Commit the chains that reach moved symbols, adding `import new.module` after the
        `import old.module` that made the old chain work.

        The new import goes on its own line at the holder's indentation, so it is exactly as
        conditional as the old one. A holder that shares its line with other code (`try:
        import m`, `if c: import m`, `import m; x = 1`, a backslash continuation) leaves no
        safe place: those chains are reported for a human instead of breaking the file.
        """
        present = set()
        holders: dict[str, ast.Import] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname is None:
                        present.add(alias.name)
                        holders.setdefault(alias.name, node)
        for (new, old), chains in self.needed_imports.items():
            holder = holders.get(old)
            if new in present or holder is None:
                self._commit(chains)
                continue
            start, end = self.smap.span(holder)
            line_end = self.smap.line_end(end)
            indent = self.smap.indentation(start)
            rest = _REST_IS_COMMENT.match(self.smap.text, end)
            if indent is None or rest is None or rest.end() != line_end:
                for _, finding in chains:
                    self.findings.append(
                        F.Finding(
                            "",
                            finding.line,
                            finding.col,
                            F.NEEDS_HUMAN,
                            "attribute",
                            f"{finding.message}; it needs `import {new}` next to `import {old}` "
                            f"(line {self.smap.position(start)[0]}), which shares its line with "
                            "other code",
                            finding.old,
                            finding.new,
                            finding.step,
                        )
                    )
                continue
            self._commit(chains)
            self.edits.append(_Edit(line_end, line_end, f"{self.newline}{indent}import {new}"))

    def _commit(self, chains: list[tuple[_Edit, F.Finding]]) -> None:
        for edit, finding in chains:
            self.edits.append(edit)
            self.findings.append(finding)

    # -- strings ---------------------------------------------------------------------------

    def strings(self, nodes: list[ast.Constant], docstrings: set[int]) -> None:
        for node in nodes:
            docstring = id(node) in docstrings
            if docstring and not self.options.comments:
                continue
            start, end = self.smap.span(node)
            kind = "docstring" if docstring else "string"
            doctests = self._doctest_imports(start, end, kind)
            found = self._text_span(start, end, kind, skip=doctests)
            self._open_prefixes(start, end)
            raw = node.value
            value = raw if isinstance(raw, str) else bytes(raw).decode("latin-1")  # type: ignore[arg-type]
            for edit in T.find_references(value, self.resolver):
                if edit.fixable and edit.old not in found:
                    self.findings.append(
                        self._at(
                            F.needs_human(
                                kind,
                                f"'{edit.old}' is split across adjacent string literals or written "
                                f"with escapes; write '{edit.new}'",
                                old=edit.old,
                            ),
                            start,
                        )
                    )

    def fstrings(self, nodes: list[ast.JoinedStr]) -> None:
        for node in nodes:
            start, end = self.smap.span(node)
            self._text_span(start, end, "string")
            self._open_prefixes(start, end)

    def _open_prefixes(self, start: int, end: int) -> None:
        """A literal that ends in `pkg.parent.` and is completed at run time by a format
        field: the completed name cannot be known, so it is reported when names moved below
        that parent."""
        for match in _OPEN_PREFIX.finditer(self.smap.text, start, end):
            parent = match.group(1)
            children = self.resolver.moved_children(parent) if self.resolver.is_ours(parent) else {}
            if children and not self._skip(start, end):
                self.findings.append(
                    self._at(
                        F.needs_human(
                            "string",
                            f"'{parent}.' is completed at run time (a format field); names "
                            f"below it moved ({', '.join(sorted(children))})",
                            old=parent,
                        ),
                        match.start(),
                    )
                )

    def _doctest_imports(self, start: int, end: int, kind: str) -> list[tuple[int, int]]:
        """Import statements in doctest lines (`>>> from m import x`) of a string literal
        follow the import rules; returns the spans they cover (the text pass skips them)."""
        covered: list[tuple[int, int]] = []
        ctx = ImportContext(self.resolver, self.options.package, comments=False)
        for match in _DOCTEST_IMPORT.finditer(self.smap.text, start, end):
            result = rewrite_import_line(match.group(1), match.group(2), ctx, kind)
            if result is None or self._skip(match.start(), match.end()):
                continue
            lines, findings = result
            covered.append((match.start(), match.end()))
            self.findings.extend(self._at(f, match.start()) for f in findings)
            if lines is not None:
                # Each resulting statement is a doctest line of its own, with the same lead.
                self.edits.append(_Edit(match.start(), match.end(), self.newline.join(lines)))
        return covered

    def _text_span(
        self, start: int, end: int, kind: str, skip: list[tuple[int, int]] | None = None
    ) -> set[str]:
        """Text-rewrite `text[start:end]`; returns the old texts of the references found.
        References inside the `skip` spans are someone else's."""
        segment = self.smap.text[start:end]
        found = set()
        for edit in T.find_references(segment, self.resolver):
            found.add(edit.old)
            at = start + edit.start
            if skip and any(a <= at < b for a, b in skip):
                continue
            if self._skip(start + edit.start, start + edit.end):
                continue
            self.findings.append(self._at(F.text_finding(edit, kind), start + edit.start))
            if edit.fixable:
                self.edits.append(_Edit(start + edit.start, start + edit.end, edit.new))
        return found

    # -- calls that pass a parent and a child separately --------------------------------------

    def calls(self, nodes: list[ast.Call]) -> None:
        for node in nodes:
            args = [*node.args, *(k.value for k in node.keywords)]
            strings = [
                a.value for a in args if isinstance(a, ast.Constant) and isinstance(a.value, str)
            ]
            parents = strings + [
                n for n in (dotted_name(a) for a in args if isinstance(a, ast.Attribute)) if n
            ]
            for parent in parents:
                if not self.resolver.is_ours(parent) or self.resolver.resolve(parent).changed:
                    continue
                moved = self.resolver.moved_children(parent)
                child = next(
                    (s.lstrip(".") for s in strings if s.lstrip(".").split(".")[0] in moved), None
                )
                start, end = self.smap.span(node)
                if child is not None and not self._skip(start, end):
                    full = f"{parent}.{child}"
                    self.findings.append(
                        self._at(
                            F.needs_human(
                                "string",
                                f"'{parent}' and '{child}' are passed separately; together they "
                                f"name '{full}', which moved to "
                                f"'{self.resolver.resolve(full).new}'",
                                old=full,
                            ),
                            start,
                        )
                    )
                    break

    # -- comments --------------------------------------------------------------------------

    def comments(self, lines: set[int], sites: Sites) -> None:
        if not self.options.comments:
            return
        wanted = lines - self.import_lines
        spans = self._string_spans_by_line(sites, wanted)
        ctx = ImportContext(self.resolver, self.options.package, comments=False)
        for number in sorted(wanted):
            line_start = self.smap.starts[number - 1]
            line = self.smap.line(number)
            hash_at = _comment_start(line, line_start, spans.get(number, []))
            if hash_at is None or number in self.ignored:
                continue
            start = line_start + hash_at
            end = self.smap.line_end(start)
            new_lines, findings = rewrite_comment(self.smap.text[start:end], ctx)
            self.findings.extend(self._at(f, start) for f in findings)
            if new_lines is None:
                continue
            indent = self.smap.indentation(start)
            if indent is None:
                new = "; ".join([new_lines[0], *(x.lstrip("#").lstrip() for x in new_lines[1:])])
            else:
                new = (self.newline + indent).join(new_lines)
            self.edits.append(_Edit(start, end, new))

    def _string_spans_by_line(
        self, sites: Sites, wanted: set[int]
    ) -> dict[int, list[tuple[int, int]]]:
        """Spans of the string literals that touch each wanted line (so `#` in them is no
        comment), indexed by line: one pass, however many strings and comments a file has."""
        by_line: dict[int, list[tuple[int, int]]] = {}
        for node in (*sites.strings, *sites.fstrings):
            span = self.smap.span(node)
            for number in range(node.lineno, (node.end_lineno or node.lineno) + 1):
                if number in wanted:
                    by_line.setdefault(number, []).append(span)
        return by_line


def _comment_start(line: str, line_start: int, spans: list[tuple[int, int]]) -> int | None:
    """Index of the `#` that opens a comment on `line`, skipping `#` inside strings."""
    index = line.find("#")
    while index >= 0:
        offset = line_start + index
        if not any(start <= offset < end for start, end in spans):
            return index
        index = line.find("#", index + 1)
    return None
