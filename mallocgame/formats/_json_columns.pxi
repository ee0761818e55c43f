# ---- the workload JSON's buffers and ops as columns (mallocgame/formats/_json_columns.pxi) ----------------------
# The compiled twin of the columnar reader's decoding loops (``mallocgame.formats.io._columnar_buffers`` and
# ``_columnar_ops``, which decode with msgspec and are the reference): one pass over the bytes of the
# ``buffers`` or ``ops`` list, straight into int64/float64 columns, with no record object per buffer or operand.
#
# It reads the plain shape only: objects of the known keys (each at most once), strings without a backslash
# escape, integers of at most 18 digits, numbers finite. Anything else (an escape, a null, an unknown key, a
# missing field, an op's ``control_deps``, an integer written as ``1.0``, ...) returns ``None``, and the
# reference decides (it accepts it or sends the file to the checking loop, which names the bad field), so this
# never accepts what the reference refuses. tests/test_io_columns.py checks both on the same inputs.

from libc.math cimport NAN, isfinite
from libc.string cimport memcmp, memcpy
from cpython.unicode cimport PyUnicode_DecodeUTF8
from cpython.dict cimport PyDict_GetItem
from cpython.object cimport PyObject

import numpy as np

cdef extern from "Python.h":
    double PyOS_string_to_double(const char *s, char **endptr, PyObject *overflow_exception) except? -1.0


cdef inline Py_ssize_t _json_ws(const unsigned char* s, Py_ssize_t i, Py_ssize_t n) noexcept nogil:
    while i < n and (s[i] == 32 or s[i] == 10 or s[i] == 13 or s[i] == 9):
        i += 1
    return i


cdef inline Py_ssize_t _json_string_end(const unsigned char* s, Py_ssize_t i, Py_ssize_t n) noexcept nogil:
    # s[i] is the opening quote: the index of the closing one, or -1 (an escape, a control character, the end)
    cdef unsigned char c
    i += 1
    while i < n:
        c = s[i]
        if c == 34:
            return i
        if c == 92 or c < 32:
            return -1
        i += 1
    return -1


cdef inline bint _json_digit(unsigned char c) noexcept nogil:
    return 48 <= c <= 57


cdef inline Py_ssize_t _json_int(const unsigned char* s, Py_ssize_t i, Py_ssize_t n, long long* out) noexcept nogil:
    # a JSON integer of at most 18 digits (no fraction, no exponent): its end, or -1
    cdef bint negative = False
    cdef Py_ssize_t first
    cdef long long value = 0
    if i < n and s[i] == 45:
        negative = True
        i += 1
    first = i
    if i >= n or not _json_digit(s[i]):
        return -1
    if s[i] == 48 and i + 1 < n and _json_digit(s[i + 1]):
        return -1  # a leading zero is not JSON
    while i < n and _json_digit(s[i]):
        value = value * 10 + (s[i] - 48) if i - first < 18 else value
        i += 1
    if i - first > 18 or (i < n and (s[i] == 46 or s[i] == 101 or s[i] == 69)):
        return -1
    out[0] = -value if negative else value
    return i


cdef inline Py_ssize_t _json_number(const unsigned char* s, Py_ssize_t i, Py_ssize_t n, double* out) except -2:
    # a finite JSON number (an integer of at most 15 digits, or one with a fraction or an exponent), read as
    # Python's float() reads it: its end, or -1
    cdef Py_ssize_t first = i, digits
    cdef bint plain = True
    cdef char* stop
    if i < n and s[i] == 45:
        i += 1
    digits = i
    if i >= n or not _json_digit(s[i]):
        return -1
    if s[i] == 48 and i + 1 < n and _json_digit(s[i + 1]):
        return -1
    while i < n and _json_digit(s[i]):
        i += 1
    digits = i - digits
    if i < n and s[i] == 46:
        plain = False
        i += 1
        if i >= n or not _json_digit(s[i]):
            return -1
        while i < n and _json_digit(s[i]):
            i += 1
    if i < n and (s[i] == 101 or s[i] == 69):
        plain = False
        i += 1
        if i < n and (s[i] == 43 or s[i] == 45):
            i += 1
        if i >= n or not _json_digit(s[i]):
            return -1
        while i < n and _json_digit(s[i]):
            i += 1
    if plain and digits > 15:
        return -1  # a long integer where a float goes: the reference converts it
    if i >= n:
        return -1  # a number is followed by a delimiter inside a list
    out[0] = PyOS_string_to_double(<const char*>(s + first), &stop, NULL)
    if stop != <char*>(s + i) or not isfinite(out[0]):
        return -1
    return i


cdef inline int _json_key(const unsigned char* s, Py_ssize_t a, Py_ssize_t b, const char* names, int count) noexcept nogil:
    # the position of the key s[a:b] among ``names`` (:func:`_json_names`), or -1
    cdef int k
    for k in range(count):
        if names[16 * k] == b - a and memcmp(s + a, names + 16 * k + 1, b - a) == 0:
            return k
    return -1


cdef bytes _json_names(tuple names):
    # names of at most 15 bytes, each as 16 bytes: its length, then its bytes
    return b"".join(bytes([len(x)]) + x.ljust(15, b"\0") for x in names)


cdef Py_ssize_t _json_braces(const unsigned char* s, Py_ssize_t n) noexcept nogil:
    # how many "{" bytes s[:n] holds: at least as many as the records it lists
    cdef Py_ssize_t count = 0, i
    for i in range(n):
        count += s[i] == 123
    return count


cdef void* _json_slots(list columns, Py_ssize_t capacity, dtype) except NULL:
    # a new numpy column of ``capacity`` (at least 1) values, kept in ``columns``: its data. Filled in place and
    # shrunk to its length at the end (:func:`_json_shrunk`), so a large one is written once, without copies.
    column = np.empty(max(capacity, 1), dtype)
    columns.append(column)
    return <void*><size_t>column.__array_interface__["data"][0]


cdef list _json_shrunk(list columns, Py_ssize_t n):
    for column in columns:
        column.resize(n, refcheck=False)
    return columns


_BUFFER_KEYS = (b"id", b"size", b"start", b"end", b"alignment", b"kind", b"benefit")
_OP_KEYS = (b"id", b"kind", b"flops", b"fixed_bytes", b"operands", b"transcendentals", b"control_deps")
_OPERAND_KEYS = (b"buffer", b"access", b"bytes")


def json_buffer_columns(raw, tuple kinds):
    """The JSON list of buffer records ``raw`` as columns (:func:`_json_buffer_columns`), or ``None`` when it is not
    of the plain shape or not valid UTF-8 (the reference decides then)."""
    try:
        return _json_buffer_columns(raw, kinds)
    except UnicodeDecodeError:
        return None


def json_op_columns(raw, dict index, const long long[::1] sizes):
    """The JSON list of op records ``raw`` as columns (:func:`_json_op_columns`), or ``None`` when it is not of the
    plain shape, not valid UTF-8 or names a buffer not in ``index`` (the reference decides then)."""
    try:
        return _json_op_columns(raw, index, sizes)
    except UnicodeDecodeError:
        return None


def _json_buffer_columns(raw, tuple kinds):
    """The JSON list of buffer records ``raw`` (bytes-like) as ``(ids, size, start, end, alignment, benefit, kind)``
    (a list of str, int64 columns, float64 with NaN where no benefit is given, uint8 codes into ``kinds``), or
    ``None`` when it is not of the plain shape (the reference decides then)."""
    cdef const unsigned char[::1] view = memoryview(raw).cast("B")
    cdef Py_ssize_t n = view.shape[0], i, a, b, key_end
    cdef const unsigned char* s = &view[0] if n else NULL
    cdef list columns = []
    cdef Py_ssize_t capacity = _json_braces(s, n)
    cdef long long* size = <long long*>_json_slots(columns, capacity, np.int64)
    cdef long long* start = <long long*>_json_slots(columns, capacity, np.int64)
    cdef long long* end = <long long*>_json_slots(columns, capacity, np.int64)
    cdef long long* alignment = <long long*>_json_slots(columns, capacity, np.int64)
    cdef double* benefit = <double*>_json_slots(columns, capacity, np.float64)
    cdef unsigned char* kind = <unsigned char*>_json_slots(columns, capacity, np.uint8)
    cdef long long value, code
    cdef double number
    cdef int k, seen
    cdef list ids = []
    cdef bytes kind_names = _json_names(tuple(x.encode() for x in kinds))
    cdef bytes keys = _json_names(_BUFFER_KEYS)
    cdef Py_ssize_t m = -1
    i = _json_ws(s, 0, n)
    if i >= n or s[i] != 91:
        return None
    i = _json_ws(s, i + 1, n)
    if i < n and s[i] == 93:
        return None  # no buffers: the reference's one line
    while True:
        if i >= n or s[i] != 123:
            return None
        seen = 0
        m += 1
        alignment[m] = 1
        kind[m] = 0
        benefit[m] = NAN
        i = _json_ws(s, i + 1, n)
        if i < n and s[i] == 125:
            return None  # no id
        while True:
            if i >= n or s[i] != 34:
                return None
            key_end = _json_string_end(s, i, n)
            if key_end < 0:
                return None
            k = _json_key(s, i + 1, key_end, keys, 7)
            if k < 0 or seen & (1 << k):
                return None
            seen |= 1 << k
            i = _json_ws(s, key_end + 1, n)
            if i >= n or s[i] != 58:
                return None
            i = _json_ws(s, i + 1, n)
            if k == 0 or k == 5:  # id, kind
                if i >= n or s[i] != 34:
                    return None
                b = _json_string_end(s, i, n)
                if b < 0:
                    return None
                if k == 0:
                    ids.append(PyUnicode_DecodeUTF8(<const char*>(s + i + 1), b - i - 1, NULL))
                else:
                    code = _json_key(s, i + 1, b, kind_names, len(kinds))
                    if code < 0:
                        return None
                    kind[m] = code
                i = b + 1
            elif k == 6:  # benefit
                i = _json_number(s, i, n, &number)
                if i < 0:
                    return None
                benefit[m] = number
            else:
                i = _json_int(s, i, n, &value)
                if i < 0:
                    return None
                if k == 1:
                    size[m] = value
                elif k == 2:
                    start[m] = value
                elif k == 3:
                    end[m] = value
                else:
                    alignment[m] = value
            i = _json_ws(s, i, n)
            if i < n and s[i] == 44:
                i = _json_ws(s, i + 1, n)
                continue
            if i < n and s[i] == 125:
                break
            return None
        if seen & 15 != 15:
            return None  # id, size, start and end are required
        i = _json_ws(s, i + 1, n)
        if i < n and s[i] == 44:
            i = _json_ws(s, i + 1, n)
            continue
        if i < n and s[i] == 93:
            break
        return None
    if _json_ws(s, i + 1, n) != n:
        return None
    return (ids, *_json_shrunk(columns, m + 1))


def _json_op_columns(raw, dict index, const long long[::1] sizes):
    """The JSON list of op records ``raw`` (bytes-like) as ``(ids, kinds, flops, transcendentals, fixed_bytes,
    counts, buffer, write, bytes)``: ids and kinds as lists of str (one str per distinct kind), an op without an
    id named ``op<index>``; per op float64 and int64 columns; per operand (op by op) the buffer's position in
    ``index`` (id -> position), whether it writes (bool), and its bytes (``sizes`` of its buffer when not given).
    ``None`` when it is not of the plain shape or an operand names a buffer not in ``index`` (the reference
    decides then)."""
    cdef const unsigned char[::1] view = memoryview(raw).cast("B")
    cdef Py_ssize_t n = view.shape[0], i, b, key_end, t = 0
    cdef const unsigned char* s = &view[0] if n else NULL
    cdef list op_columns = [], operand_columns = []
    cdef Py_ssize_t capacity = _json_braces(s, n)
    cdef double* flops = <double*>_json_slots(op_columns, capacity, np.float64)
    cdef double* trans = <double*>_json_slots(op_columns, capacity, np.float64)
    cdef long long* fixed = <long long*>_json_slots(op_columns, capacity, np.int64)
    cdef long long* counts = <long long*>_json_slots(op_columns, capacity, np.int64)
    cdef long long* buf = <long long*>_json_slots(operand_columns, capacity, np.int64)
    cdef unsigned char* write = <unsigned char*>_json_slots(operand_columns, capacity, np.bool_)
    cdef long long* nbytes = <long long*>_json_slots(operand_columns, capacity, np.int64)
    cdef long long value, at
    cdef double number
    cdef int k, seen, operand_seen
    cdef list ids = [], kinds = []
    cdef dict strings = {}
    cdef PyObject* found
    cdef bytes keys = _json_names(_OP_KEYS), operand_keys = _json_names(_OPERAND_KEYS)
    cdef Py_ssize_t q = -1
    i = _json_ws(s, 0, n)
    if i >= n or s[i] != 91:
        return None
    i = _json_ws(s, i + 1, n)
    if i < n and s[i] == 93:
        if _json_ws(s, i + 1, n) != n:
            return None
        i = -1  # no ops
    while i >= 0:
        if i >= n or s[i] != 123:
            return None
        seen = 0
        flops[t] = 0.0
        trans[t] = 0.0
        fixed[t] = 0
        counts[t] = 0
        i = _json_ws(s, i + 1, n)
        if i < n and s[i] == 125:
            return None  # an empty record
        while True:
            if i >= n or s[i] != 34:
                return None
            key_end = _json_string_end(s, i, n)
            if key_end < 0:
                return None
            k = _json_key(s, i + 1, key_end, keys, 7)
            if k < 0 or k == 6 or seen & (1 << k):
                return None  # an unknown or repeated key, or control_deps (the reference collects them)
            seen |= 1 << k
            i = _json_ws(s, key_end + 1, n)
            if i >= n or s[i] != 58:
                return None
            i = _json_ws(s, i + 1, n)
            if k == 0 or k == 1:  # id, kind
                if i >= n or s[i] != 34:
                    return None
                b = _json_string_end(s, i, n)
                if b < 0:
                    return None
                text = PyUnicode_DecodeUTF8(<const char*>(s + i + 1), b - i - 1, NULL)
                if k == 0:
                    ids.append(text)
                else:
                    kinds.append(strings.setdefault(text, text))
                i = b + 1
            elif k == 2 or k == 5:  # flops, transcendentals
                i = _json_number(s, i, n, &number)
                if i < 0:
                    return None
                if k == 2:
                    flops[t] = number
                else:
                    trans[t] = number
            elif k == 3:  # fixed_bytes
                i = _json_int(s, i, n, &value)
                if i < 0:
                    return None
                fixed[t] = value
            else:  # operands
                if i >= n or s[i] != 91:
                    return None
                i = _json_ws(s, i + 1, n)
                if i < n and s[i] == 93:
                    i += 1
                else:
                    while True:
                        if i >= n or s[i] != 123:
                            return None
                        operand_seen = 0
                        at = -1
                        q += 1
                        write[q] = 0
                        nbytes[q] = -1
                        i = _json_ws(s, i + 1, n)
                        while True:
                            if i >= n or s[i] != 34:
                                return None
                            key_end = _json_string_end(s, i, n)
                            if key_end < 0:
                                return None
                            k = _json_key(s, i + 1, key_end, operand_keys, 3)
                            if k < 0 or operand_seen & (1 << k):
                                return None
                            operand_seen |= 1 << k
                            i = _json_ws(s, key_end + 1, n)
                            if i >= n or s[i] != 58:
                                return None
                            i = _json_ws(s, i + 1, n)
                            if k == 2:  # bytes
                                i = _json_int(s, i, n, &value)
                                if i < 0:
                                    return None
                                nbytes[q] = value
                            else:
                                if i >= n or s[i] != 34:
                                    return None
                                b = _json_string_end(s, i, n)
                                if b < 0:
                                    return None
                                if k == 0:  # buffer
                                    found = PyDict_GetItem(index, PyUnicode_DecodeUTF8(
                                        <const char*>(s + i + 1), b - i - 1, NULL))
                                    if found is NULL:
                                        return None
                                    at = <object>found
                                elif b - i - 1 == 5 and memcmp(s + i + 1, b"write", 5) == 0:
                                    write[q] = 1
                                elif not (b - i - 1 == 4 and memcmp(s + i + 1, b"read", 4) == 0):
                                    return None
                                i = b + 1
                            i = _json_ws(s, i, n)
                            if i < n and s[i] == 44:
                                i = _json_ws(s, i + 1, n)
                                continue
                            if i < n and s[i] == 125:
                                break
                            return None
                        if at < 0:
                            return None  # no buffer
                        buf[q] = at
                        if not operand_seen & 4:
                            nbytes[q] = sizes[at]
                        counts[t] += 1
                        i = _json_ws(s, i + 1, n)
                        if i < n and s[i] == 44:
                            i = _json_ws(s, i + 1, n)
                            continue
                        if i < n and s[i] == 93:
                            i += 1
                            break
                        return None
            i = _json_ws(s, i, n)
            if i < n and s[i] == 44:
                i = _json_ws(s, i + 1, n)
                continue
            if i < n and s[i] == 125:
                break
            return None
        if not seen & 1:
            ids.append(f"op{t}")
        if not seen & 2:
            kinds.append(strings.setdefault("op", "op"))
        t += 1
        i = _json_ws(s, i + 1, n)
        if i < n and s[i] == 44:
            i = _json_ws(s, i + 1, n)
            continue
        if i < n and s[i] == 93:
            if _json_ws(s, i + 1, n) != n:
                return None
            break
        return None
    return (ids, kinds, *_json_shrunk(op_columns, t), *_json_shrunk(operand_columns, q + 1))
