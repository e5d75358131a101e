# gdb pretty-printers and xmethods for reservoir::DynArray<T>, reservoir::ConcurrentDynArray<T>
# and reservoir::Arena.
#
#   (gdb) source /path/to/share/reservoir/gdb/reservoir_printers.py
#   (gdb) print a
#   $1 = reservoir::DynArray of length 5, capacity 1024 = {0, 10, 20, 30, 40}
#   (gdb) print a[2]          # an xmethod: works on core files and with operator[] inlined away
#   $2 = 20
#
# Sourcing registers the printers for every program; auto-loaded (an <executable>-gdb.py file, see
# the README), they apply to the objfile that loaded them. Sourcing twice replaces, never doubles.
#
# The classes' private members are read here and only here: dynarray_layout(),
# concurrent_layout() and arena_layout() are the three functions to adjust when a layout changes.
# Each accepts every layout listed in its comment, so one file serves old and new builds.

import re

import gdb
import gdb.printing

try:
    import gdb.xmethod
    _HAVE_XMETHODS = True
except ImportError:  # gdb older than 7.9
    _HAVE_XMETHODS = False


# The class names, with any inline namespace between reservoir:: and the class (debug builds put
# DynArray in reservoir::checked_iterators).
DYNARRAY_RE = r'^reservoir::(?:\w+::)*DynArray<.*>$'
CONCURRENT_RE = r'^reservoir::(?:\w+::)*ConcurrentDynArray<.*>$'
ARENA_RE = r'^reservoir::(?:\w+::)*Arena$'


# ---- reading members ---------------------------------------------------------------------------

def _member(val, *paths):
    """The first of the dotted member paths ('a.b') that exists in val (base classes included),
    or None if none does."""
    for path in paths:
        v = val
        try:
            for name in path.split('.'):
                v = v[name]
            return v
        except (gdb.error, KeyError, RuntimeError):
            continue
    return None


def _atomic(val):
    """The value held by a std::atomic<T> (T an integer or a pointer), as a gdb.Value of type T.

    Tries the members of libstdc++ (_M_i, or _M_b._M_p for pointers), libc++ (__a_.__a_value)
    and MSVC (_Storage._Value), then reads the atomic's storage as a T: every one of them keeps
    the T first and at the atomic's own size when T is lock-free."""
    v = _member(val, '_M_i', '_M_b._M_p', '__a_.__a_value', '_Storage._Value')
    if v is not None:
        return v
    value_type = val.type.strip_typedefs().template_argument(0)
    return val.address.cast(value_type.pointer()).dereference()


def _int(val):
    return int(val) if val is not None else 0


def _element_type(val):
    return val.type.strip_typedefs().template_argument(0)


def _count(first, last, element_type):
    """Elements of element_type between the pointers first and last (0 if either is null)."""
    begin, end = int(first), int(last)
    if begin == 0 or end < begin or element_type.sizeof == 0:
        return 0
    return (end - begin) // element_type.sizeof


# ---- the layouts: the only code that names private members -------------------------------------

def arena_layout(val):
    """A reservoir::Arena's state as a dict.

    Members: base_ (std::byte*), size_, committed_, reserved_ (bytes), granule_units_ (the
    commit granule in 4 KiB units), max_step_granules_ (the largest commit step in granules),
    offset_flags_ (ArenaOptions flags in the low 5 bits: 1 guard pages, 2 prefault, 4 reuse
    reservation, 8 huge pages, 16 respect memory limit)."""
    unit = 4096
    granule = _int(_member(val, 'granule_units_')) * unit
    flags = _int(_member(val, 'offset_flags_'))
    return {
        'base': _member(val, 'base_'),
        'size': _int(_member(val, 'size_')),
        'committed': _int(_member(val, 'committed_')),
        'reserved': _int(_member(val, 'reserved_')),
        'granule': granule,
        'max_commit_step': granule * _int(_member(val, 'max_step_granules_')),
        'guard_pages': bool(flags & 1),
        'prefault': bool(flags & 2),
        'reuse_reservation': bool(flags & 4),
        'huge_pages': bool(flags & 8),
        'respect_memory_limit': bool(flags & 16),
    }


def dynarray_layout(val):
    """(data as T*, size, capacity) of a reservoir::DynArray<T>.

    data is the member data_ where it exists, else the arena's base as a T*: arena_->base_ where
    the array holds a pointer to its arena (null until it first reserves), arena_.base_ where it
    holds the arena itself. The end and capacity are the pointers end_ and cap_; where a layout
    keeps counts instead (size_, or no cap_), the count is taken, and the capacity from the
    arena's committed bytes."""
    element_type = _element_type(val)
    data = _member(val, 'data_')
    if data is None:
        arena = _member(val, 'arena_')
        if arena is not None and arena.type.strip_typedefs().code == gdb.TYPE_CODE_PTR:
            data = arena.dereference()['base_'] if int(arena) != 0 else gdb.Value(0)
        else:
            data = _member(val, 'arena_.base_')
        data = data.cast(element_type.pointer())
    end = _member(val, 'end_')
    size = _count(data, end, element_type) if end is not None else _int(_member(val, 'size_'))
    cap = _member(val, 'cap_')
    if cap is not None:
        capacity = _count(data, cap, element_type)
    else:
        capacity = _int(_member(val, 'arena_.committed_')) // max(element_type.sizeof, 1)
    return data, size, capacity


def concurrent_layout(val):
    """(data as T*, published size, capacity, max_size) of a reservoir::ConcurrentDynArray<T>.

    data is data_ where it exists, else data_arena_.base_ (or core_.data_arena_.base_) as a T*.
    published_ and capacity_ are std::atomic counters, at the top level or in a nested core_."""
    element_type = _element_type(val)
    data = _member(val, 'data_', 'core_.data_')
    if data is None:
        data = _member(val, 'data_arena_.base_', 'core_.data_arena_.base_')
        data = data.cast(element_type.pointer())
    published = _member(val, 'published_', 'core_.published_')
    capacity = _member(val, 'capacity_', 'core_.capacity_')
    max_size = _member(val, 'max_size_', 'core_.max_size_')
    return (data, _int(_atomic(published)) if published is not None else 0,
            _int(_atomic(capacity)) if capacity is not None else 0, _int(max_size))


# ---- printers -----------------------------------------------------------------------------------

def _elements(data, size):
    for i in range(size):
        yield '[%d]' % i, (data + i).dereference()


class DynArrayPrinter:
    """reservoir::DynArray of length N, capacity C = {elements...}"""

    def __init__(self, val):
        self.data, self.size, self.capacity = dynarray_layout(val)

    def to_string(self):
        return 'reservoir::DynArray of length %d, capacity %d' % (self.size, self.capacity)

    def children(self):
        return _elements(self.data, self.size)

    def display_hint(self):
        return 'array'


class ConcurrentDynArrayPrinter:
    """reservoir::ConcurrentDynArray of length N (published), capacity C, max_size M = {...}"""

    def __init__(self, val):
        self.data, self.size, self.capacity, self.max_size = concurrent_layout(val)

    def to_string(self):
        return ('reservoir::ConcurrentDynArray of length %d (published), capacity %d, max_size %d'
                % (self.size, self.capacity, self.max_size))

    def children(self):
        return _elements(self.data, self.size)

    def display_hint(self):
        return 'array'


class ArenaPrinter:
    """reservoir::Arena, 100 of 1048576 bytes used, 4096 committed = {base = ..., ...}"""

    def __init__(self, val):
        self.layout = arena_layout(val)

    def to_string(self):
        a = self.layout
        if a['reserved'] == 0:
            return 'reservoir::Arena with no reservation'
        return ('reservoir::Arena, %d of %d bytes used, %d committed'
                % (a['size'], a['reserved'], a['committed']))

    def children(self):
        a = self.layout
        for key in ('base', 'size', 'committed', 'reserved', 'granule', 'max_commit_step',
                    'guard_pages', 'prefault', 'reuse_reservation', 'huge_pages',
                    'respect_memory_limit'):
            value = a[key]
            if not isinstance(value, gdb.Value):
                value = gdb.Value(value)
            yield key, value


def build_pretty_printer():
    pp = gdb.printing.RegexpCollectionPrettyPrinter('reservoir')
    pp.add_printer('DynArray', DYNARRAY_RE, DynArrayPrinter)
    pp.add_printer('ConcurrentDynArray', CONCURRENT_RE,
                   ConcurrentDynArrayPrinter)
    pp.add_printer('Arena', ARENA_RE, ArenaPrinter)
    return pp


# ---- xmethods: a[i], a.size(), a.capacity(), a.empty() without calling into the program --------

if _HAVE_XMETHODS:

    class _Worker(gdb.xmethod.XMethodWorker):
        """One method of one array type, computed from the layout function's result."""

        def __init__(self, layout, method):
            gdb.xmethod.XMethodWorker.__init__(self)
            self._layout = layout
            self._method = method

        def get_arg_types(self):
            return _size_type() if self._method == 'operator[]' else None

        def get_result_type(self, obj, *args):
            if self._method == 'operator[]':
                return _element_type(_deref(obj))
            return gdb.lookup_type('bool') if self._method == 'empty' else _size_type()

        def __call__(self, obj, *args):
            layout = self._layout(_deref(obj))
            if self._method == 'operator[]':
                return (layout[0] + int(args[0])).dereference()
            if self._method == 'empty':
                return gdb.Value(layout[1] == 0)
            index = 1 if self._method == 'size' else 2
            return gdb.Value(layout[index]).cast(_size_type())

    def _deref(obj):
        """The object itself: gdb passes `this`, a pointer."""
        if obj.type.strip_typedefs().code == gdb.TYPE_CODE_PTR:
            return obj.dereference()
        return obj

    def _size_type():
        return gdb.lookup_type('unsigned long')

    # Each of these has the same meaning for DynArray and ConcurrentDynArray.
    _METHODS = ('operator[]', 'size', 'capacity', 'empty')

    class _Matcher(gdb.xmethod.XMethodMatcher):
        def __init__(self, name, pattern, layout):
            gdb.xmethod.XMethodMatcher.__init__(self, name)
            self._pattern = re.compile(pattern)
            self._layout = layout
            self.methods = [gdb.xmethod.XMethod(m) for m in _METHODS]

        def match(self, class_type, method_name):
            tag = class_type.strip_typedefs().tag
            if tag is None or not self._pattern.match(tag) or method_name not in _METHODS:
                return None
            if not [m for m in self.methods if m.name == method_name and m.enabled]:
                return None
            return _Worker(self._layout, method_name)

    def build_xmethods():
        return [_Matcher('reservoir::DynArray', DYNARRAY_RE, dynarray_layout),
                _Matcher('reservoir::ConcurrentDynArray', CONCURRENT_RE,
                         concurrent_layout)]


def register(objfile=None):
    """Registers the printers (and xmethods) for objfile, or for every program if None."""
    gdb.printing.register_pretty_printer(objfile, build_pretty_printer(), replace=True)
    if _HAVE_XMETHODS:
        for matcher in build_xmethods():
            gdb.xmethod.register_xmethod_matcher(objfile, matcher, replace=True)


register(gdb.current_objfile())
