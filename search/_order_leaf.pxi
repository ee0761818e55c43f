# ---- the order game's leaf inputs (search/_order_leaf.pxi) ---------------------------------------------------
# What the network reads at a leaf of the fixed-order game, for a batch of native states (``OrderState`` of
# ``search/_order_game.pxi``) of one problem and decision order, in one compiled call:
#
# * the observation (``mallocgame.search.game_order.OrderGame.observation``): the current buffer's features,
#   the fast-memory occupancy profile over its live range, the action slots (one per offered hole, and slow),
#   the legal mask, the upcoming buffers and the progress;
# * the encoder's numbers after it (``mallocgame.search.muzero.encoder._vector``, features ``encoder/1..3``): the
#   current buffer's encoding, the state summary over the buffers overlapping it, and (with the relaxation's
#   set) the relaxation features.
#
# The floats are the Python's: the same operations in the same order (the profile's difference array filled in
# the overlap index's order, the encodings' mean summed row by row in float32 as numpy's ``mean(0)`` does, byte
# sums in integers), rounded to float32 where the Python stores them; tests/test_order_leaf.py checks both.

from libc.math cimport INFINITY, ceil, floor


cdef void _overlap_query(OrderTables t, long long s, long long e, vector[long long]* out) noexcept:
    """Append ``OverlapIndex.query(s, e)``'s buffers to ``out``, in its order (``OrderTables._index_neighbours``
    without the placed filter)."""
    cdef Py_ssize_t k, hi, q, j
    cdef _Row row
    if t.n_cp == 0 or e <= s:
        return
    k = _first_above(t.cp_time, t.n_cp, s) - 1
    hi = _first_at_or_above(t.ix_start, t.n, e)
    if k < 0:
        for q in range(hi):
            out.push_back(t.ix_order[q])
        return
    row = t.cp_set[k]
    for q in range(t.cp_len[k]):
        j = row[q]
        if t.end[j] > s:
            out.push_back(j)
    for q in range(t.cp_pos[k], hi):
        j = t.ix_order[q]
        if t.end[j] > s:
            out.push_back(j)


cdef class OrderLeafTables:
    """What the leaf inputs of one problem, decision order and game shape read besides the states: ``tables``
    (the games' ``OrderTables``), ``data`` (their ``GameData``), ``dec`` (the decision order), ``k``,
    ``upcoming``, ``profile_bins`` (the ``GameConfig``'s)."""

    cdef OrderTables t
    cdef readonly Py_ssize_t k, upcoming, bins, obs_dim
    cdef Py_ssize_t n
    cdef double scale, horizon, reward_norm, max_benefit
    cdef long long t0
    cdef bint map_mode
    cdef object keep  # the numpy arrays the pointers below read
    cdef const float* features  # [n, BUFFER_FEATURES]: ``GameData.buffer_features`` of every buffer, float32
    cdef const double* density  # [n]
    cdef const long long* position  # [n]: each buffer's position in the decision order

    def __init__(self, OrderTables tables, data, dec, Py_ssize_t k, Py_ssize_t upcoming, Py_ssize_t profile_bins):
        self.t = tables
        self.n = data.n
        self.k, self.upcoming, self.bins = k, upcoming, profile_bins
        self.obs_dim = 8 + profile_bins + 8 * upcoming + 2
        self.scale, self.horizon = data.scale, data.horizon
        self.t0 = data.t0
        self.reward_norm, self.max_benefit = data.reward_norm, data.max_benefit
        self.map_mode = data.mode == "map"
        # buffer_features's numbers as numpy computes them elementwise: the same float64 operations
        start, end = data.start, data.end
        features = np.empty((data.n, 8), np.float32)
        features[:, 0] = 1.0
        features[:, 1] = data.size / data.scale
        features[:, 2] = (start - data.t0) / data.horizon
        features[:, 3] = (end - data.t0) / data.horizon
        features[:, 4] = (end - start) / data.horizon
        features[:, 5] = data.benefit / data.max_benefit
        features[:, 6] = data.density
        features[:, 7] = data.is_weight
        density = np.ascontiguousarray(data.density, np.float64)
        position = np.ascontiguousarray(dec.position, np.int64)
        self.keep = (features, density, position)
        cdef const float[:, ::1] fv = features
        cdef const double[::1] dv = density
        cdef const long long[::1] pv = position
        self.features = &fv[0, 0] if data.n else NULL
        self.density = &dv[0] if data.n else NULL
        self.position = &pv[0] if data.n else NULL


def order_leaf_inputs(OrderLeafTables lt, list states, float[:, ::1] vectors, float[:, :, ::1] actions,
                      unsigned char[:, ::1] masks, const float[:, ::1] enc=None, const unsigned char[::1] chosen=None):
    """Fill row ``b`` of ``vectors`` ``[B, D]``, ``actions`` ``[B, k + 1, 8]`` and ``masks`` ``[B, k + 1]`` (zeros on
    entry) with the leaf inputs of ``states[b]`` (``OrderState`` objects on ``lt``'s tables): the observation
    vector in ``vectors[b, :obs_dim]``; with ``enc`` (float32 ``[n, E]``, the per-buffer encodings) the encoder's
    numbers after it, and with ``chosen`` (``[n]``, 0/1: the relaxation's set) its four numbers last."""
    cdef OrderTables t = lt.t
    cdef OrderState st
    cdef Py_ssize_t B = len(states), b, i, j, q, r, p, nh, bins = lt.bins, k = lt.k, m_u, e_dim = 0, base, c
    cdef Py_ssize_t n = lt.n, first, last
    cdef long long s, e, o, lo, hi, size_i, placed_bytes, chosen_u, other_u, other_p, int_hole
    cdef double scale = lt.scale, width, v, value, hole, waste, undecided_bytes, denser_bytes, peak, dens_i
    cdef vector[double] diff
    cdef float* row
    cdef const float* src
    cdef vector[long long] near
    cdef vector[float] acc
    cdef Hole h
    diff.resize(bins + 1)
    if enc is not None:
        e_dim = enc.shape[1]
        if enc.shape[0] != n:
            raise ValueError("enc must have a row per buffer")
        acc.resize(e_dim)
    if chosen is not None and chosen.shape[0] != n:
        raise ValueError("chosen must have an entry per buffer")
    for b in range(B):
        st = <OrderState?> states[b]
        if st.t is not t:
            raise ValueError("a state of another problem or decision order")
        row = &vectors[b, 0]
        if st.pos >= n:  # done: all zeros but the progress
            row[lt.obs_dim - 2] = 1.0
            row[lt.obs_dim - 1] = 1.0
            continue
        i = t.order[st.pos]
        s, e, size_i = t.start[i], t.end[i], t.size[i]
        src = lt.features + 8 * i
        for c in range(8):
            row[c] = src[c]
        near.clear()
        _overlap_query(t, s, e, &near)
        # the occupancy profile over [s, e) of the placed buffers (Game._profile, reduce_max=False)
        if e > s:
            width = <double> (e - s) / <double> bins
            for c in range(bins + 1):
                diff[c] = 0.0
            for q in range(<Py_ssize_t> near.size()):  # np.add.at(diff, first, values)
                j = near[q]
                if st.off[j] < 0:
                    continue
                v = floor(<double> ((t.start[j] if t.start[j] > s else s) - s) / width)
                first = 0 if v < 0 else (bins - 1 if v > bins - 1 else <Py_ssize_t> v)
                diff[first] += <double> t.size[j] / scale
            for q in range(<Py_ssize_t> near.size()):  # np.add.at(diff, last, -values)
                j = near[q]
                if st.off[j] < 0:
                    continue
                v = ceil(<double> ((t.end[j] if t.end[j] < e else e) - s) / width)
                last = 1 if v < 1 else (bins if v > bins else <Py_ssize_t> v)
                diff[last] += -(<double> t.size[j] / scale)
            v = 0.0
            for c in range(bins):  # np.cumsum(diff[:-1])
                v = diff[c] if c == 0 else v + diff[c]
                row[8 + c] = <float> v
        # the actions and the mask
        st._find_holes()
        nh = st.cur_holes.size()
        if lt.map_mode:
            value = st._place_reward(i, 0, False) * lt.reward_norm / lt.max_benefit
        else:
            value = <double> size_i / scale
        for j in range(nh):
            h = st.cur_holes[j]
            o, lo, hi = h.offset, h.bottom, h.top
            if (not t.capped and hi == _UNBOUNDED) or scale < <double> hi:  # min(top, scale) is scale
                hole = scale - <double> lo
                waste = hole - <double> size_i
            else:
                int_hole = hi - lo
                hole = <double> int_hole
                waste = <double> (int_hole - size_i)
            actions[b, j, 0] = <float> (<double> o / scale)
            actions[b, j, 1] = <float> (<double> (o + size_i) / scale)
            actions[b, j, 2] = <float> (hole / scale)
            actions[b, j, 3] = <float> (waste / scale)
            actions[b, j, 4] = <float> value
            actions[b, j, 5] = <float> (<double> j / <double> k)
            actions[b, j, 7] = 1.0
            masks[b, j] = 1
        masks[b, k] = st._slow_legal()
        actions[b, k, 6] = 1.0
        actions[b, k, 7] = masks[b, k]
        # the upcoming buffers and the progress
        base = 8 + bins
        for r in range(lt.upcoming):
            p = st.pos + 1 + r
            if p >= n:
                break
            src = lt.features + 8 * t.order[p]
            for c in range(8):
                row[base + 8 * r + c] = src[c]
        base += 8 * lt.upcoming
        row[base] = <float> (<double> st.pos / <double> (n if n > 1 else 1))
        row[base + 1] = <float> (<double> (s - lt.t0) / lt.horizon)
        if enc is None:
            continue
        # the encoder's numbers: the current buffer's encoding, then the state summary (encoder.state_features)
        base = lt.obs_dim
        for c in range(e_dim):
            row[base + c] = enc[i, c]
            acc[c] = 0.0
        base += e_dim
        m_u = 0
        undecided_bytes = denser_bytes = 0.0
        peak = -INFINITY
        dens_i = lt.density[i]
        placed_bytes = chosen_u = other_u = other_p = 0
        for q in range(<Py_ssize_t> near.size()):
            j = near[q]
            if j == i:
                continue
            if lt.position[j] > st.pos:  # undecided
                m_u += 1
                undecided_bytes += <double> t.size[j]
                if lt.density[j] > dens_i:
                    denser_bytes += <double> t.size[j]
                if lt.density[j] > peak:
                    peak = lt.density[j]
                for c in range(e_dim):
                    acc[c] = acc[c] + enc[j, c]
                if chosen is not None:
                    if chosen[j]:
                        chosen_u += t.size[j]
                    else:
                        other_u += t.size[j]
            if st.off[j] >= 0:  # placed
                placed_bytes += t.size[j]
                if chosen is not None and not chosen[j]:
                    other_p += t.size[j]
        if m_u:
            row[base] = <float> (<double> m_u / 16.0)
            row[base + 1] = <float> (undecided_bytes / scale)
            row[base + 2] = <float> (denser_bytes / scale)
            row[base + 3] = <float> peak
            for c in range(e_dim):
                row[base + 6 + c] = acc[c] / <float> m_u
        row[base + 4] = <float> (<double> placed_bytes / scale)
        row[base + 5] = <float> (<double> size_i / scale)
        if chosen is None:
            continue
        base += 6 + e_dim
        row[base] = 1.0 if chosen[i] else 0.0
        row[base + 1] = <float> (<double> chosen_u / scale)
        row[base + 2] = <float> (<double> other_u / scale)
        row[base + 3] = <float> (<double> other_p / scale)
