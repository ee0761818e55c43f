# ---- what several parts of the native engine share (mallocgame/_native.pyx) ----------------------------------

from libcpp.vector cimport vector


cdef struct Rect:  # a placed interval or buffer: addresses [off, top), occupied from op occ (the order game: 0)
    long long off
    long long top
    long long occ


cdef struct Hole:  # a free hole [bottom, top) that holds the buffer at its aligned bottom offset
    long long offset
    long long bottom
    long long top


cdef inline bint _by_address(const Rect& p, const Rect& q) noexcept nogil:
    # by offset only: in a run of equal offsets only the first can open a hole (it depends on the run's offset and
    # the tops below it), and the run lifts the bottom to the run's highest top whatever its order, so the holes
    # and the best fit are the same
    return p.off < q.off


cdef inline long long _align_up(long long x, long long align) noexcept nogil:
    # x rounded up to a multiple of align (> 0), by Python's floor division (cdivision is off), as the Python code
    return -((-x) // align) * align
