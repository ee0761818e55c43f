# ---- the evaluator's per-buffer benefits (mallocgame/hardware/_operand_benefits.pxi) -----------------------------
# ``mallocgame.hardware.evaluator.Evaluator.benefits`` with ops, compiled (its ``native`` engine): one pass over the
# operands, op by op, instead of a sort of the (op, buffer) pairs. The sums are taken in the reference's order (a
# pair's operands in operand order, a buffer's pairs in op order), so both give the same floats.
# tests/test_engine_inputs.py checks both engines against each other.


def operand_benefits_loop(const long long[::1] op_of, const long long[::1] buf_of, const double[::1] delta,
                          const double[::1] headroom, Py_ssize_t n):
    """``[n]`` float64: for every buffer, the sum over the ops touching it of ``min(its operands' delta summed,
    headroom[op])``; ``None`` when the operands are not grouped by op in ascending op order (the caller sorts)."""
    cdef Py_ssize_t m = op_of.shape[0], k, first, last, b
    cdef long long op
    out_a = np.zeros(n, np.float64)
    cdef double[::1] out = out_a
    acc_a = np.zeros(n, np.float64)
    cdef double[::1] acc = acc_a
    seen_a = np.full(n, -1, np.int64)  # the op whose pair this buffer's acc holds; -2 once that pair is summed
    cdef long long[::1] seen = seen_a
    for k in range(1, m):
        if op_of[k] < op_of[k - 1]:
            return None
    first = 0
    while first < m:
        op = op_of[first]
        last = first
        while last < m and op_of[last] == op:
            b = buf_of[last]
            if seen[b] != op:
                seen[b] = op
                acc[b] = delta[last]
            else:
                acc[b] = acc[b] + delta[last]
            last += 1
        for k in range(first, last):
            b = buf_of[k]
            if seen[b] == op:
                out[b] = out[b] + (acc[b] if acc[b] < headroom[op] else headroom[op])
                seen[b] = -2
        first = last
    return out_a
