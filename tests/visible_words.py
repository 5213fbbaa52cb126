"""Count the words a reader sees on an HTML report page, as the course's length target counts them.

Visible: the text of ``<body>`` outside ``<script>``, ``<style>``, ``<template>`` and elements
marked ``hidden``. A folded ``<details>`` shows its ``<summary>`` only, so the rest of it counts
for nothing (a ``<details>`` inside it neither). A word is a whitespace-separated token holding a
letter or a digit. Run as a script on report files to print their counts.
"""

from __future__ import annotations

import re
import sys
from html.parser import HTMLParser
from pathlib import Path

_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
         "track", "wbr"}
_UNSEEN = {"script", "style", "template", "head", "noscript"}
_WORD = re.compile(r"\w")


class _Words(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[tuple[str, bool]] = [("", True)]     # (tag, seen)
        self.words = 0

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag in _VOID:
            return
        parent, seen = self.stack[-1]
        if tag in _UNSEEN or any(name == "hidden" for name, _ in attrs):
            seen = False
        elif parent == "details" and tag != "summary":
            seen = False            # a folded details shows its summary only
        self.stack.append((tag, seen))

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self.stack) - 1, 0, -1):   # close up to the matching tag, if open
            if self.stack[i][0] == tag:
                del self.stack[i:]
                return

    def handle_data(self, data: str) -> None:
        if self.stack[-1][1]:
            self.words += sum(1 for token in data.split() if _WORD.search(token))


def visible_words(page: str) -> int:
    """The number of words a reader sees on the HTML ``page`` (module docstring)."""
    parser = _Words()
    parser.feed(page)
    parser.close()
    return parser.words


if __name__ == "__main__":
    total = 0
    for name in sys.argv[1:]:
        n = visible_words(Path(name).read_text(encoding="utf-8"))
        total += n
        print(f"{n:8d}  {name}")
    print(f"{total:8d}  total")
