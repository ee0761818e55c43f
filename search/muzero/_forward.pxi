# ---- the network's forward pass (search/muzero/_forward.pxi) -------------------------------------------------
# The passes of ``mallocgame.search.muzero.inference.NumpyNet`` the tree search asks for, as plain C loops over
# float32: ``policy_logits`` of one example (the guided search's prior at a node) and ``evaluate`` /
# ``evaluate_batch`` (the value leaves: policy logits and the value head's output). ``NumpyNet`` is the reference;
# the answers agree with it to float32 rounding (the sums run in another order than numpy's BLAS), which
# tests/test_forward_pass.py checks on every shipped checkpoint.
#
# Every dense layer's weights are held as ``[in, out]`` rows (NumpyNet's own transposed copies, made contiguous
# once at load), so ``y += x[i] * w[i, :]`` runs over contiguous outputs, one independent sum per output: it runs
# in SIMD vectors (SSE, or AVX2 where the CPU has it: the same floats) without reordering any sum. Inputs that are zero (most of the action features, half of
# a ReLU's outputs) skip their row. The concatenations of the numpy code become sums over blocks of a layer's
# rows, so the state's part of the per-action layers is computed once per example.

from libc.math cimport INFINITY, NAN, exp
from libcpp.vector cimport vector as _fvector

cdef extern from *:
    """
    #include <math.h>
    #include <string.h>
    /* y[j] += sum_i x[i] * w[i * ld + j] over i < n, j < m: each output its own sum, in i's order (rows whose x is 0
       skipped). Blocks of 4 vectors of y stay in registers over all i; the AVX2 twin (8 floats a vector, chosen
       once by the CPU, no fused multiply-add) does the same operations per output, so both give the same floats. */
    typedef float mg_v4 __attribute__((vector_size(16)));
    typedef float mg_v8 __attribute__((vector_size(32)));
    #define MG_AXPY_BODY(V, W)                                                                              \
        Py_ssize_t j = 0;                                                                                   \
        for (; j + 4 * W <= m; j += 4 * W) {                                                                \
            V a0, a1, a2, a3, b;                                                                            \
            memcpy(&a0, y + j, sizeof(V)); memcpy(&a1, y + j + W, sizeof(V));                               \
            memcpy(&a2, y + j + 2 * W, sizeof(V)); memcpy(&a3, y + j + 3 * W, sizeof(V));                   \
            for (Py_ssize_t i = 0; i < n; ++i) {                                                            \
                const float xi = x[i];                                                                      \
                if (xi == 0.0f) continue;                                                                   \
                const float* r = w + i * ld + j;                                                            \
                memcpy(&b, r, sizeof(V)); a0 += xi * b;                                                     \
                memcpy(&b, r + W, sizeof(V)); a1 += xi * b;                                                 \
                memcpy(&b, r + 2 * W, sizeof(V)); a2 += xi * b;                                             \
                memcpy(&b, r + 3 * W, sizeof(V)); a3 += xi * b;                                             \
            }                                                                                               \
            memcpy(y + j, &a0, sizeof(V)); memcpy(y + j + W, &a1, sizeof(V));                               \
            memcpy(y + j + 2 * W, &a2, sizeof(V)); memcpy(y + j + 3 * W, &a3, sizeof(V));                   \
        }                                                                                                   \
        for (; j < m; ++j) {                                                                                \
            float a = y[j];                                                                                 \
            for (Py_ssize_t i = 0; i < n; ++i) {                                                            \
                const float xi = x[i];                                                                      \
                if (xi != 0.0f) a += xi * w[i * ld + j];                                                    \
            }                                                                                               \
            y[j] = a;                                                                                       \
        }
    static void mg_axpy_rows_v4(const float* __restrict__ x, Py_ssize_t n, const float* __restrict__ w,
                                Py_ssize_t ld, Py_ssize_t m, float* __restrict__ y) { MG_AXPY_BODY(mg_v4, 4) }
    #if defined(__x86_64__) || defined(__i386__)
    /* x86 only: the AVX2 twin, chosen at run time (other CPUs build and run the 4-float version alone) */
    __attribute__((target("avx2")))
    static void mg_axpy_rows_v8(const float* __restrict__ x, Py_ssize_t n, const float* __restrict__ w,
                                Py_ssize_t ld, Py_ssize_t m, float* __restrict__ y) { MG_AXPY_BODY(mg_v8, 8) }
    static int mg_has_avx2 = -1;
    static inline void mg_axpy_rows(const float* x, Py_ssize_t n, const float* w, Py_ssize_t ld, Py_ssize_t m,
                                    float* y) {
        if (mg_has_avx2 < 0) mg_has_avx2 = __builtin_cpu_supports("avx2") ? 1 : 0;
        if (mg_has_avx2) mg_axpy_rows_v8(x, n, w, ld, m, y); else mg_axpy_rows_v4(x, n, w, ld, m, y);
    }
    #else
    static inline void mg_axpy_rows(const float* x, Py_ssize_t n, const float* w, Py_ssize_t ld, Py_ssize_t m,
                                    float* y) { mg_axpy_rows_v4(x, n, w, ld, m, y); }
    #endif
    static inline void mg_relu(float* y, Py_ssize_t m) {
        for (Py_ssize_t j = 0; j < m; ++j) if (!(y[j] > 0.0f)) y[j] = 0.0f;
    }
    /* sum_i x[i] * w[i] in four interleaved partial sums (a fixed order) */
    static inline float mg_dot(const float* __restrict__ x, const float* __restrict__ w, Py_ssize_t n) {
        float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
        Py_ssize_t i = 0;
        for (; i + 4 <= n; i += 4) {
            s0 += x[i] * w[i]; s1 += x[i + 1] * w[i + 1]; s2 += x[i + 2] * w[i + 2]; s3 += x[i + 3] * w[i + 3];
        }
        for (; i < n; ++i) s0 += x[i] * w[i];
        return (s0 + s1) + (s2 + s3);
    }
    /* (x - mean) / sqrt(var + eps) over m values, the moments in double */
    static inline void mg_layer_norm(float* x, Py_ssize_t m) {
        double mean = 0.0, var = 0.0;
        for (Py_ssize_t j = 0; j < m; ++j) mean += x[j];
        mean /= (double)m;
        for (Py_ssize_t j = 0; j < m; ++j) { double d = x[j] - mean; var += d * d; }
        var /= (double)m;
        const double inv = 1.0 / sqrt(var + 1e-5);
        for (Py_ssize_t j = 0; j < m; ++j) x[j] = (float)((x[j] - mean) * inv);
    }
    """
    void mg_axpy_rows(const float* x, Py_ssize_t n, const float* w, Py_ssize_t ld, Py_ssize_t m, float* y) noexcept nogil
    void mg_relu(float* y, Py_ssize_t m) noexcept nogil
    float mg_dot(const float* x, const float* w, Py_ssize_t n) noexcept nogil
    void mg_layer_norm(float* x, Py_ssize_t m) noexcept nogil


cdef struct _Mlp:  # Linear -> ReLU -> Linear: w1 [n_in, hidden], b1 [hidden], w2 [hidden, n_out], b2 [n_out]
    const float* w1
    const float* b1
    const float* w2
    const float* b2
    Py_ssize_t n_in, hidden, n_out


cdef inline void _mlp_out(const _Mlp& f, float* h, float* y) noexcept nogil:
    """``y = relu(h) @ w2 + b2`` for ``h`` holding the first layer's pre-activation (ReLU'd in place)."""
    cdef Py_ssize_t j
    mg_relu(h, f.hidden)
    for j in range(f.n_out):
        y[j] = f.b2[j]
    mg_axpy_rows(h, f.hidden, f.w2, f.n_out, f.n_out, y)


cdef inline void _start(const _Mlp& f, float* h) noexcept nogil:
    cdef Py_ssize_t j
    for j in range(f.hidden):
        h[j] = f.b1[j]


cdef class ForwardNet:
    """The compiled forward pass of a :class:`~mallocgame.search.muzero.inference.NumpyNet` (its weights copied
    at construction): :meth:`policy_logits`, :meth:`prior`, :meth:`evaluate` and :meth:`evaluate_batch`, the same
    arguments and results as the numpy methods of those names.

    The scratch buffers of a pass (``hid``, ``phi``, ``state``, ``rows``, ...) belong to the network, not to the call,
    and carry nothing from one example to the next. That is safe because one example's pass (``_example``) runs with
    the GIL held from start to end: it has no ``nogil`` section and calls no Python, so threads sharing a network take
    turns between examples. A pass that released the GIL would need scratch of its own per call."""

    cdef object keep  # the float32 arrays the pointers of the layers read
    cdef _Mlp embed, represent, context, policy, value, context_value
    cdef readonly bint has_context_value
    cdef readonly Py_ssize_t obs_dim, action_features, latent, embed_dim, context_dim
    cdef const float* policy_w2  # column 0 of the policy head's second layer (the logit), contiguous
    cdef float policy_b2
    cdef _fvector[float] empty_phi  # the action embedding of an empty slot (zero features, not slow)
    cdef _fvector[float] empty_context  # its part of action_context's first layer: empty_phi @ w1[:d]
    # scratch of one example's pass: one pass at a time, under the GIL (class docstring)
    cdef _fvector[float] phi, emb, hid, hid2, state, state_ctx, state_pol, pooled, head_in, emb_empty, out
    cdef _fvector[Py_ssize_t] rows

    def __init__(self, net):
        import numpy as np
        self.keep = []
        self.embed = self._layer(net.action_embed)
        self.represent = self._layer(net.represent)
        self.context = self._layer(net.action_context)
        self.policy = self._layer(net.policy_head)
        self.value = self._layer(net.value_head)
        self.has_context_value = net.context_value is not None
        if self.has_context_value:
            self.context_value = self._layer(net.context_value)
        self.action_features = self.embed.n_in - 1
        self.embed_dim = self.embed.n_out
        self.latent = self.represent.n_out
        self.obs_dim = self.represent.n_in - 2 * self.embed_dim
        self.context_dim = self.context_value.n_in - self.latent - self.embed_dim if self.has_context_value else 0
        if (self.context.n_in != self.embed_dim + self.latent or self.context.n_out != self.embed_dim
                or self.policy.n_in != self.latent + self.embed_dim or self.value.n_in != self.latent + self.embed_dim
                or self.obs_dim < 0):
            raise ValueError("ForwardNet: the network's layer shapes are not those of a MuZeroNet")
        column = np.ascontiguousarray(np.asarray(net.policy_head.w2, np.float32)[:, 0])
        self.keep.append(column)
        self.policy_w2 = self._pointer(column)
        self.policy_b2 = float(np.asarray(net.policy_head.b2, np.float32)[0])
        cdef Py_ssize_t width = max(self.embed.hidden, self.represent.hidden, self.context.hidden,
                                    self.policy.hidden, self.value.hidden,
                                    self.context_value.hidden if self.has_context_value else 0)
        self.hid.resize(width)
        self.hid2.resize(width)
        self.state.resize(self.latent)
        self.state_ctx.resize(self.context.hidden)
        self.state_pol.resize(self.policy.hidden)
        self.pooled.resize(2 * self.embed_dim)
        self.head_in.resize(self.latent + self.embed_dim + self.context_dim)
        self.emb_empty.resize(self.embed_dim)
        self.out.resize(max(self.embed.n_out, self.represent.n_out, self.context.n_out, self.value.n_out,
                            self.context_value.n_out if self.has_context_value else 0))
        self.empty_phi.resize(self.embed_dim)
        _start(self.embed, &self.hid[0])
        _mlp_out(self.embed, &self.hid[0], &self.empty_phi[0])
        self.empty_context.assign(self.context.hidden, 0.0)
        mg_axpy_rows(&self.empty_phi[0], self.embed_dim, self.context.w1, self.context.hidden, self.context.hidden,
                     &self.empty_context[0])

    cdef const float* _pointer(self, arr):
        cdef const float[::1] view = arr.reshape(-1)  # a view: the memory of the array kept in self.keep
        return &view[0]

    cdef _Mlp _layer(self, mlp) except *:
        import numpy as np
        cdef _Mlp f
        w1, b1, w2, b2 = (np.ascontiguousarray(np.asarray(a, np.float32)) for a in (mlp.w1, mlp.b1, mlp.w2, mlp.b2))
        self.keep.extend((w1, b1, w2, b2))
        f.w1, f.b1, f.w2, f.b2 = self._pointer(w1), self._pointer(b1), self._pointer(w2), self._pointer(b2)
        f.n_in, f.hidden, f.n_out = w1.shape[0], w1.shape[1], w2.shape[1]
        if b1.shape[0] != f.hidden or w2.shape[0] != f.hidden or b2.shape[0] != f.n_out:
            raise ValueError("ForwardNet: a layer's weights do not fit each other")
        return f

    cdef void _example(self, const float* vector, const float* actions, const unsigned char* mask, Py_ssize_t A,
                       bint legal_only, const float* context, float* logits, float* value) noexcept:
        """One example: the logits of its kept rows into ``logits[A]`` (``legal_only``: the legal rows, the others
        NaN; else every row with features, legal or slow, and the empty slots' shared logit elsewhere) and, with
        ``value`` not NULL, the value (``context`` not NULL: the context head's) into ``value[0]``."""
        cdef Py_ssize_t F = self.action_features, d = self.embed_dim, L = self.latent, D = self.obs_dim
        cdef Py_ssize_t a, r, j, n_rows, n_legal = 0, Hc = self.context.hidden, Hp = self.policy.hidden
        cdef bint keep_row
        cdef float one = 1.0, x, logit_empty
        cdef float* phi
        cdef float* emb
        cdef float* hid = &self.hid[0]
        cdef float* pooled = &self.pooled[0]
        self.rows.clear()
        for a in range(A):
            keep_row = mask[a] != 0
            if not keep_row and not legal_only:
                keep_row = a == A - 1
                j = 0
                while not keep_row and j < F:
                    keep_row = actions[a * F + j] != 0.0
                    j += 1
            if keep_row:
                self.rows.push_back(a)
        n_rows = self.rows.size()
        if <Py_ssize_t> self.phi.size() < (n_rows + 1) * d:
            self.phi.resize((n_rows + 1) * d)
            self.emb.resize((n_rows + 1) * d)
        phi = &self.phi[0]
        emb = &self.emb[0]
        # the action embeddings of the kept rows; their mean and peak over the legal ones
        for j in range(d):
            pooled[j] = 0.0
            pooled[d + j] = -1e4
        for r in range(n_rows):
            a = self.rows[r]
            _start(self.embed, hid)
            mg_axpy_rows(actions + a * F, F, self.embed.w1, self.embed.hidden, self.embed.hidden, hid)
            if a == A - 1:
                mg_axpy_rows(&one, 1, self.embed.w1 + F * self.embed.hidden, self.embed.hidden, self.embed.hidden,
                             hid)
            _mlp_out(self.embed, hid, phi + r * d)
            if mask[a] != 0:
                n_legal += 1
                for j in range(d):
                    x = phi[r * d + j]
                    pooled[j] += x
                    if x > pooled[d + j]:
                        pooled[d + j] = x
        for j in range(d):
            pooled[j] = pooled[j] / (<float> n_legal if n_legal > 1 else <float> 1.0)
            if pooled[d + j] < -1e3:
                pooled[d + j] = -1e3
        # the state: represent([vector, mean, peak]), layer-normed
        _start(self.represent, hid)
        mg_axpy_rows(vector, D, self.represent.w1, self.represent.hidden, self.represent.hidden, hid)
        mg_axpy_rows(pooled, 2 * d, self.represent.w1 + D * self.represent.hidden, self.represent.hidden,
                     self.represent.hidden, hid)
        cdef float* state = &self.state[0]
        _mlp_out(self.represent, hid, state)
        mg_layer_norm(state, L)
        # the state's parts of action_context's ([phi, state]) and the policy head's ([state, emb]) first layers
        cdef float* state_ctx = &self.state_ctx[0]
        cdef float* state_pol = &self.state_pol[0]
        _start(self.context, state_ctx)
        mg_axpy_rows(state, L, self.context.w1 + d * Hc, Hc, Hc, state_ctx)
        _start(self.policy, state_pol)
        mg_axpy_rows(state, L, self.policy.w1, Hp, Hp, state_pol)
        if legal_only:
            for a in range(A):
                logits[a] = <float> NAN
        for r in range(n_rows + 1):
            # row n_rows is the empty slot's (its features' part of the first layer computed at load)
            for j in range(Hc):
                hid[j] = state_ctx[j] + (self.empty_context[j] if r == n_rows else 0.0)
            if r < n_rows:
                mg_axpy_rows(phi + r * d, d, self.context.w1, Hc, Hc, hid)
            elif legal_only and value == NULL:
                break
            _mlp_out(self.context, hid, emb + r * d)
            mg_layer_norm(emb + r * d, d)
            for j in range(Hp):
                self.hid2[j] = state_pol[j]
            mg_axpy_rows(emb + r * d, d, self.policy.w1 + L * Hp, Hp, Hp, &self.hid2[0])
            mg_relu(&self.hid2[0], Hp)
            x = mg_dot(&self.hid2[0], self.policy_w2, Hp) + self.policy_b2
            if r < n_rows:
                logits[self.rows[r]] = x
            else:
                logit_empty = x
        if not legal_only:
            r = 0
            for a in range(A):
                if r < n_rows and self.rows[r] == a:
                    r += 1
                else:
                    logits[a] = logit_empty
        if value == NULL:
            return
        # the value head's input [state, mean of the A action embeddings (the empty slots' shared one for the rest)]
        cdef float* head_in = &self.head_in[0]
        cdef float n_empty = <float> (A - n_rows)
        for j in range(L):
            head_in[j] = state[j]
        for j in range(d):
            x = 0.0
            for r in range(n_rows):
                x += emb[r * d + j]
            head_in[L + j] = (x + n_empty * emb[n_rows * d + j]) / <float> A
        cdef _Mlp* head = &self.value
        if context != NULL:
            head = &self.context_value
            for j in range(self.context_dim):
                head_in[L + d + j] = context[j]
        _start(head[0], hid)
        mg_axpy_rows(head_in, head.n_in, head.w1, head.hidden, head.hidden, hid)
        _mlp_out(head[0], hid, &self.out[0])
        value[0] = self.out[0]

    cdef _check(self, Py_ssize_t D, Py_ssize_t F):
        if D != self.obs_dim or F != self.action_features:
            raise ValueError(f"ForwardNet: inputs of {D} vector and {F} action features; the network reads "
                             f"{self.obs_dim} and {self.action_features}")

    def policy_logits(self, vector, actions, mask):
        """``NumpyNet.policy_logits``: logits ``[A]`` of the legal actions, NaN at the others."""
        import numpy as np
        cdef const float[::1] v = np.ascontiguousarray(vector, np.float32)
        cdef const float[:, ::1] act = np.ascontiguousarray(actions, np.float32)
        cdef const unsigned char[::1] m = np.ascontiguousarray(mask, np.bool_).view(np.uint8)
        cdef Py_ssize_t A = act.shape[0]
        self._check(v.shape[0], act.shape[1])
        if m.shape[0] != A:
            raise ValueError("ForwardNet: the mask's length is not the number of actions")
        out = np.empty(A, np.float32)
        cdef float[::1] o = out
        if A:
            self._example(&v[0], &act[0, 0], &m[0], A, True, NULL, &o[0], NULL)
        return out

    def prior(self, vector, actions, mask, legal):
        """The guided search's prior at a node: the softmax (float64) of :meth:`policy_logits` over ``legal``
        (action indices), as ``search.muzero.guide.NetworkPrior`` computes it."""
        import numpy as np
        logits = self.policy_logits(vector, actions, mask)
        cdef const float[::1] lg = logits
        cdef const long long[::1] idx = np.ascontiguousarray(legal, np.int64)
        cdef Py_ssize_t n = idx.shape[0], i, A = lg.shape[0]
        out = np.empty(n, np.float64)
        cdef double[::1] p = out
        cdef double top = -INFINITY, total = 0.0
        for i in range(n):
            if idx[i] < 0 or idx[i] >= A:
                raise IndexError(f"ForwardNet.prior: action {idx[i]} out of {A}")
            p[i] = lg[idx[i]]
            if p[i] > top or i == 0:
                top = p[i]
        for i in range(n):
            p[i] = exp(p[i] - top)
            total += p[i]
        for i in range(n):
            p[i] = p[i] / total
        return out

    def evaluate(self, vector, actions, mask, context=None):
        """``NumpyNet.evaluate``: ``(logits [A], value)``; with ``context`` and a ``context_value`` head, that
        head's value."""
        import numpy as np
        logits, values = self.evaluate_batch(np.asarray(vector, np.float32)[None], np.asarray(actions, np.float32)[None],
                                             np.asarray(mask, bool)[None],
                                             None if context is None else np.asarray(context, np.float32)[None])
        return logits[0], float(values[0])

    def evaluate_batch(self, vectors, actions, masks, contexts=None):
        """``NumpyNet.evaluate_batch``: ``vectors [B, D]``, ``actions [B, A, F]``, ``masks [B, A]`` (and
        ``contexts [B, C]``) -> ``(logits [B, A], values [B])``."""
        import numpy as np
        cdef const float[:, ::1] v = np.ascontiguousarray(vectors, np.float32)
        cdef const float[:, :, ::1] act = np.ascontiguousarray(actions, np.float32)
        cdef const unsigned char[:, ::1] m = np.ascontiguousarray(masks, np.bool_).view(np.uint8)
        cdef Py_ssize_t B = act.shape[0], A = act.shape[1], b
        cdef const float[:, ::1] ctx
        cdef bint with_context = contexts is not None and self.has_context_value
        self._check(v.shape[1], act.shape[2])
        if v.shape[0] != B or m.shape[0] != B or m.shape[1] != A:
            raise ValueError("ForwardNet: vectors, actions and masks of different batch or action counts")
        logits = np.empty((B, A), np.float32)
        values = np.empty(B, np.float32)
        cdef float[:, ::1] lg = logits
        cdef float[::1] val = values
        if with_context:
            ctx = np.ascontiguousarray(contexts, np.float32)
            if ctx.shape[0] != B or ctx.shape[1] != self.context_dim:
                raise ValueError(f"ForwardNet: contexts of shape ({ctx.shape[0]}, {ctx.shape[1]}); the network reads "
                                 f"[{B}, {self.context_dim}]")
        if A == 0:
            raise ValueError("ForwardNet: no action slots")
        for b in range(B):
            self._example(&v[b, 0], &act[b, 0, 0], &m[b, 0], A, False, &ctx[b, 0] if with_context else NULL,
                          &lg[b, 0], &val[b])
        return logits, values
