#!/usr/bin/env python3
"""Checks debuggers/natvis/reservoir.natvis without Visual Studio.

    check_natvis.py reservoir.natvis HEADER...

Not Microsoft's natvis.xsd (not available offline): a structural check of the subset of the natvis
schema the file uses, written from the natvis documentation, plus checks of what a debugger would
otherwise only report at run time:
  - well-formed XML in the natvis 2010 namespace;
  - only the elements and attributes of that subset, each under the parent and in the order the
    schema allows, with the required ones present (Type Name, ArrayItems Size and ValuePointer);
  - attribute values from the schema's enumerations (Priority, Optional, Inheritable);
  - balanced parentheses in expressions and balanced {expression} parts in DisplayStrings;
  - every intrinsic called (`size()`) defined in the same Type; $T1 only in template types;
  - for each type, at least one of its entries resolves against the headers: every member it
    names (identifiers ending in '_', such as data_ or arena_.base_) is declared there, and of
    each set of Optional intrinsics with one name, at least one alternative's members are.
Exit status 0 if all hold, 1 with a list of what does not.
"""

import re
import sys
import xml.etree.ElementTree as ET

NS = 'http://schemas.microsoft.com/vstudio/debugger/natvis/2010'

# element -> (allowed attributes, required attributes, children in schema order, text allowed)
SCHEMA = {
    'AutoVisualizer': (set(), set(), ['Type'], False),
    'Type': ({'Name', 'Priority', 'Inheritable'}, {'Name'},
             ['AlternativeType', 'Intrinsic', 'DisplayString', 'Expand'], False),
    'AlternativeType': ({'Name'}, {'Name'}, [], False),
    'Intrinsic': ({'Name', 'Expression', 'Optional'}, {'Name', 'Expression'}, [], False),
    'DisplayString': ({'Condition', 'Optional'}, set(), [], True),
    'Expand': (set(), set(), ['Item', 'ArrayItems'], False),
    'Item': ({'Name', 'Condition', 'ExcludeView', 'IncludeView', 'Optional'}, {'Name'}, [], True),
    'ArrayItems': ({'Condition', 'Optional'}, set(), ['Size', 'ValuePointer'], False),
    'Size': ({'Condition'}, set(), [], True),
    'ValuePointer': ({'Condition'}, set(), [], True),
}
REQUIRED_CHILDREN = {'ArrayItems': {'Size', 'ValuePointer'}}
ENUMS = {
    'Priority': {'Low', 'MediumLow', 'Medium', 'MediumHigh', 'High'},
    'Optional': {'true', 'false'},
    'Inheritable': {'true', 'false'},
}


def local(tag):
    return tag.split('}', 1)[1] if tag.startswith('{') else tag


def balanced(text, open_, close):
    depth = 0
    for c in text:
        depth += (c == open_) - (c == close)
        if depth < 0:
            return False
    return depth == 0


def display_parts(text):
    """The {expression} parts of a DisplayString ({{ and }} are literal braces), or None if its
    braces do not pair up."""
    text = text.replace('{{', '').replace('}}', '')
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        if c == '{':
            if depth == 0:
                start = i + 1
            depth += 1
        elif c == '}':
            depth -= 1
            if depth < 0:
                return None
            if depth == 0:
                parts.append(text[start:i])
    return parts if depth == 0 else None


def members(expression):
    """The data members an expression names: identifiers ending in '_' that are not reserved
    names of the standard library (_Storage, _Value)."""
    return set(re.findall(r'(?<![\w$])([a-z][a-z0-9_]*_)(?!\w)', expression))


class Check:
    def __init__(self, declared):
        self.errors = []
        self.declared = declared

    def error(self, where, what):
        self.errors.append('%s: %s' % (where, what))

    def element(self, e, where):
        name = local(e.tag)
        if not e.tag.startswith('{%s}' % NS):
            self.error(where, '<%s> is not in the natvis namespace' % name)
        if name not in SCHEMA:
            self.error(where, '<%s> is not in the subset this file may use' % name)
            return
        allowed, required, children, text = SCHEMA[name]
        for a in e.attrib:
            if a not in allowed:
                self.error(where, '<%s> has no attribute %s' % (name, a))
            elif a in ENUMS and e.attrib[a] not in ENUMS[a]:
                self.error(where, '%s="%s" is not one of %s' % (a, e.attrib[a], sorted(ENUMS[a])))
        for a in required - set(e.attrib):
            self.error(where, '<%s> needs the attribute %s' % (name, a))
        if not text and (e.text or '').strip():
            self.error(where, '<%s> holds text' % name)
        if text and not (e.text or '').strip():
            self.error(where, '<%s> is empty' % name)
        order = -1
        seen = set()
        for child in e:
            cname = local(child.tag)
            if cname not in children:
                self.error(where, '<%s> may not hold <%s>' % (name, cname))
                continue
            position = children.index(cname)
            if position < order:
                self.error(where, '<%s> comes after <%s>: the schema orders %s' % (
                    cname, children[order], ', '.join(children)))
            order = max(order, position)
            seen.add(cname)
            self.element(child, '%s/%s' % (where, cname))
        for missing in REQUIRED_CHILDREN.get(name, set()) - seen:
            self.error(where, '<%s> needs <%s>' % (name, missing))

    def expressions(self, t, where):
        """(expression, Optional intrinsic name or None) for every expression in Type t."""
        found = []
        for e in t.iter():
            name = local(e.tag)
            if name == 'Intrinsic':
                optional = e.get('Optional') == 'true'
                found.append((e.get('Expression', ''), e.get('Name') if optional else None))
            elif name == 'DisplayString':
                parts = display_parts(e.text or '')
                if parts is None:
                    self.error(where, 'unbalanced braces in DisplayString "%s"' % e.text)
                    parts = []
                found += [(p, None) for p in parts]
            elif name in ('Item', 'Size', 'ValuePointer'):
                found.append(((e.text or '').strip(), None))
            if e.get('Condition'):
                found.append((e.get('Condition'), None))
        return found

    def type_entry(self, t, where):
        """Checks one Type's expressions; returns whether it resolves against the headers."""
        intrinsics = {e.get('Name') for e in t if local(e.tag) == 'Intrinsic'}
        template = '<*>' in t.get('Name', '')
        resolves = True
        alternatives = {}
        for expression, optional in self.expressions(t, where):
            if not balanced(expression, '(', ')'):
                self.error(where, 'unbalanced parentheses in "%s"' % expression)
            for call in re.findall(r'\b(\w+)\(\)', expression):
                if call not in intrinsics:
                    self.error(where, '"%s" calls %s(), not an intrinsic of this type' % (
                        expression, call))
            if '$T' in expression and not template:
                self.error(where, '"%s" names a template argument of a non-template' % expression)
            missing = members(expression) - self.declared
            if optional is not None:
                alternatives.setdefault(optional, []).append(not missing)
            elif missing:
                resolves = False
        return resolves and all(any(ok) for ok in alternatives.values())

    def run(self, root):
        if root.tag != '{%s}AutoVisualizer' % NS:
            self.error('root', 'the root is %s, not AutoVisualizer in %s' % (root.tag, NS))
            return
        self.element(root, 'AutoVisualizer')
        groups = {}
        for i, t in enumerate(root):
            if local(t.tag) != 'Type':
                continue
            where = 'Type[%d] %s (Priority %s)' % (i, t.get('Name'), t.get('Priority', 'Medium'))
            groups.setdefault(t.get('Name'), []).append(self.type_entry(t, where))
        for name, results in groups.items():
            if not any(results):
                self.error(name, 'no entry resolves: each names a member the headers do not '
                           'declare')


def declared_members(headers):
    """Identifiers declared as data members in the headers: `name_ = ...;`, `name_;`, `name_{`."""
    found = set()
    for path in headers:
        with open(path, encoding='utf-8') as f:
            text = f.read()
        found |= set(re.findall(r'\b([a-z][a-z0-9_]*_)\s*(?:=[^=]|;|\{)', text))
    return found


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    try:
        root = ET.parse(sys.argv[1]).getroot()
    except ET.ParseError as e:
        print('FAIL: %s is not well-formed XML: %s' % (sys.argv[1], e))
        return 1
    check = Check(declared_members(sys.argv[2:]))
    check.run(root)
    if check.errors:
        print('FAIL: %s' % sys.argv[1])
        for e in check.errors:
            print('  ' + e)
        return 1
    types = sorted({t.get('Name') for t in root if local(t.tag) == 'Type'})
    print('PASS: %s: natvis subset well-formed; %s each resolve against the headers'
          % (sys.argv[1], ', '.join(types)))
    return 0


if __name__ == '__main__':
    sys.exit(main())
