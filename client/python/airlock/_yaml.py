"""The YAML a grade.yaml is written in, read with the standard library alone
(grading.load_grading_dir reads it with this, as `airlock grade` reads it):
block mappings and sequences by indentation, flow mappings and sequences on
one line ({a: 1, b: [x, y]}), plain, 'single' and "double" quoted scalars, | and >
block scalars, comments; plain scalars as YAML 1.2's core schema reads
them (null, true/false, integers, fractional numbers). Anchors, aliases,
tags and several documents are refused, naming the line."""
from __future__ import annotations

import re
from typing import Any, List, Optional, Tuple

_INT = re.compile(r"-?[0-9]+$")
_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$")


class YAMLError(ValueError):
    pass


def _scalar(text: str) -> Any:
    t = text.strip()
    if t in ("", "~", "null", "Null", "NULL"):
        return None
    if t in ("true", "True", "TRUE"):
        return True
    if t in ("false", "False", "FALSE"):
        return False
    if _INT.match(t):
        return int(t)
    if _FLOAT.match(t):
        return float(t)
    return t


def _strip_comment(line: str) -> str:
    """line without its comment (a # at its start or after a space, outside
    quotes)."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i].rstrip()
    return line.rstrip()


class _Flow:
    """A flow collection or a quoted scalar, from text at pos."""

    def __init__(self, text: str, lineno: int):
        self.s, self.i, self.lineno = text, 0, lineno

    def fail(self, why: str) -> None:
        raise YAMLError("line %d: %s" % (self.lineno, why))

    def ws(self) -> None:
        while self.i < len(self.s) and self.s[self.i] in " \t\n":
            self.i += 1

    def value(self, stop: str) -> Any:
        self.ws()
        if self.i >= len(self.s):
            self.fail("a value is missing")
        ch = self.s[self.i]
        if ch == "{":
            return self.mapping()
        if ch == "[":
            return self.sequence()
        if ch in "'\"":
            return self.quoted()
        if ch in "&*!|>":
            self.fail("%s is not read here (no anchors, aliases, tags or block scalars "
                      "inside a flow collection)" % ch)
        j = self.i
        while j < len(self.s) and self.s[j] not in stop:
            if self.s[j] == ":" and (j + 1 == len(self.s) or self.s[j + 1] in " \t" + stop):
                break
            j += 1
        text, self.i = self.s[self.i:j], j
        return _scalar(text)

    def quoted(self) -> str:
        q = self.s[self.i]
        self.i += 1
        out = []
        while True:
            if self.i >= len(self.s):
                self.fail("a quoted scalar does not end")
            ch = self.s[self.i]
            if q == "'" and ch == "'":
                if self.s[self.i + 1:self.i + 2] == "'":
                    out.append("'")
                    self.i += 2
                    continue
                self.i += 1
                return "".join(out)
            if q == '"' and ch == '"':
                self.i += 1
                return "".join(out)
            if q == '"' and ch == "\\":
                esc = self.s[self.i + 1:self.i + 2]
                simple = {"n": "\n", "t": "\t", "\\": "\\", '"': '"', "0": "\0", "r": "\r",
                          "/": "/", " ": " "}
                if esc in simple:
                    out.append(simple[esc])
                    self.i += 2
                elif esc in ("x", "u", "U"):
                    n = {"x": 2, "u": 4, "U": 8}[esc]
                    digits = self.s[self.i + 2:self.i + 2 + n]
                    try:
                        out.append(chr(int(digits, 16)))
                    except ValueError:
                        self.fail("a bad \\%s escape" % esc)
                    self.i += 2 + n
                else:
                    self.fail("an unknown escape \\%s" % esc)
                continue
            out.append(ch)
            self.i += 1

    def mapping(self) -> dict:
        self.i += 1
        out: dict = {}
        while True:
            self.ws()
            if self.s[self.i:self.i + 1] == "}":
                self.i += 1
                return out
            key = self.value(",:}")
            self.ws()
            if self.s[self.i:self.i + 1] == ":":
                self.i += 1
                val = self.value(",}")
            else:
                val = None
            if not isinstance(key, (str, int, float, bool)) and key is not None:
                self.fail("a mapping's key must be a scalar")
            if key in out:
                self.fail("%r appears twice" % (key,))
            out[key] = val
            self.ws()
            if self.s[self.i:self.i + 1] == ",":
                self.i += 1
            elif self.s[self.i:self.i + 1] != "}":
                self.fail("expected , or } in a flow mapping")

    def sequence(self) -> list:
        self.i += 1
        out: list = []
        while True:
            self.ws()
            if self.s[self.i:self.i + 1] == "]":
                self.i += 1
                return out
            out.append(self.value(",]"))
            self.ws()
            if self.s[self.i:self.i + 1] == ",":
                self.i += 1
            elif self.s[self.i:self.i + 1] != "]":
                self.fail("expected , or ] in a flow sequence")


class _Block:
    def __init__(self, text: str):
        self.lines: List[Tuple[int, int, str, str]] = []  # (lineno, indent, content, raw)
        for n, raw in enumerate(text.splitlines(), 1):
            if raw.strip() in ("---", "...") and not self.lines:
                continue
            if raw.strip() in ("---", "..."):
                raise YAMLError("line %d: one document only" % n)
            if "\t" in raw[:len(raw) - len(raw.lstrip())]:
                raise YAMLError("line %d: a tab in the indentation" % n)
            body = _strip_comment(raw)
            if body.strip():
                self.lines.append((n, len(body) - len(body.lstrip()), body.strip(), raw))
        self.k = 0
        self.raw = text.splitlines()

    def fail(self, lineno: int, why: str) -> None:
        raise YAMLError("line %d: %s" % (lineno, why))

    def inline(self, lineno: int, text: str, indent: int) -> Any:
        """A value written after "key:" or "- " on the line lineno."""
        if text[:1] in "&*!":
            self.fail(lineno, "anchors, aliases and tags are not read here")
        if text[:1] in "|>":
            return self.block_scalar(lineno, text, indent)
        if text[:1] in "{['\"":
            f = _Flow(text, lineno)
            v = f.value("")
            f.ws()
            if f.i != len(text):
                self.fail(lineno, "something after a value: %r" % text[f.i:])
            return v
        return _scalar(text)

    def block_scalar(self, lineno: int, head: str, indent: int) -> str:
        fold, chomp = head[0] == ">", head[1:].strip()
        if chomp not in ("", "-", "+"):
            self.fail(lineno, "block scalar: only |, |-, |+, > and its kin are read")
        out: List[str] = []
        n = lineno  # raw line numbers are 1-based: self.raw[n] is the next line
        body_indent: Optional[int] = None
        while n < len(self.raw):
            raw = self.raw[n]
            if raw.strip():
                ind = len(raw) - len(raw.lstrip(" "))
                if body_indent is None:
                    body_indent = ind
                if ind < body_indent or ind <= indent:
                    break
                out.append(raw[body_indent:])
            else:
                out.append("")
            n += 1
        while self.k < len(self.lines) and self.lines[self.k][0] <= n:
            self.k += 1
        while out and out[-1] == "" and chomp != "+":
            out.pop()
        text = ("\n".join(out) if not fold else
                re.sub(r"(?<!\n)\n(?!\n)", " ", "\n".join(out)))
        return text + ("" if chomp == "-" or not out else "\n")

    def node(self, indent: int) -> Any:
        if self.k >= len(self.lines):
            return None
        lineno, ind, content, _ = self.lines[self.k]
        if ind < indent:
            return None
        if content == "-" or content.startswith("- "):
            return self.sequence(ind)
        if self._key(content) is not None:
            return self.mapping(ind)
        self.k += 1
        return self.inline(lineno, content, ind - 1)

    @staticmethod
    def _key(content: str) -> Optional[Tuple[str, str]]:
        if content[:1] in "'\"":
            f = _Flow(content, 0)
            try:
                key = f.quoted()
            except YAMLError:
                return None
            rest = content[f.i:]
            if rest.startswith(":") and (len(rest) == 1 or rest[1] == " "):
                return key, rest[1:].strip()
            return None
        m = re.match(r"([^{\[#][^:]*?):(?:\s+(.*))?$", content)
        if not m:
            return None
        return m.group(1), (m.group(2) or "").strip()

    def mapping(self, indent: int) -> dict:
        out: dict = {}
        while self.k < len(self.lines):
            lineno, ind, content, _ = self.lines[self.k]
            if ind < indent:
                break
            if ind > indent:
                self.fail(lineno, "unexpected indentation")
            kv = self._key(content)
            if kv is None:
                self.fail(lineno, "expected KEY: VALUE")
            key, rest = kv
            key_v = _scalar(key) if content[:1] not in "'\"" else key
            if key_v in out:
                self.fail(lineno, "%r appears twice" % (key_v,))
            self.k += 1
            if rest:
                out[key_v] = self.inline(lineno, rest, indent)
            else:
                nxt = self.lines[self.k] if self.k < len(self.lines) else None
                if nxt and (nxt[1] > indent or (nxt[1] == indent and
                                                (nxt[2] == "-" or nxt[2].startswith("- ")))):
                    out[key_v] = self.node(nxt[1])
                else:
                    out[key_v] = None
        return out

    def sequence(self, indent: int) -> list:
        out: list = []
        while self.k < len(self.lines):
            lineno, ind, content, _ = self.lines[self.k]
            if ind != indent or not (content == "-" or content.startswith("- ")):
                if ind > indent:
                    self.fail(lineno, "unexpected indentation")
                break
            rest = content[1:].strip()
            if not rest:
                self.k += 1
                nxt = self.lines[self.k] if self.k < len(self.lines) else None
                out.append(self.node(nxt[1]) if nxt and nxt[1] > indent else None)
                continue
            # "- key: value" opens a mapping whose keys sit at the item's column
            item_indent = indent + (len(content) - len(rest))
            if self._key(rest) is not None and rest[:1] not in "{[":
                self.lines[self.k] = (lineno, item_indent, rest, self.lines[self.k][3])
                out.append(self.mapping(item_indent))
            else:
                self.k += 1
                out.append(self.inline(lineno, rest, indent))
        return out


def load(text: str) -> Any:
    """The document in text, as PyYAML's safe_load would read it (within
    what this module reads); YAMLError naming the line otherwise."""
    b = _Block(text)
    if not b.lines:
        return None
    v = b.node(b.lines[0][1])
    if b.k < len(b.lines):
        b.fail(b.lines[b.k][0], "unexpected content")
    return v
