# ---- the rows of a CSV table, written compiled (mallocgame/formats/_csv_rows.pxi) ------------------------------
# The body of ``mallocgame.formats.io.problem_csv_text`` (a solution CSV of millions of rows) and of
# ``intervals_csv_text`` (a prefetch answer's intervals): each row's fields, text as given and integers in decimal,
# joined by commas, one line each. The Python joins it replaces are the reference: tests/test_big_input_paths.py checks
# both give the same text.

from libcpp.string cimport string

cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object text, Py_ssize_t* size) except NULL
    object PyUnicode_DecodeUTF8(const char* data, Py_ssize_t size, const char* errors)


@cython.cdivision(True)
cdef inline void _append_decimal(string& out, long long x) noexcept nogil:
    cdef char digits[24]
    cdef int k = 24
    cdef unsigned long long u = <unsigned long long>x
    if x < 0:
        u = (~u) + 1  # the magnitude, INT64_MIN included
    while True:
        k -= 1
        digits[k] = <char>(48 + u % 10)
        u = u // 10
        if u == 0:
            break
    if x < 0:
        k -= 1
        digits[k] = 45  # '-'
    out.append(&digits[k], 24 - k)


def csv_rows(list texts, const long long[:, ::1] numbers, const unsigned char[:, ::1] blank, layout):
    """The rows as one str, each ending in ``\\n``: field ``c`` of row ``r`` is ``texts[-layout[c] - 1][r]`` (a str,
    written as it is) when ``layout[c] < 0``, else ``numbers[r, layout[c]]`` in decimal, or nothing where
    ``blank[r, layout[c]]``."""
    cdef Py_ssize_t n = numbers.shape[0], width = len(layout), r, c, size
    cdef vector[int] where = [int(x) for x in layout]
    cdef list column
    cdef const char* data
    cdef string out
    cdef int w
    for column in texts:
        if len(column) != n:
            raise ValueError("a text column's length is not the rows'")
    out.reserve(n * (8 + 12 * width))
    for r in range(n):
        for c in range(width):
            if c:
                out.push_back(44)  # ','
            w = where[c]
            if w < 0:
                data = PyUnicode_AsUTF8AndSize(<object>(<list>texts[-w - 1])[r], &size)
                out.append(data, size)
            elif not blank[r, w]:
                _append_decimal(out, numbers[r, w])
        out.push_back(10)  # '\n'
    return PyUnicode_DecodeUTF8(out.data(), <Py_ssize_t>out.size(), NULL)
