# The prefetch game's hole finder at C level, for the compiled prefetch game (search/_prefetch_game.pyx).

from libcpp.vector cimport vector


cdef struct Rect:  # a placed interval: addresses [off, top), occupied from op occ
    long long off
    long long top
    long long occ


cdef struct Hole:  # a free hole [bottom, top) that holds the buffer at its aligned bottom offset
    long long offset
    long long bottom
    long long top


cdef Py_ssize_t holes_among(vector[Rect]& rs, long long t, const long long* later, Py_ssize_t n_later, long long size,
                            long long align, long long cap, bint bounded, Py_ssize_t k, vector[Hole]& hs, Hole* out,
                            bint* top_is_inf) noexcept nogil
