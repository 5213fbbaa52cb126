"""Code on the page: what a step changed, as a short diff, with the whole file folded under it.

A file is read by function (Triton kernels and the Python that launches them; in CUDA and C++ every
function, found by matching braces), each with the comment block above it. A step shows the code
lines of its kernels and device helpers that differ from their counterparts in the previous step's
file (same name, else the most similar), comments left out. The HTML carries its own inline styles
(Pygments), so it reads the same in JupyterLab and in the exported report.
"""

from __future__ import annotations

import ast
import difflib
import html
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from fusedkit import problems
from fusedkit.kernels import step_path

CUDA_SUFFIXES = (".cu", ".cuh", ".h", ".hpp", ".cpp", ".cc")
MAX_DIFF = 40   # the most diff lines a step shows; the rest of a larger change is in the folded listing
SIMILAR = 0.3   # a function without a namesake is diffed against the most similar one this alike, else new

_BOX = ("overflow-x:auto; max-width:100%; box-sizing:border-box; margin:2px 0 8px 0; "
        "background:#f8f8f8; border:1px solid #e1e4e8; border-radius:4px; "
        "font-family:ui-monospace,Menlo,Consolas,'DejaVu Sans Mono',monospace; font-size:12px;")
_PRE = "margin:0; padding:4px 6px; background:transparent; border:0; white-space:pre;"
_SIGN = {"+": "background:#e6ffec; display:block;", "-": "background:#ffebe9; display:block;",
         " ": "display:block;", "@": "color:#57606a; display:block; font-style:italic;"}
_CAPTION = "font-size:12px; margin:6px 0 2px 0; color:#24292f;"


@dataclass(frozen=True)
class Function:
    """One function of a source file, with the comment block above it; ``kind``: ``kernel``, ``device``
    (a helper kernels call), ``launcher`` (host code that launches kernels) or ``other``."""

    name: str
    source: str
    kind: str


# -- parsing -----------------------------------------------------------------------------------

def _comment_block_above(lines: list[str], first: int, marker: str) -> int:
    i = first
    while i > 0 and lines[i - 1].strip().startswith(marker) and not re.match(r"^\s*(//|#)\s*[-=]{8,}\s*$",
                                                                               lines[i - 1]):
        i -= 1
    return i


def _python_functions(text: str) -> list[Function]:
    lines = text.splitlines()
    nodes = [n for n in ast.parse(text).body if isinstance(n, ast.FunctionDef)]
    calls = {n.name: {c.func.id if isinstance(c.func, ast.Name) else getattr(c.func, "attr", "")
                      for c in ast.walk(n) if isinstance(c, ast.Call)} for n in nodes}
    kinds = {n.name: "kernel" if any("jit" in ast.unparse(d) for d in n.decorator_list) else
             "launcher" if any(isinstance(c, ast.Call) and isinstance(c.func, ast.Subscript)
                               for c in ast.walk(n)) else "other" for n in nodes}
    changed = True
    while changed:          # a wrapper that calls a launcher is a launcher too
        changed = False
        for n in nodes:
            if kinds[n.name] == "other" and any(kinds.get(c) == "launcher" for c in calls[n.name]):
                kinds[n.name], changed = "launcher", True
    out = []
    for n in nodes:
        start = _comment_block_above(lines, min([n.lineno] + [d.lineno for d in n.decorator_list]) - 1, "#")
        out.append(Function(n.name, "\n".join(lines[start:n.end_lineno]), kinds[n.name]))
    return out


def _mask(text: str) -> str:
    """``text`` with comments, strings and preprocessor lines blanked (newlines kept)."""
    out, i, n = list(text), 0, len(text)
    while i < n:
        if text.startswith("//", i) or (text[i] == "#" and text[:i].rsplit("\n", 1)[-1].strip() == ""):
            j = text.find("\n", i)
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = j + 2 if j >= 0 else n
        elif text[i] in "\"'":
            j = i + 1
            while j < n and text[j] not in (text[i], "\n"):
                j += 2 if text[j] == "\\" else 1
            j += 1
        else:
            i += 1
            continue
        j = n if j < 0 else min(j, n)
        out[i:j] = [c if c == "\n" else " " for c in out[i:j]]
        i = j
    return "".join(out)


def _matching_brace(code: str, at: int) -> int:
    depth = 0
    for j in range(at, len(code)):
        depth += {"{": 1, "}": -1}.get(code[j], 0)
        if depth == 0:
            return j
    return len(code) - 1


def _cuda_functions(text: str) -> list[Function]:
    code, lines, out = _mask(text), text.splitlines(), []
    i, last, parens = 0, 0, 0
    while i < len(code):
        c = code[i]
        if c in "()":
            parens += 1 if c == "(" else -1
        elif c == "{" and parens > 0:                 # a braced initialiser in a parameter list
            i = _matching_brace(code, i)
        elif c in ";}":
            last = i + 1
        elif c == "{":
            header = code[last:i]
            if re.search(r'\bnamespace\b[^(){};]*$|extern\s+"C"\s*$', header):
                last = i + 1                          # transparent: functions live inside
            else:
                end = _matching_brace(code, i)
                fn = _as_function(code, lines, last, header, end)
                if fn is not None:
                    out.append(fn)
                i, last = end, end + 1
        i += 1
    return out


def _as_function(code: str, lines: list[str], start: int, header: str, end: int) -> Function | None:
    struct = re.fullmatch(r"\s*(?:template\s*<[^{};]*>\s*)?(?:struct|class)\s+([A-Za-z_]\w*)\s*(?::[^{};]*)?",
                          header)
    if struct and "__device__" in code[start + len(header):end]:
        name, kind = struct.group(1), "device"     # an epilogue functor: shown whole
    else:
        if (not header.strip() or ")" not in header
                or re.search(r"^\s*(?:namespace|struct|class|enum|union)|=\s*$", header)):
            return None
        close, depth, open_ = header.rstrip().rfind(")"), 0, -1
        for j in range(close, -1, -1):
            depth += {")": 1, "(": -1}.get(header[j], 0)
            if depth == 0:
                open_ = j
                break
        m = re.search(r"([A-Za-z_]\w*(?:::[A-Za-z_]\w*)*)\s*$", header[:open_]) if open_ > 0 else None
        if m is None or m.group(1) in ("if", "for", "while", "switch", "return", "sizeof"):
            return None
        name = m.group(1).split("::")[-1]
        kind = "kernel" if "__global__" in header else "device" if "__device__" in header else "launcher"
    first = code.count("\n", 0, start + len(header) - len(header.lstrip()))
    top = _comment_block_above(lines, first, "//")
    return Function(name, "\n".join(lines[top:code.count("\n", 0, end) + 1]), kind)


def parse(path: str | Path) -> list[Function]:
    """Every top-level function of a Python or CUDA/C++ file, in file order."""
    path = Path(path)
    if path.suffix == ".py":
        return _python_functions(path.read_text())
    if path.suffix in CUDA_SUFFIXES:
        return _cuda_functions(path.read_text())
    raise ValueError(f"path={path}: not a Python or CUDA/C++ source; allowed suffixes: .py, "
                     f"{', '.join(CUDA_SUFFIXES)}")


def source_path(source: str) -> Path:
    """``"p12/03_cublas_epilogue.cu"`` or ``"common/torch_cuda.h"`` as a file path."""
    folder, _, filename = source.partition("/")
    return step_path(folder, filename)


def previous_source(problem_key: str, slug: str) -> str | None:
    """The file of the step before ``slug`` (the nearest lower step number with another file)."""
    p = problems.get(problem_key)
    v = p.variant(slug)
    before = [w for w in p.ladder() if w.source and w.source != v.source and w.number < v.number]
    return max(before, key=lambda w: w.number).source if v.source and before else None


# -- the diff ----------------------------------------------------------------------------------

def _code(fn: Function) -> list[str]:
    """The code lines of ``fn``, comments (whole-line and trailing) and blank lines left out."""
    marker = "#" if fn.source.lstrip().startswith(("@", "def", "#")) else "//"
    return [_uncommented(raw, marker) for raw, m in zip(fn.source.splitlines(), _mask(fn.source).splitlines())
            if m.strip()]


def _uncommented(line: str, marker: str) -> str:
    """``line`` without a trailing comment (a ``marker`` outside string quotes)."""
    quote = ""
    for i, c in enumerate(line):
        if quote:
            quote = "" if c == quote else quote
        elif c in "\"'":
            quote = c
        elif line.startswith(marker, i):
            return line[:i].rstrip()
    return line.rstrip()


def _norm(lines: Sequence[str]) -> list[str]:
    return [" ".join(line.split()) for line in lines]


def diff_lines(source: str, previous: str | None) -> list[tuple[str, str]]:
    """What the kernels and device helpers of ``source`` changed against their counterparts in
    ``previous``: (sign, line) pairs, sign ``+``, ``-``, `` `` (context) or ``@`` (a function)."""
    fns = [f for f in parse(source_path(source)) if f.kind in ("kernel", "device")]
    before = parse(source_path(previous)) if previous else []
    out: list[tuple[str, str]] = []
    for fn in sorted(fns, key=lambda f: f.kind != "kernel"):   # kernels first
        cur = _code(fn)
        match = next((p for p in before if p.name == fn.name), None)
        if match is None and before:
            best = max(before, key=lambda p: difflib.SequenceMatcher(None, _norm(_code(p)), _norm(cur)).ratio())
            if difflib.SequenceMatcher(None, _norm(_code(best)), _norm(cur)).ratio() >= SIMILAR:
                match = best
        old = _code(match) if match else []
        ops = difflib.SequenceMatcher(None, _norm(old), _norm(cur), autojunk=False).get_grouped_opcodes(1)
        chunk: list[tuple[str, str]] = []
        for group in ops:
            for tag, i1, i2, j1, j2 in group:
                if tag == "equal":
                    chunk += [(" ", line) for line in cur[j1:j2]]
                else:
                    chunk += [("-", line) for line in old[i1:i2]] + [("+", line) for line in cur[j1:j2]]
        if any(sign != " " for sign, _ in chunk):
            against = f" (against {match.name})" if match and match.name != fn.name else \
                      "" if match else " (new)"
            out += [("@", f"{fn.name}{against}")] + chunk
    return out


def _highlight(text: str, suffix: str) -> list[str]:
    from pygments import highlight  # noqa: PLC0415
    from pygments.formatters import HtmlFormatter  # noqa: PLC0415
    from pygments.lexers import CudaLexer, PythonLexer  # noqa: PLC0415

    lexer = PythonLexer() if suffix == ".py" else CudaLexer()
    got = highlight(text, lexer, HtmlFormatter(noclasses=True, nowrap=True)).split("\n")
    return (got + [""] * len(text.splitlines()))[:len(text.splitlines())]


class CodeView:
    """Code for display: HTML in a notebook and in the report, plain text elsewhere."""

    def __init__(self, html_text: str, text: str) -> None:
        self.html, self.text = html_text, text

    def _repr_html_(self) -> str:
        return self.html

    def __repr__(self) -> str:
        return self.text

    def _repr_pretty_(self, p, cycle: bool) -> None:  # noqa: ANN001
        p.text(self.text)

    def __add__(self, other: "CodeView") -> "CodeView":
        return CodeView(self.html + other.html, self.text + "\n" + other.text)


def _block(lines: list[tuple[str, str]], suffix: str) -> str:
    marked = _highlight("\n".join(line for _, line in lines), suffix)
    rows = "".join(f'<span style="{_SIGN[s]}">{"@@ " + html.escape(t) if s == "@" else s + " " + h}</span>'
                   for (s, t), h in zip(lines, marked))
    return f'<div class="fk-code" style="{_BOX}"><pre style="{_PRE}">{rows}</pre></div>'


def listing(source: str, names: Iterable[str] | None = None, *, title: str = "",
            folded: bool = True) -> CodeView:
    """``source`` whole, or only its functions ``names``, highlighted; folded in a
    ``<details>`` whose summary says what it holds (``folded=False``: shown open)."""
    path = source_path(source)
    if names is None:
        text = path.read_text()
    else:
        fns = {f.name: f for f in parse(path)}
        missing = [n for n in names if n not in fns]
        if missing:
            raise KeyError(f"names={missing}: not functions of {source}; it has {', '.join(fns)}")
        text = "\n\n".join(fns[n].source for n in names)
    what = title or (f"{source}" + (f": {', '.join(names)}" if names is not None else "")
                     + f" ({len(text.splitlines())} lines)")
    body = _block([(" ", line) for line in text.splitlines()], path.suffix)
    if not folded:
        return CodeView(f'<div style="{_CAPTION}"><code>{html.escape(what)}</code></div>{body}', f"{what}\n{text}")
    return CodeView(f'<details style="{_CAPTION}"><summary>{html.escape(what)}</summary>{body}</details>',
                    f"{what} (folded)")


def show_step(problem_key: str, slug: str, previous: str | None = None, *,
              extra: Sequence[tuple[str, Sequence[str]]] = ()) -> CodeView:
    """One ladder step's code: what changed against the previous file (``previous``: a slug or a
    source), at most :data:`MAX_DIFF` lines, then the whole file and each ``extra`` folded."""
    p = problems.get(problem_key)
    v = p.variant(slug)
    if not v.source:
        return CodeView(f'<div style="{_CAPTION}">`{slug}`: PyTorch itself, no kernel of ours.</div>',
                        f"{slug}: PyTorch itself")
    prev = (previous_source(problem_key, slug) if previous is None else
            previous if "/" in previous else p.variant(previous).source or None)
    if prev and (Path(prev).suffix == ".py") != (Path(v.source).suffix == ".py"):
        prev = None                       # another language: every line is new
    lines = diff_lines(v.source, prev)
    changed = sum(s in "+-" for s, _ in lines)
    against = f"against {prev}" if prev else "new (no earlier file in its language)"
    head = f"{v.source}, {against}: {changed} lines changed"
    more = f"; the first {MAX_DIFF} lines of the diff shown" if len(lines) > MAX_DIFF else ""
    view = CodeView(f'<div style="{_CAPTION}"><code>{html.escape(head + more)}</code></div>'
                    + _block(lines[:MAX_DIFF], Path(v.source).suffix),
                    head + more + "\n" + "\n".join(f"{s} {t}" for s, t in lines[:MAX_DIFF]))
    view += listing(v.source, title=f"the whole of {v.source} ({len(source_path(v.source).read_text().splitlines())} lines)")
    for src, fnames in extra:
        view += listing(src, fnames)
    return view
