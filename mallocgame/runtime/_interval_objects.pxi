# ---- a prefetch answer's intervals made from their columns (mallocgame/runtime/_interval_objects.pxi) -------------
# The body of ``mallocgame.runtime.incumbents.intervals_of_columns`` (a report or an answer a solving child sent, back
# in its parent: 200k intervals and more): each row's FastInterval, its fields set as its own __init__ sets them
# (object.__setattr__, here the C call) without the Python frame per object. The Python map is the reference:
# tests/test_big_input_paths.py checks both give equal intervals.

cdef extern from "Python.h":
    int PyObject_GenericSetAttr(object o, object name, object value) except -1


def intervals_of_columns_loop(const long long[:, ::1] columns, cls):
    """A tuple of ``cls(buffer, offset, start, end, copy_start)``, one per row ``(buffer, offset, start, end,
    copy_start, has_copy)`` of ``columns`` (``copy_start`` is ``None`` where ``has_copy`` is 0); ``cls`` is
    ``FastInterval``, a frozen dataclass of those five fields, made without its ``__init__``."""
    cdef Py_ssize_t n = columns.shape[0], i
    if columns.shape[1] != 6:
        raise ValueError("interval columns are six")
    out = [None] * n
    new = object.__new__
    cdef str buffer = "buffer", offset = "offset", start = "start", end = "end", copy_start = "copy_start"
    for i in range(n):
        iv = new(cls)
        PyObject_GenericSetAttr(iv, buffer, columns[i, 0])
        PyObject_GenericSetAttr(iv, offset, columns[i, 1])
        PyObject_GenericSetAttr(iv, start, columns[i, 2])
        PyObject_GenericSetAttr(iv, end, columns[i, 3])
        PyObject_GenericSetAttr(iv, copy_start, columns[i, 4] if columns[i, 5] else None)
        out[i] = iv
    return tuple(out)
