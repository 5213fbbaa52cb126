"""Code on the page: a step's kernel functions, syntax-highlighted, with the lines that
changed against the previous step marked.

A step file is shown by function, not whole: the Triton kernels (``@triton.jit``) and the
Python functions that launch them (``kernel[grid](...)``) or call those launchers; in CUDA
and C++ files every function (``__global__`` kernels, ``__device__`` helpers and the
launchers), found by matching braces. Each function keeps the comment block right above it.

Each function is compared with its counterpart in the previous step's file (the function of
the same name, else the most similar one), or, when it has none, with the whole previous file;
added and changed code lines are marked with a green bar, removed ones with a red line saying
how many (comments are never marked). A function identical to its counterpart
is folded. CUDA code is compared with its headers' helpers inlined: a call to a function of a
header the file includes with quotes, which the other side never calls, counts as that
function's body, so code moved into a shared header (or out of one) still pairs with the step
before and is not marked as new. The HTML needs no stylesheet (Pygments writes inline styles), so it reads the
same in JupyterLab and in the exported report; every code block is a
``<div class="fk-code">`` that scrolls sideways rather than overflow the page. The plain-text
form marks changed lines with ``+``.
"""

from __future__ import annotations

import ast
import difflib
import html
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

from fusedkit.kernels import KERNELS, step_path

CUDA_SUFFIXES = (".cu", ".cuh", ".h", ".hpp", ".cpp", ".cc")
SIMILAR = 0.3
"""A function with no namesake in the previous file is compared with the most similar one
there when at least this share of their lines match (difflib's ratio); else it is new."""
DOC_LINES = 3
"""A docstring longer than this many lines is shown as its first line and a note."""

# Inline styles: no CSS file is needed by the HTML report.
_BOX = ("overflow-x:auto; max-width:100%; box-sizing:border-box; margin:2px 0 10px 0; "
        "background:#f8f8f8; border:1px solid #e1e4e8; border-radius:4px; "
        "font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,'DejaVu Sans Mono',monospace; "
        "font-size:12px; line-height:1.45;")
_PRE = ("margin:0; padding:4px 0; background:transparent; border:0; overflow:visible; "
        "font-family:inherit; font-size:inherit; line-height:inherit; white-space:pre;")
_LINE = "display:block; padding-right:12px; border-left:3px solid transparent;"
_ADDED = "display:block; padding-right:12px; border-left:3px solid #2da44e; background:#e6ffec;"
_REMOVED = ("display:block; padding-right:12px; border-left:3px solid #cf222e; background:#ffebe9; "
            "color:#8c959f; font-style:italic;")
_FOLDED = "display:block; border-left:3px solid transparent; color:#8c959f; font-style:italic;"
_GUTTER = ("display:inline-block; width:4.5ch; padding-right:1.5ch; text-align:right; "
           "color:#8c959f; user-select:none;")
_CAPTION = "font-size:12px; margin:8px 0 0 0; color:#24292f;"
_HEADER = ("font-size:12.5px; margin:4px 0 6px 0; padding:6px 10px; border-left:3px solid #0969da; "
           "background:#f6f8fa; max-width:100%; box-sizing:border-box; overflow-wrap:anywhere;")


@dataclass(frozen=True)
class Function:
    """One function of a source file: its name, text (with decorators and the comment block
    right above it), first line (1-based) and kind: ``kernel`` (a Triton or CUDA kernel),
    ``device`` (a helper the kernels call), ``launcher`` (host code that launches or calls
    the kernels) or ``other``."""

    name: str
    source: str
    line: int
    kind: str
    folded: tuple[int, int] | None = None   # lines (0-based, end excluded) shown as one line

    @property
    def lines(self) -> list[str]:
        return self.source.splitlines()


# -- parsing -----------------------------------------------------------------------------------

_RULE = re.compile(r"^\s*(?://|#)\s*[-=]{8,}\s*$")   # a "// -------" section rule


def _comment_block_above(lines: list[str], first: int, marker: str) -> int:
    """Index of the first line of the comment block that ends right above ``lines[first]``
    (a section rule line, ``// -----``, ends the block: it belongs to no one function)."""
    i = first
    while i > 0 and lines[i - 1].strip().startswith(marker) and not _RULE.match(lines[i - 1]):
        i -= 1
    return i


def _python_functions(text: str) -> list[Function]:
    tree = ast.parse(text)
    lines = text.splitlines()
    nodes = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]

    def is_jit(node: ast.FunctionDef) -> bool:
        return any("jit" in ast.unparse(d) for d in node.decorator_list)

    def launches(node: ast.FunctionDef) -> bool:
        return any(isinstance(c, ast.Call) and isinstance(c.func, ast.Subscript)
                   for c in ast.walk(node))

    def calls(node: ast.FunctionDef) -> set[str]:
        out = set()
        for c in ast.walk(node):
            if isinstance(c, ast.Call):
                f = c.func
                if isinstance(f, ast.Name):
                    out.add(f.id)
                elif isinstance(f, ast.Attribute):
                    out.add(f.attr)
        return out

    kinds = {n.name: "kernel" if is_jit(n) else ("launcher" if launches(n) else "other")
             for n in nodes}
    # jit helpers called by kernels are kernels too; wrappers that call launchers are launchers.
    changed = True
    while changed:
        changed = False
        for n in nodes:
            if kinds[n.name] == "other" and any(kinds.get(c) == "launcher" for c in calls(n)):
                kinds[n.name] = "launcher"
                changed = True
    out = []
    for n in nodes:
        first = min([n.lineno] + [d.lineno for d in n.decorator_list]) - 1
        start = _comment_block_above(lines, first, "#")
        src = "\n".join(lines[start:n.end_lineno])
        folded = None
        doc = n.body[0] if n.body else None
        if (isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant)
                and isinstance(doc.value.value, str) and doc.end_lineno - doc.lineno >= DOC_LINES):
            folded = (doc.lineno - start, doc.end_lineno - start)   # all but its first line
        out.append(Function(n.name, src, start + 1, kinds[n.name], folded))
    return out


def _mask_comments_and_strings(text: str) -> str:
    """``text`` with comments, string and character literals replaced by spaces (newlines
    kept), so that braces and parentheses in them do not count."""
    out = list(text)
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
        elif c == "#" and (i == 0 or text[i - 1] == "\n" or text[:i].rsplit("\n", 1)[-1].strip() == ""):
            j = text.find("\n", i)        # a preprocessor line: no braces of the code in it
            j = n if j < 0 else j
        else:
            i += 1
            continue
        for k in range(i, j):
            if out[k] != "\n":
                out[k] = " "
        i = j
    return "".join(out)


_NOT_FUNCTION = re.compile(r"^\s*(?:namespace|struct|class|enum|union|extern\s+\"C\"\s*$)|=\s*$")


def _cuda_functions(text: str) -> list[Function]:
    code = _mask_comments_and_strings(text)
    lines = text.splitlines()
    out: list[Function] = []
    i, n, last_end, parens = 0, len(code), 0, 0
    while i < n:
        c = code[i]
        if c in "()":
            parens += 1 if c == "(" else -1
        elif c == "{" and parens > 0:
            # A braced initialiser in a parameter list (``Prepare prepare = Prepare{}``): no body.
            i = _matching_brace(code, i) + 1
            continue
        elif c in ";}":
            last_end = i + 1
        elif c == "{":
            header = code[last_end:i]
            if re.search(r"\bnamespace\b[^(){};]*$", header) or re.search(r'extern\s+"C"\s*$', header):
                last_end = i + 1          # transparent: look for functions inside
            else:
                end = _matching_brace(code, i)
                fn = _as_function(text, code, lines, last_end, i, end)
                if fn is not None:
                    out.append(fn)
                i = end
                last_end = end + 1
        i += 1
    return out


def _matching_brace(code: str, open_at: int) -> int:
    depth = 0
    for j in range(open_at, len(code)):
        if code[j] == "{":
            depth += 1
        elif code[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return len(code) - 1


_STRUCT = re.compile(r"\s*(?:template\s*<[^{};]*>\s*)?(?:struct|class)\s+([A-Za-z_]\w*)\s*(?::[^{};]*)?")


def _as_function(text: str, code: str, lines: list[str], start: int, brace: int, end: int
                 ) -> Function | None:
    header = code[start:brace]
    # A struct whose body holds device code (an epilogue functor with its operator()) is shown
    # whole, under the struct's name; a plain data struct or a host class is not a function.
    if (m := _STRUCT.fullmatch(header)) and "__device__" in code[brace:end]:
        return _function_at(m.group(1), "device", code, lines, start, header, end)
    if not header.strip() or _NOT_FUNCTION.search(header) or ")" not in header:
        return None
    # The parameter list is the last balanced (...) group; the name is the identifier before it.
    close = header.rstrip().rfind(")")
    depth, open_ = 0, -1
    for j in range(close, -1, -1):
        if header[j] == ")":
            depth += 1
        elif header[j] == "(":
            depth -= 1
            if depth == 0:
                open_ = j
                break
    m = re.search(r"([A-Za-z_]\w*(?:::[A-Za-z_]\w*)*)\s*$", header[:open_]) if open_ > 0 else None
    if m is None or m.group(1) in ("if", "for", "while", "switch", "return", "sizeof"):
        return None
    name = m.group(1).split("::")[-1]
    kind = ("kernel" if "__global__" in header else "device" if "__device__" in header
            else "launcher")
    return _function_at(name, kind, code, lines, start, header, end)


def _function_at(name: str, kind: str, code: str, lines: list[str], start: int, header: str,
                 end: int) -> Function:
    """The function (or struct) whose header starts at ``start`` and whose body ends at ``end``,
    with the comment block right above it."""
    first_code = start + len(header) - len(header.lstrip())
    first_line = code.count("\n", 0, first_code)
    top = _comment_block_above(lines, first_line, "//")
    last_line = code.count("\n", 0, end)
    src = "\n".join(lines[top:last_line + 1])
    return Function(name, src, top + 1, kind)


def parse(path: str | Path) -> list[Function]:
    """Every top-level function of a Python or CUDA/C++ file, in file order."""
    path = Path(path)
    text = path.read_text()
    if path.suffix == ".py":
        return _python_functions(text)
    if path.suffix in CUDA_SUFFIXES:
        return _cuda_functions(text)
    raise ValueError(f"path={path}: not a Python or CUDA/C++ source; allowed suffixes: .py, "
                     f"{', '.join(CUDA_SUFFIXES)}")


def functions(path: str | Path) -> dict[str, str]:
    """The functions that matter in a step file, name -> source: Triton kernels and the
    Python functions that launch them (or call those), and every function of a CUDA file."""
    return {f.name: f.source for f in parse(path) if f.kind != "other"}


# -- which files -----------------------------------------------------------------------------

def source_path(source: str | Path) -> Path:
    """``"p12/03_cublas_epilogue_vec4.cu"`` or ``"common/torch_cuda.h"`` as a path (a Path is
    taken as it is: a copy of a step elsewhere, say)."""
    if isinstance(source, Path):
        if not source.is_file():
            raise FileNotFoundError(f"kernel source {source} does not exist")
        return source
    folder, _, filename = source.partition("/")
    if folder == "common":
        path = KERNELS / "common" / filename
        if not path.is_file():
            raise FileNotFoundError(f"kernel source common/{filename} does not exist")
        return path
    return step_path(folder, filename)


_COMMON_MODULE = re.compile(r"""^(\w+)\s*=\s*load_step\(\s*["']common["']\s*,\s*["']([\w.]+)["']\s*\)""", re.M)


def shared_functions(source: str) -> list[tuple[str, list[str]]]:
    """The shared Triton functions a Python step calls, as ``(common source, names)`` pairs:
    the kernels and launchers of each ``kernels/common`` module it loads (``_base =
    load_step("common", "triton_base.py")``) that it names as ``_base.<name>``."""
    path = source_path(source)
    if path.suffix != ".py":
        return []
    text = path.read_text()
    out = []
    for alias, filename in _COMMON_MODULE.findall(text):
        used = set(re.findall(rf"\b{alias}\.(\w+)", text))
        jit = [f.name for f in parse(KERNELS / "common" / filename) if f.kind != "other"]
        names = [n for n in jit if n in used]
        if names:
            out.append((f"common/{filename}", names))
    return out


_QUOTED_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]+"([^"]+)"', re.M)


def included_headers(path: str | Path) -> list[Path]:
    """The headers a CUDA/C++ file includes with quotes (``#include "../common/hopper.cuh"``),
    resolved beside the file that includes them, and the ones those include: each once, in
    include order. ``<system>`` headers, and names that are no file, are left out."""
    path = Path(path).resolve()
    seen, out = {path}, []

    def visit(p: Path) -> None:
        for name in _QUOTED_INCLUDE.findall(p.read_text()):
            header = (p.parent / name).resolve()
            if header not in seen and header.is_file():
                seen.add(header)
                out.append(header)
                visit(header)
    visit(path)
    return out


def header_helpers(path: str | Path) -> dict[str, Function]:
    """The functions a CUDA/C++ file can call from the headers it includes with quotes
    (:func:`included_headers`), name -> Function; empty for a Python file."""
    return {name: fn for name, (_, fn) in _helpers_with_files(Path(path)).items()}


def _helpers_with_files(path: Path) -> dict[str, tuple[Path, Function]]:
    """:func:`header_helpers` with the header that defines each (the first to include it)."""
    if path.suffix not in CUDA_SUFFIXES:
        return {}
    out: dict[str, tuple[Path, Function]] = {}
    for h in included_headers(path):
        for f in parse(h):
            out.setdefault(f.name, (h, f))
    return out


def previous_source(problem_key: str, slug: str) -> str | None:
    """The source file of the step before ``slug`` in its problem's ladder (the nearest lower
    step number with a different file), or None for the first kernel step."""
    from fusedkit import problems  # noqa: PLC0415

    p = problems.get(problem_key)
    v = p.variant(slug)
    if not v.source:
        return None
    before = [w for w in p.ladder() if w.source and w.source != v.source and w.number < v.number]
    return max(before, key=lambda w: w.number).source if before else None


# -- diff --------------------------------------------------------------------------------------

# A namespace qualifier (``sm90::``, ``fp::``, ``fusedkit::sm90::``): code moved into a header's
# namespace loses it there, and it changes nothing the step computes, so lines compare without it.
_QUALIFIER = re.compile(r"(?<![\w\[:])(?:[A-Za-z_]\w*::)+(?=[A-Za-z_~])")


def _norm(line: str) -> str:
    """``line`` as compared: whitespace runs made one space, namespace qualifiers dropped."""
    return _QUALIFIER.sub("", " ".join(line.split()))


@dataclass
class Shown:
    """One function as shown: which lines are marked, and against what."""

    function: Function
    against: str = ""                  # name of the counterpart in the previous file
    added: set[int] = field(default_factory=set)        # 0-based lines of this function
    removed: dict[int, int] = field(default_factory=dict)  # before line i: n lines removed
    new: bool = False                  # no counterpart in the previous file
    compared: bool = False             # there was a previous file to compare with

    @property
    def unchanged(self) -> bool:
        return self.compared and not self.new and not self.added and not self.removed


def _is_code(line: str) -> bool:
    s = line.strip()
    return bool(s) and not s.startswith(("//", "#", "/*", "*"))


_CALL = re.compile(r"\b([A-Za-z_]\w*)\s*(?:<[^;{}()]*>\s*)?\(")
# A struct built with braces, ``Epilogue e{...}`` or ``Epilogue{...}``: an epilogue functor that a
# shared template then runs counts as used where it is built.
_BRACED = re.compile(r"\b([A-Za-z_]\w*)\s*(?:<[^;{}()]*>\s*)?(?:[A-Za-z_]\w*\s*)?\{")
INLINE_DEPTH = 3
"""Helpers called from inlined helpers are inlined too, this many levels deep."""


@dataclass(frozen=True)
class _Line:
    text: str                 # whitespace-normalised
    origin: int | None        # index in the shown function, None for an inlined helper's line
    code: bool


def _calls(lines: Iterable[str]) -> set[str]:
    """Names called (``name(`` or ``name<...>(``) or built with braces (``Name n{``) in code
    ``lines``, comments and strings left out."""
    code = _mask_comments_and_strings("\n".join(lines))
    return set(_CALL.findall(code)) | set(_BRACED.findall(code))


def _body_lines(fn: Function) -> list[str]:
    """The code lines between a function's outermost braces (its body, without the braces)."""
    code = _mask_comments_and_strings(fn.source)
    depth, open_at = 0, -1
    for i, c in enumerate(code):          # the first brace outside the parameter list
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "{" and depth == 0:
            open_at = i
            break
    close_at = code.rfind("}")
    if open_at < 0 or close_at <= open_at:
        return []
    body = _mask_comments_and_strings(fn.source[open_at + 1:close_at])
    return [line for line in body.splitlines() if line.strip()]


def _reach(fn: Function, helpers: dict[str, Function]) -> set[str]:
    """The names ``fn`` calls, and those called by the ``helpers`` among them, in turn."""
    out: set[str] = set()
    todo = [fn]
    while todo:
        for name in _calls(x for x in todo.pop().lines if _is_code(x)):
            if name not in out and name != fn.name:
                out.add(name)
                if name in helpers:
                    todo.append(helpers[name])
    return out


def _expanded(fn: Function, helpers: dict[str, Function], keep: set[str]) -> list[_Line]:
    """``fn``'s lines, each line that calls one of ``helpers`` (other than those in ``keep``:
    the helpers the other side of the comparison reaches too) followed by that helper's body,
    recursively to :data:`INLINE_DEPTH`."""
    def inline(lines: list[str], origin: bool, depth: int, seen: frozenset[str]) -> list[_Line]:
        out = []
        for i, raw in enumerate(lines):
            code = _is_code(raw)
            out.append(_Line(_norm(raw), i if origin else None, code))
            if not code or depth == 0:
                continue
            for name in sorted(_calls([raw])):
                helper = helpers.get(name)
                if helper is None or name in keep or name in seen:
                    continue
                out += inline(_body_lines(helper), False, depth - 1, seen | {name})
        return out
    return inline(fn.lines, True, INLINE_DEPTH, frozenset({fn.name}))


def compare(fn: Function, previous: Sequence[Function], previous_text: str = "", *,
            helpers: dict[str, Function] | None = None,
            previous_helpers: dict[str, Function] | None = None) -> Shown:
    """Mark ``fn``'s code lines (comments and blank lines are never marked) against the
    previous step: against its counterpart among ``previous`` (the function of the same name,
    else the most similar one when at least :data:`SIMILAR` of the lines match) line by line;
    a function with no counterpart is new, and its lines that appear nowhere in
    ``previous_text`` (the previous file) are marked.

    ``helpers`` and ``previous_helpers`` (:func:`callable_helpers` of each file) are inlined
    where one side calls a helper that the other never reaches (directly or through other
    helpers): the call then stands for the helper's body, both in the similarity and in the
    marking, so code moved into (or out of) a header keeps its counterpart and is not marked
    as changed. Only the shown function's own lines are marked, and only its own removed lines
    counted."""
    if not previous and not previous_text:
        return Shown(fn)
    helpers, previous_helpers = helpers or {}, previous_helpers or {}
    reach = _reach(fn, helpers)

    def sides(p: Function) -> tuple[list[_Line], list[_Line]]:
        # Each side inlines the helpers it reaches and the other does not.
        return (_expanded(p, previous_helpers, reach),
                _expanded(fn, helpers, _reach(p, previous_helpers)))

    def ratio(old: list[_Line], cur: list[_Line]) -> float:
        return difflib.SequenceMatcher(None, [x.text for x in old], [x.text for x in cur],
                                       autojunk=False).ratio()

    same = [p for p in previous if p.name == fn.name]
    best, ratio_best = (same[0], 1.0) if same else (None, 0.0)
    if best is None:
        for p in previous:
            r = ratio(*sides(p))
            if r > ratio_best:
                best, ratio_best = p, r
    if best is None or ratio_best < SIMILAR:
        seen = {_norm(x) for x in previous_text.splitlines()}
        added = {j for j, line in enumerate(fn.lines) if _is_code(line) and _norm(line) not in seen}
        return Shown(fn, added=added, new=True, compared=True)
    old, cur = sides(best)
    sm = difflib.SequenceMatcher(None, [x.text for x in old], [x.text for x in cur], autojunk=False)
    shown = Shown(fn, against=best.name, compared=True)

    def own_code(lines: list[_Line]) -> int:
        return sum(x.code and x.origin is not None for x in lines)

    def shown_line(j: int) -> int:
        """The line of ``fn`` at or after expanded line ``j`` (its end past the last)."""
        return next((x.origin for x in cur[j:] if x.origin is not None), len(fn.lines))

    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag in ("replace", "insert"):
            shown.added.update(x.origin for x in cur[j1:j2] if x.code and x.origin is not None)
        if tag in ("delete", "replace"):
            gone = own_code(old[i1:i2]) - own_code(cur[j1:j2])
            if gone > 0:
                at = shown_line(j1 if tag == "delete" else j2)
                shown.removed[at] = shown.removed.get(at, 0) + gone
    return shown


# -- rendering ---------------------------------------------------------------------------------

def _lexer(path: Path):
    from pygments.lexers import CudaLexer, PythonLexer  # noqa: PLC0415

    return PythonLexer() if path.suffix == ".py" else CudaLexer()


def _highlight_lines(source: str, path: Path) -> list[str]:
    """One HTML string per line of ``source``, with inline colour styles (every span closed
    on its own line, so lines can be wrapped one by one)."""
    from pygments import highlight  # noqa: PLC0415
    from pygments.formatters import HtmlFormatter  # noqa: PLC0415

    out = highlight(source, _lexer(path), HtmlFormatter(noclasses=True, nowrap=True,
                                                         style="default"))
    got = out.split("\n")
    want = len(source.splitlines())
    got = (got + [""] * want)[:want]
    return got


def _code_block(shown: Shown, path: Path, css_class: str = "fk-code") -> str:
    fn = shown.function
    rows = []
    for i, (hl, raw) in enumerate(zip(_highlight_lines(fn.source, path), fn.lines)):
        if i in shown.removed:
            rows.append(_removed_row(shown.removed[i]))
        if fn.folded and fn.folded[0] <= i < fn.folded[1]:
            if i == fn.folded[0]:
                n = fn.folded[1] - fn.folded[0]
                rows.append(f'<span style="{_FOLDED}"><span style="{_GUTTER}">⋯</span>'
                            f'{n} more lines of docstring (in the file)</span>')
            continue
        style = _ADDED if i in shown.added else _LINE
        rows.append(f'<span style="{style}"><span style="{_GUTTER}">{fn.line + i}</span>'
                    f'{hl if raw.strip() else " "}</span>')
    if len(fn.lines) in shown.removed:
        rows.append(_removed_row(shown.removed[len(fn.lines)]))
    return (f'<div class="{css_class}" style="{_BOX}"><pre style="{_PRE}">{"".join(rows)}</pre>'
            f'</div>')


def _removed_row(n: int) -> str:
    return (f'<span style="{_REMOVED}"><span style="{_GUTTER}">−</span>'
            f'{n} line{"s" if n != 1 else ""} of the previous step removed here</span>')


_KIND = {"kernel": "kernel", "device": "device helper", "launcher": "launcher", "other": ""}


def _caption(shown: Shown, prev_name: str) -> str:
    fn = shown.function
    kind = _KIND.get(fn.kind, "")
    what = f"{kind}, " if kind else ""
    if not shown.compared:
        note = f"{len(fn.lines)} lines"
    elif shown.new:
        code = sum(_is_code(x) for x in fn.lines)
        note = (f"new in this step; {len(shown.added)} of its {code} code lines appear nowhere "
                f"in {prev_name}")
    elif shown.unchanged:
        note = f"unchanged from {prev_name}"
    else:
        n_removed = sum(shown.removed.values())
        against = prev_name if shown.against == fn.name else f"{shown.against} in {prev_name}"
        parts = [f"{len(shown.added)} line{'s' if len(shown.added) != 1 else ''} added or changed"]
        if n_removed:
            parts.append(f"{n_removed} removed")
        note = f"changed against {against}: " + ", ".join(parts)
    return f"{fn.name} ({what}{note})"


class CodeView:
    """Code of one step for display: HTML (``_repr_html_``) in a notebook and in the report,
    plain text (``_repr_pretty_``, ``str``) elsewhere."""

    def __init__(self, html_text: str, text: str, shown: list[Shown]) -> None:
        self.html = html_text
        self.text = text
        self.shown = shown

    def _repr_html_(self) -> str:
        return self.html

    def _repr_pretty_(self, p, cycle: bool) -> None:  # noqa: ANN001
        p.text(self.text)

    def __str__(self) -> str:
        return self.text

    __repr__ = __str__


def _header_lines(path: Path) -> list[str]:
    """The opening comment lines of a step file (what it computes, what changed, its bound)."""
    marker = "#" if path.suffix == ".py" else "//"
    out = []
    for line in path.read_text().splitlines():
        if not line.strip().startswith(marker):
            break
        out.append(line.strip().lstrip("/#").strip())
    return out[:3]


def show_source(source: str | Path, *, previous: str | Path | None = None, names: Iterable[str] | None = None,
                fold: Iterable[str] = (), title: str | None = None, header: bool = True,
                inline: bool = True) -> CodeView:
    """The functions that matter in ``source`` (``"p12/04_tiled.cu"``), or only ``names`` (in
    that order), marked against ``previous`` (another source, or None for no comparison); the
    functions in ``fold`` are shown folded (a click opens them). A previous file in another
    language (CUDA before a first Triton step) is named but not compared. ``inline=False``
    compares the files' text alone, without their helpers inlined (see :func:`compare`).

    A name of ``names`` that ``source`` no longer defines, because it moved into a header that
    ``source`` includes (a step's tile moved to ``kernels/common/``, say), is shown from that
    header, its caption naming it, and then ``source``'s own functions with it: what the moved
    function used to hold and ``source`` still does (the epilogue a shared template runs), so
    the code asked for is on the page whole."""
    path = source_path(source)
    other_language = None
    if previous and (Path(previous).suffix == ".py") != (path.suffix == ".py"):
        other_language, previous = previous, None
    all_fns = parse(path)
    wanted = list(names) if names is not None else None
    where: dict[str, str] = {}      # a function shown from a header: that header
    if wanted is not None:
        own = {f.name: f for f in all_fns}
        moved = {n: hit for n, hit in _helpers_with_files(path).items()
                 if n in wanted and n not in own}
        missing = [n for n in wanted if n not in own and n not in moved]
        if missing:
            raise KeyError(f"{source} has no function {', '.join(missing)}, nor do the headers it "
                           f"includes; it has: {', '.join(f.name for f in all_fns)}")
        fns = [own[n] if n in own else moved[n][1] for n in dict.fromkeys(wanted)]  # in the order asked
        if moved:
            fns += [f for f in all_fns if f.kind != "other" and f.name not in wanted]
        where = {n: _kernels_relative(h) for n, (h, _) in moved.items()}
    else:
        fns = [f for f in all_fns if f.kind != "other"] or all_fns
    prev_path = source_path(previous) if previous else None
    prev_fns = parse(prev_path) if prev_path else []
    prev_name = Path(previous).name if previous else ""
    prev_text = prev_path.read_text() if prev_path else ""
    helpers = header_helpers(path) if inline and prev_path else {}
    prev_helpers = header_helpers(prev_path) if inline and prev_path else {}
    shown = [compare(f, prev_fns, prev_text, helpers=helpers, previous_helpers=prev_helpers)
             for f in fns]
    fold = set(fold)

    head = title or str(source)
    against = f" — marked against {previous}" if previous else ""
    parts_html = [f'<div class="fk-step-code" style="max-width:100%;">'
                  f'<div style="{_CAPTION} font-weight:600;">{html.escape(head)}'
                  f'<span style="font-weight:400; color:#57606a;">{html.escape(against)}</span></div>']
    parts_text = [f"{head}{against}"]
    if header:
        lines = _header_lines(path)
        if lines:
            items = "".join(f"<div>{html.escape(t)}</div>" for t in lines)
            parts_html.append(f'<div style="{_HEADER}">{items}</div>')
            parts_text += [f"  {t}" for t in lines]
    if other_language:
        note = (f"The previous step, {other_language}, is written in another language: "
                f"every line here is new, so none is marked.")
        parts_html.append(f'<div style="{_CAPTION} color:#57606a;">{html.escape(note)}</div>')
        parts_text.append(f"  ({note})")
    if previous:
        parts_html.append(f'<div style="{_CAPTION} color:#57606a;">'
                          f'<span style="{_ADDED} display:inline; padding:0 4px;">green bar</span> '
                          f'= added or changed against {html.escape(prev_name)}</div>')
    for s in shown:
        caption = _caption(s, prev_name)
        if s.function.name in where:
            caption = f"{caption[:-1]}; from {where[s.function.name]})"
        cap = html.escape(caption)
        parts_text.append(f"--- {caption}")
        if s.unchanged or s.function.name in fold:
            if not s.unchanged:
                cap += " (folded: click to open)"
                parts_text[-1] += " (folded)"
            parts_html.append(f'<details style="{_CAPTION}"><summary><code>{cap}</code></summary>'
                              f'{_code_block(s, path, "fk-code-folded")}</details>')
            continue
        parts_html.append(f'<div style="{_CAPTION}"><code>{cap}</code></div>')
        parts_html.append(_code_block(s, path))
        hidden = s.function.folded
        for i, raw in enumerate(s.function.lines):
            if i in s.removed:
                parts_text.append(f"- {'':>5}   ({s.removed[i]} lines removed)")
            if hidden and hidden[0] <= i < hidden[1]:
                if i == hidden[0]:
                    parts_text.append(f"  {'':>5} | ... {hidden[1] - hidden[0]} more lines of docstring")
                continue
            mark = "+" if i in s.added else " "
            parts_text.append(f"{mark} {s.function.line + i:>5} | {raw}")
    parts_html.append("</div>")
    return CodeView("".join(parts_html), "\n".join(parts_text), shown)


def _kernels_relative(path: Path) -> str:
    """``common/hopper_fp16x3.cuh`` for a file under ``fusedkit/kernels``, else its name."""
    try:
        return path.resolve().relative_to(KERNELS.resolve()).as_posix()
    except ValueError:
        return path.name


def show_step(problem_key: str, slug: str, previous: str | None = None, *,
              names: Iterable[str] | None = None, fold: Iterable[str] = (),
              extra: Sequence[tuple[str, Sequence[str]]] = ()) -> CodeView:
    """The code of one ladder step: its kernel functions, highlighted, with the lines that
    changed against the previous step's file marked.

    ``previous`` is a slug or a source (``"p12/08_triton_fused.py"``); by default the previous
    step's file (:func:`previous_source`). ``names`` picks functions of the step file;
    ``extra`` adds functions of other files, as ``(source, names)`` pairs (the cuBLAS call
    in ``common/torch_cuda.h``, say), shown unmarked after the step's own.
    """
    from fusedkit import problems  # noqa: PLC0415

    v = problems.get(problem_key).variant(slug)
    if not v.source:
        return CodeView(f'<div style="{_CAPTION}"><b>{html.escape(slug)}</b>: PyTorch itself '
                        f'(no kernel file of ours): {html.escape(v.title)}</div>',
                        f"{slug}: PyTorch itself (no kernel file of ours): {v.title}", [])
    if previous is None:
        prev = previous_source(problem_key, slug)
    elif "/" in previous:
        prev = previous
    else:
        prev = problems.get(problem_key).variant(previous).source or None
    view = show_source(v.source, previous=prev, names=names, fold=fold)
    for src, fnames in extra:
        more = show_source(src, names=fnames, header=False,
                           title=f"{src} (shared code this step calls)")
        view = CodeView(view.html + more.html, view.text + "\n" + more.text, view.shown + more.shown)
    # The shared Triton pieces the step calls (tile order, dot loop, split ...), folded.
    given = {src for src, _ in extra}
    for src, fnames in shared_functions(v.source):
        if src not in given:
            more = show_source(src, names=fnames, fold=fnames, header=False,
                               title=f"{src} (shared code this step calls, folded: click to open)")
            view = CodeView(view.html + more.html, view.text + "\n" + more.text, view.shown + more.shown)
    return view
