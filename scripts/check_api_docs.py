#!/usr/bin/env python3
"""Lists the public declarations of reservoir's installed headers that docs/api.md does not name.

Usage: check_api_docs.py [--api docs/api.md] [--list] [INCLUDE_DIR ...]

INCLUDE_DIR: the public include directories (CTest passes the library target's interface include
directories). Without any, every `*/include` directory of the checkout but the internal
pal/include is scanned. Every `*.hpp` under them counts as public except those under a `detail/`
directory; a header moved into `detail/` or out of the public include directories drops out of
the check by itself, and a new public header joins it.

What counts as a public declaration (a heuristic parser, not a compiler: it reads declarations at
namespace and class scope, skipping function bodies):
  - in namespace reservoir and its nested namespaces except `detail`: classes, structs, enums,
    functions, variables and constants, type aliases;
  - their public members (functions, nested types, static constants, aliases; friend functions),
    and the enumerators of public enums;
  - macros #defined by the public headers.
Skipped: destructors, operator=, deleted functions, deduction guides, names ending in `_`, and the
namespace `detail`.

What counts as documented: the name appears inside a code span or code block of docs/api.md.
A member must appear in a section of its class: a Markdown heading that names the class (as a whole
word: `DynArray` does not match `ConcurrentDynArray`) down to the next heading of the same or a
higher level. A class's public constructors must be shown as `Name(` in that section. Namespace-
scope names and enumerators may appear anywhere. Operators count as documented when either
`operator@` or the bare `@` (`[]`, `==`, `<=>`) is a code span of the section.

Exit status: 0 when nothing is missing, 1 otherwise (the missing names are printed one a line as
`header: scope::name`). --list prints every public declaration found, documented or not.
"""
import argparse
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent

KEYWORDS = {
    "requires", "decltype", "noexcept", "sizeof", "alignof", "static_assert", "explicit",
    "return", "if", "while", "for", "switch", "catch", "throw", "alignas", "constexpr",
    "consteval", "static", "inline", "virtual", "const", "volatile", "typename", "template",
    "friend", "using", "typedef", "extern", "mutable", "auto", "void", "bool", "int", "char",
    "unsigned", "signed", "long", "short", "float", "double", "struct", "class", "enum", "union",
    "namespace", "override", "final", "nodiscard", "maybe_unused", "likely", "unlikely",
    "deprecated", "noreturn", "fallthrough",
}

TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<id>[A-Za-z_]\w*)
  | (?P<num>\d[\w.']*)
  | (?P<op><=>|->\*?|::|<<=|>>=|<=|>=|==|!=|&&|\|\||\+\+|--|[-+*/%&|^!~=<>]=?|[\[\](){};:,.?#@])
    """,
    re.VERBOSE,
)


def strip_source(text):
    """Removes comments, string and character literals and preprocessor lines; returns the code and
    the macros #defined."""
    macros = []
    out = []
    i = 0
    n = len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
            out.append(" ")
        elif c == '"' or c == "'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append('""' if c == '"' else "0")
            i = j + 1
        elif c == "#" and text[text.rfind("\n", 0, i) + 1:i].strip() == "":
            # A preprocessor line (with continuations).
            j = i
            while True:
                k = text.find("\n", j)
                if k < 0:
                    k = n
                    break
                if text[k - 1] == "\\":
                    j = k + 1
                    continue
                break
            line = text[i:k]
            m = re.match(r"#\s*define\s+([A-Za-z_]\w*)", line)
            if m:
                macros.append(m.group(1))
            i = k
        else:
            out.append(c)
            i += 1
    return "".join(out), macros


def tokenize(code):
    tokens = []
    pos = 0
    while pos < len(code):
        m = TOKEN.match(code, pos)
        if not m:
            pos += 1
            continue
        pos = m.end()
        if m.lastgroup != "ws":
            tokens.append(m.group(0))
    return tokens


def skip_balanced(tokens, i, open_tok, close_tok):
    """tokens[i] == open_tok; returns the index just past its matching close_tok."""
    depth = 0
    while i < len(tokens):
        if tokens[i] == open_tok:
            depth += 1
        elif tokens[i] == close_tok:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return i


def strip_template_headers(stmt):
    """Drops `template <...>` headers (and a following requires-clause's leading keyword)."""
    out = []
    i = 0
    while i < len(stmt):
        if stmt[i] == "template" and i + 1 < len(stmt) and stmt[i + 1] == "<":
            depth = 0
            j = i + 1
            while j < len(stmt):
                if stmt[j] == "<":
                    depth += 1
                elif stmt[j] == ">":
                    depth -= 1
                elif stmt[j] == ">>":
                    depth -= 2
                if depth <= 0:
                    break
                j += 1
            i = j + 1
            continue
        out.append(stmt[i])
        i += 1
    return out


def strip_attributes(tokens):
    """Drops [[...]] attributes and alignas(...) from a declaration's tokens."""
    out = []
    i = 0
    while i < len(tokens):
        if tokens[i] == "[" and i + 1 < len(tokens) and tokens[i + 1] == "[":
            j = i + 2
            while j + 1 < len(tokens) and not (tokens[j] == "]" and tokens[j + 1] == "]"):
                j += 1
            i = j + 2
            continue
        if tokens[i] == "alignas" and i + 1 < len(tokens) and tokens[i + 1] == "(":
            i = skip_balanced(tokens, i + 1, "(", ")")
            continue
        out.append(tokens[i])
        i += 1
    return out


def declared_name(stmt, class_name):
    """The name a declaration statement (tokens before its `;` or body) declares, or None."""
    stmt = strip_template_headers(strip_attributes(stmt))
    if not stmt:
        return None
    if stmt[0] in ("static_assert", "using") and "=" not in stmt:
        return None  # using-declarations and static_assert declare nothing new
    if stmt[0] == "friend" and len(stmt) > 1 and stmt[1] in ("class", "struct"):
        return None
    if stmt[0] in ("public", "private", "protected"):
        return None
    if stmt[0] == "using":
        return stmt[1] if len(stmt) > 1 else None
    if stmt[0] == "typedef":
        return stmt[-1]
    # A function: the identifier (or operator) before the first `(` outside template arguments.
    angle = 0
    for i, t in enumerate(stmt):
        if t == "=" and angle == 0 and (i == 0 or stmt[i - 1] != "operator"):
            break  # a variable's initializer, or `= delete` / `= default` after the parameters
        if t == "<" and i > 0 and re.match(r"[A-Za-z_]", stmt[i - 1]) and stmt[i - 1] != "operator":
            angle += 1
        elif t == ">" and angle > 0:
            angle -= 1
        elif t == ">>" and angle > 0:
            angle = max(0, angle - 2)
        elif t == "(" and angle == 0 and i > 0:
            prev = stmt[i - 1]
            if "operator" in stmt[:i]:
                k = stmt.index("operator")
                op = "".join(stmt[k + 1:i]) if i > k + 1 else ""
                if op == "" and i + 1 < len(stmt) and stmt[i + 1] == ")":
                    op = "()"
                if k + 1 < len(stmt) and re.match(r"[A-Za-z_]", stmt[k + 1]):
                    op = " " + " ".join(stmt[k + 1:i])  # a conversion: operator bool
                return "operator" + op
            if prev == "~":
                return None
            if i >= 2 and stmt[i - 2] == "::":
                return None  # an out-of-class definition of a member declared in its class
            if re.match(r"[A-Za-z_]\w*$", prev) and prev not in KEYWORDS:
                if "->" in stmt[i:] and "auto" not in stmt[:i]:
                    return None  # a deduction guide
                return prev
            return None
    # A variable, constant or forward declaration: the last identifier before `=`, `{` or the end.
    last = None
    for t in stmt:
        if t in ("=", "{", ":"):
            break
        if re.match(r"[A-Za-z_]\w*$", t) and t not in KEYWORDS:
            last = t
    return last


def parse_header(path):
    """Yields (scope, name, kind) for every public declaration of one header."""
    code, macros = strip_source(path.read_text())
    for m in macros:
        yield ("", m, "macro")
    tokens = tokenize(code)
    # The scope stack: entries (kind, name, access); kind in namespace/class/enum/skip.
    stack = [("namespace", "", "public")]
    stmt = []
    paren = 0
    i = 0

    def scope_names():
        return [s[1] for s in stack if s[1]]

    def visible():
        for kind, name, access in stack:
            if kind == "skip" or access != "public":
                return False
        names = scope_names()
        return bool(names) and names[0].split("::")[0] == "reservoir"

    while i < len(tokens):
        t = tokens[i]
        top = stack[-1]
        if top[0] == "enum":
            # Enumerators: identifiers at the start of each comma-separated item.
            if t == "}":
                stack.pop()
                i += 1
                stmt = []
                continue
            if re.match(r"[A-Za-z_]\w*$", t) and (not stmt or stmt[-1] == ","):
                if visible():
                    yield ("::".join(scope_names()), t, "enumerator")
            stmt.append(t)
            i += 1
            continue
        if t == "(":
            paren += 1
        elif t == ")":
            paren -= 1
        if paren > 0 or t in ("(", ")"):
            stmt.append(t)
            i += 1
            continue
        if t == ":" and top[0] == "class" and stmt and stmt[-1] in ("public", "private", "protected") \
                and len(stmt) == 1:
            stack[-1] = (top[0], top[1], stmt[-1])
            stmt = []
            i += 1
            continue
        if t == ";":
            decl = stmt
            stmt = []
            i += 1
            yield from emit(decl, stack, visible, scope_names)
            continue
        if t == "}":
            stack.pop()
            stmt = []
            i += 1
            continue
        if t == "{":
            head = strip_attributes(strip_template_headers(stmt))
            if head[:2] == ["inline", "namespace"]:
                head = head[1:]
            if head and head[0] == "namespace":
                name = "".join(head[1:])
                parts = name.split("::") if name else [""]
                kind = "skip" if "detail" in parts or not name else "namespace"
                # `namespace a::b {` opens both; closing it pops one entry.
                stack.append((kind, "::".join(parts), "public"))
                stmt = []
                i += 1
                continue
            kw = next((k for k in ("enum", "class", "struct", "union") if k in head[:3]), None)
            if kw and "(" not in head and "=" not in head and head[0] != "friend":
                k = head.index(kw)
                rest = [x for x in head[k + 1:] if x not in ("class", "struct")]
                name = rest[0] if rest and re.match(r"[A-Za-z_]\w*$", rest[0]) else ""
                if name in ("final",):
                    name = ""
                qualified = rest[1:2] == ["::"]  # `struct std::x<...>`: a specialization
                if name and visible() and not qualified and "<" not in rest[1:2]:
                    yield ("::".join(scope_names()), name, "type")
                if kw == "enum":
                    stack.append(("enum", name, "public"))
                else:
                    access = "public" if kw == "struct" else "private"
                    if qualified or (rest[1:2] == ["<"]):
                        stack.append(("skip", name, "public"))
                    else:
                        stack.append(("class", name, access))
                stmt = []
                i += 1
                continue
            # A function body, an initializer or a requires-expression: the statement declared
            # so far is complete; skip the braces.
            yield from emit(stmt, stack, visible, scope_names)
            stmt = []
            i = skip_balanced(tokens, i, "{", "}")
            if i < len(tokens) and tokens[i] == ";":
                i += 1
            continue
        stmt.append(t)
        i += 1


def emit(decl, stack, visible, scope_names):
    if not decl or not visible():
        return
    top = stack[-1]
    class_name = top[1] if top[0] == "class" else None
    if "=" in decl:
        k = decl.index("=")
        if k + 1 < len(decl) and decl[k + 1] in ("delete",) and "(" in decl[:k]:
            return
    name = declared_name(decl, class_name)
    if not name or name.endswith("_") or name in KEYWORDS:
        return
    if name == "operator=":
        return
    kind = "member" if class_name else "free"
    if class_name and name == class_name:
        kind = "constructor"
    yield ("::".join(scope_names()), name, kind)


def public_headers(include_dirs):
    headers = []
    for d in include_dirs:
        d = pathlib.Path(d)
        for h in sorted(d.rglob("*.hpp")):
            if "detail" in h.relative_to(d).parts:
                continue
            headers.append(h)
    return headers


def code_text(markdown):
    """The text of every code span and code block, joined."""
    blocks = re.findall(r"```.*?```", markdown, re.S)
    rest = re.sub(r"```.*?```", " ", markdown, flags=re.S)
    spans = re.findall(r"`([^`\n]+)`", rest)
    return "\n".join(blocks + spans), set(s.strip() for s in spans)


def sections(markdown, class_name):
    """The text of every section whose heading names class_name as a whole word."""
    lines = markdown.split("\n")
    out = []
    in_code = False
    heads = []
    for idx, line in enumerate(lines):
        if line.startswith("```"):
            in_code = not in_code
        if not in_code:
            m = re.match(r"(#+)\s+(.*)", line)
            if m:
                heads.append((idx, len(m.group(1)), m.group(2)))
    for n, (idx, level, text) in enumerate(heads):
        if not re.search(r"(?<![\w])" + re.escape(class_name) + r"(?![\w])", text):
            continue
        end = len(lines)
        for idx2, level2, _ in heads[n + 1:]:
            if level2 <= level:
                end = idx2
                break
        out.append("\n".join(lines[idx:end]))
    return "\n".join(out)


def documented(name, text, spans):
    if name.startswith("operator"):
        op = name[len("operator"):].strip()
        return ("operator" + op) in text.replace(" ", "") or op in spans or \
            ("operator " + op) in text
    return re.search(r"(?<![\w])" + re.escape(name) + r"(?![\w])", text) is not None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--api", default=str(ROOT / "docs" / "api.md"))
    ap.add_argument("--list", action="store_true", help="print every public declaration found")
    ap.add_argument("include_dirs", nargs="*")
    args = ap.parse_args()
    include_dirs = args.include_dirs or sorted(
        str(p) for p in ROOT.glob("*/include") if p.parent.name != "pal")  # pal is internal
    headers = public_headers(include_dirs)
    if not headers:
        print("check_api_docs.py: no public headers under " + ", ".join(include_dirs),
              file=sys.stderr)
        return 1
    api = pathlib.Path(args.api).read_text()
    all_code, all_spans = code_text(api)
    missing = []
    seen = set()
    for h in headers:
        for scope, name, kind in parse_header(h):
            key = (scope, name, kind)
            if key in seen:
                continue
            seen.add(key)
            label = (scope + "::" if scope else "") + name
            if args.list:
                print(f"{h.name}: {label} ({kind})")
            if kind in ("member", "constructor"):
                cls = scope.split("::")[-1]
                text, spans = code_text(sections(api, cls))
                if kind == "constructor":
                    ok = (name + "(") in text or (name + "{") in text
                else:
                    ok = documented(name, text, spans)
            else:
                ok = documented(name, all_code, all_spans)
            if not ok:
                missing.append(f"{h.relative_to(ROOT) if h.is_relative_to(ROOT) else h}: "
                               f"{label}" + (" (constructor)" if kind == "constructor" else ""))
    for m in missing:
        print(m)
    sys.stdout.flush()
    if missing:
        print(f"check_api_docs.py: {len(missing)} public declarations are not in "
              f"{args.api} (document each where its class is documented, or move it to "
              f"detail/)", file=sys.stderr)
        return 1
    print(f"check_api_docs.py: every public declaration of {len(headers)} headers is in "
          f"{pathlib.Path(args.api).name} ({len(seen)} names)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
