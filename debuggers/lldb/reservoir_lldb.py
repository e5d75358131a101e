# lldb data formatters for reservoir::DynArray<T>, reservoir::ConcurrentDynArray<T> and
# reservoir::Arena: a summary and synthetic children, so `frame variable a`, `p a` and IDEs on
# lldb-dap/lldb-mi show an array's elements as std::vector's are shown.
#
#   (lldb) command script import /path/to/share/reservoir/lldb/reservoir_lldb.py
#   (lldb) frame variable a
#   (reservoir::DynArray<int>) a = reservoir::DynArray of length 5, capacity 1024 {
#     [0] = 0
#     ...
#
# The formatters live in the type category "reservoir" (`type category disable reservoir` turns
# them off). Importing twice replaces them.
#
# The classes' private members are read here and only here: dynarray_layout(),
# concurrent_layout() and arena_layout() are the three functions to adjust when a layout changes.
# Each accepts every layout listed in its comment, so one file serves old and new builds.

import lldb

# The class names, with any inline namespace between reservoir:: and the class (debug builds put
# DynArray in reservoir::checked_iterators).
DYNARRAY_RE = r'^reservoir::([[:alnum:]_]+::)*DynArray<.+>$'
CONCURRENT_RE = r'^reservoir::([[:alnum:]_]+::)*ConcurrentDynArray<.+>$'
ARENA_RE = r'^reservoir::([[:alnum:]_]+::)*Arena$'


# ---- reading members ---------------------------------------------------------------------------

def _member(val, *paths):
    """The first of the dotted member paths ('a.b') that exists in val (base classes included),
    or None if none does."""
    for path in paths:
        v = val
        for name in path.split('.'):
            v = v.GetChildMemberWithName(name)
            if not v.IsValid():
                break
        else:
            return v
    return None


def _unsigned(val):
    return val.GetValueAsUnsigned(0) if val is not None else 0


def _atomic(val):
    """The value held by a std::atomic<T> (T an integer or a pointer).

    Tries the members of libstdc++ (_M_i, or _M_b._M_p for pointers), libc++ (__a_.__a_value)
    and MSVC (_Storage._Value), then reads the atomic's storage as an unsigned integer of its
    size: every one of them keeps the T first and at the atomic's own size when T is lock-free."""
    if val is None:
        return 0
    raw = val.GetNonSyntheticValue()
    v = _member(raw, '_M_i', '_M_b._M_p', '__a_.__a_value', '_Storage._Value')
    if v is not None:
        return v.GetValueAsUnsigned(0)
    error = lldb.SBError()
    n = raw.GetProcess().ReadUnsignedFromMemory(raw.GetLoadAddress(), raw.GetByteSize(), error)
    return n if error.Success() else 0


def _element_type(val):
    """T of a DynArray<T> or ConcurrentDynArray<T>: the pointee of a T* member where there is
    one, as the template argument lldb rebuilds from the type's name may not be the type the
    program uses (std::allocator<> for std::allocator<char>, which std::string's own
    formatters do not recognize)."""
    for name in ('data_', 'end_', 'cap_', 'core_.data_'):
        pointer = _member(val, name)
        if pointer is not None and pointer.GetType().IsPointerType():
            return pointer.GetType().GetPointeeType()
    return val.GetType().GetCanonicalType().GetUnqualifiedType().GetTemplateArgumentType(0)


def _count(first, last, element_type):
    """Elements of element_type between the pointers first and last (0 if either is null)."""
    begin, end = _unsigned(first), _unsigned(last)
    size = element_type.GetByteSize()
    if begin == 0 or end < begin or size == 0:
        return 0
    return (end - begin) // size


# ---- the layouts: the only code that names private members -------------------------------------

def arena_layout(val):
    """A reservoir::Arena's state as a dict of integers and booleans.

    Members: base_ (std::byte*), size_, committed_, reserved_ (bytes), granule_units_ (the
    commit granule in 4 KiB units), max_step_granules_ (the largest commit step in granules),
    offset_flags_ (ArenaOptions flags in the low 5 bits: 1 guard pages, 2 prefault, 4 reuse
    reservation, 8 huge pages, 16 respect memory limit)."""
    unit = 4096
    granule = _unsigned(_member(val, 'granule_units_')) * unit
    flags = _unsigned(_member(val, 'offset_flags_'))
    return {
        'base': _unsigned(_member(val, 'base_')),
        'size': _unsigned(_member(val, 'size_')),
        'committed': _unsigned(_member(val, 'committed_')),
        'reserved': _unsigned(_member(val, 'reserved_')),
        'granule': granule,
        'max_commit_step': granule * _unsigned(_member(val, 'max_step_granules_')),
        'guard_pages': bool(flags & 1),
        'prefault': bool(flags & 2),
        'reuse_reservation': bool(flags & 4),
        'huge_pages': bool(flags & 8),
        'respect_memory_limit': bool(flags & 16),
    }


def dynarray_layout(val):
    """(data as a T* SBValue, size, capacity) of a reservoir::DynArray<T>.

    data is the member data_ where it exists, else the arena's base as a T*: arena_->base_ where
    the array holds a pointer to its arena (null until it first reserves), arena_.base_ where it
    holds the arena itself. The end and capacity are the pointers end_ and cap_; where a layout
    keeps counts instead (size_, or no cap_), the count is taken, and the capacity from the
    arena's committed bytes."""
    element_type = _element_type(val)
    data = _member(val, 'data_')
    if data is None:
        arena = _member(val, 'arena_')
        if arena is not None and arena.GetType().IsPointerType():
            if arena.GetValueAsUnsigned(0) != 0:
                data = arena.Dereference().GetChildMemberWithName('base_')
            else:
                data = arena  # a null pointer: no elements
        else:
            data = _member(val, 'arena_.base_')
        data = data.Cast(element_type.GetPointerType())
    end = _member(val, 'end_')
    size = _count(data, end, element_type) if end is not None else _unsigned(
        _member(val, 'size_'))
    cap = _member(val, 'cap_')
    if cap is not None:
        capacity = _count(data, cap, element_type)
    else:
        capacity = _unsigned(_member(val, 'arena_.committed_')) // max(
            element_type.GetByteSize(), 1)
    return data, size, capacity


def concurrent_layout(val):
    """(data as a T* SBValue, published size, capacity, max_size) of a
    reservoir::ConcurrentDynArray<T>.

    data is data_ where it exists, else data_arena_.base_ (or core_.data_arena_.base_) as a T*.
    published_ and capacity_ are std::atomic counters, at the top level or in a nested core_."""
    element_type = _element_type(val)
    data = _member(val, 'data_', 'core_.data_')
    if data is None:
        data = _member(val, 'data_arena_.base_', 'core_.data_arena_.base_')
        data = data.Cast(element_type.GetPointerType())
    return (data, _atomic(_member(val, 'published_', 'core_.published_')),
            _atomic(_member(val, 'capacity_', 'core_.capacity_')),
            _unsigned(_member(val, 'max_size_', 'core_.max_size_')))


# ---- summaries ----------------------------------------------------------------------------------

def dynarray_summary(valobj, internal_dict):
    _, size, capacity = dynarray_layout(valobj.GetNonSyntheticValue())
    return 'reservoir::DynArray of length %d, capacity %d' % (size, capacity)


def concurrent_summary(valobj, internal_dict):
    _, size, capacity, max_size = concurrent_layout(valobj.GetNonSyntheticValue())
    return ('reservoir::ConcurrentDynArray of length %d (published), capacity %d, max_size %d'
            % (size, capacity, max_size))


def arena_summary(valobj, internal_dict):
    a = arena_layout(valobj.GetNonSyntheticValue())
    if a['reserved'] == 0:
        return 'reservoir::Arena with no reservation'
    return ('reservoir::Arena, %d of %d bytes used, %d committed'
            % (a['size'], a['reserved'], a['committed']))


# ---- synthetic children -------------------------------------------------------------------------

class _ElementsProvider:
    """Children [0] .. [size - 1]: the elements, each printed by its own type's formatters."""

    def __init__(self, valobj, internal_dict):
        self.valobj = valobj
        self.data = None
        self.size = 0
        self.element_type = None
        self.element_size = 0

    def layout(self, val):
        raise NotImplementedError

    def update(self):
        raw = self.valobj.GetNonSyntheticValue()
        self.element_type = _element_type(raw)
        self.element_size = self.element_type.GetByteSize()
        layout = self.layout(raw)
        self.data, self.size = layout[0], layout[1]
        if self.data is None or _unsigned(self.data) == 0:
            self.size = 0
        return False  # recompute on every stop: the array may have changed

    def has_children(self):
        return True

    def num_children(self):
        return self.size

    def get_child_index(self, name):
        try:
            return int(name.lstrip('[').rstrip(']'))
        except ValueError:
            return -1

    def get_child_at_index(self, index):
        if index < 0 or index >= self.size:
            return None
        return self.data.CreateChildAtOffset('[%d]' % index, index * self.element_size,
                                             self.element_type)


class DynArrayProvider(_ElementsProvider):
    def layout(self, val):
        return dynarray_layout(val)


class ConcurrentDynArrayProvider(_ElementsProvider):
    def layout(self, val):
        return concurrent_layout(val)


class ArenaProvider:
    """Children base, size, committed, reserved, granule, max_commit_step and the options."""

    NAMES = ('base', 'size', 'committed', 'reserved', 'granule', 'max_commit_step', 'guard_pages',
             'prefault', 'reuse_reservation', 'huge_pages', 'respect_memory_limit')

    def __init__(self, valobj, internal_dict):
        self.valobj = valobj
        self.layout = {}

    def update(self):
        self.layout = arena_layout(self.valobj.GetNonSyntheticValue())
        return False

    def has_children(self):
        return True

    def num_children(self):
        return len(self.NAMES)

    def get_child_index(self, name):
        return self.NAMES.index(name) if name in self.NAMES else -1

    def get_child_at_index(self, index):
        if index < 0 or index >= len(self.NAMES):
            return None
        name = self.NAMES[index]
        raw = self.valobj.GetNonSyntheticValue()
        if name == 'base':
            return _member(raw, 'base_').Clone('base')
        target = raw.GetTarget()
        value = self.layout[name]
        if isinstance(value, bool):
            t = target.GetBasicType(lldb.eBasicTypeBool)
            data = lldb.SBData()
            data.SetData(lldb.SBError(), bytes([int(value)]), target.GetByteOrder(),
                         target.GetAddressByteSize())
        else:
            t = target.GetBasicType(lldb.eBasicTypeUnsignedLongLong)
            data = lldb.SBData.CreateDataFromUInt64Array(target.GetByteOrder(),
                                                         target.GetAddressByteSize(), [value])
        return raw.CreateValueFromData(name, data, t)


def __lldb_init_module(debugger, internal_dict):
    module = __name__
    commands = [
        'type synthetic add -w reservoir -x "%s" --python-class %s.DynArrayProvider'
        % (DYNARRAY_RE, module),
        'type summary add -w reservoir -x "%s" --expand -F %s.dynarray_summary'
        % (DYNARRAY_RE, module),
        'type synthetic add -w reservoir -x "%s" --python-class %s.ConcurrentDynArrayProvider'
        % (CONCURRENT_RE, module),
        'type summary add -w reservoir -x "%s" --expand -F %s.concurrent_summary'
        % (CONCURRENT_RE, module),
        'type synthetic add -w reservoir -x "%s" --python-class %s.ArenaProvider'
        % (ARENA_RE, module),
        'type summary add -w reservoir -x "%s" --expand -F %s.arena_summary' % (ARENA_RE, module),
        'type category enable reservoir',
    ]
    for command in commands:
        debugger.HandleCommand(command)
