# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=False
# distutils: language = c++
# distutils: extra_compile_args = -ffp-contract=off
"""The native engine: every compiled loop of mallocgame, in one extension module (``mallocgame._native``).

Each part is the compiled twin of a pure-Python reference (``MALLOCGAME_ENGINE=python`` runs the references,
:mod:`mallocgame.runtime.native_engine`); both give identical answers, floating point included (``-ffp-contract=off``: no fused
multiply-adds; the same operations in the same order). The boundary, what Python calls:

* ``serve_copies_left(copies, budgets)``, ``serve_queue(...)``: XLA's async-copy service
  (``hardware/_copy_service.pxi``; the evaluator, ``msa`` and the prefetch game's Python engine call them);
* ``prefetch_holes(...)``: the offsets the prefetch game offers a new interval (``search/_prefetch_holes.pxi``);
* ``OrderTables``, ``OrderState``: the map/pack order game's state and step (``search/_order_game.pxi``,
  ``search.game_order.NativeOrderGame``);
* ``OrderLeafTables``, ``order_leaf_inputs(...)``: a batch of order-game states' observations and network input
  vectors (``search/_order_leaf.pxi``, ``search.game_order.NativeOrderGame.leaf_inputs``);
* ``ForwardNet``: the network's forward pass the tree search asks for, policy logits of one example and the
  batched evaluation of value leaves (``search/muzero/_forward.pxi``, ``search.muzero.inference.compiled_forward``;
  on both engines, checked against ``NumpyNet`` to float32 rounding, not bit for bit);
* ``AddressTables``, ``AddressState``: the map/pack address (skyline) game's state and step
  (``search/_address_game.pxi``, ``search.game_address.NativeAddressGame``);
* ``PrefetchTables``, ``PrefetchState``: the prefetch game's state and step (``search/_prefetch_game.pxi``,
  ``search.game_prefetch.NativePrefetchGame``);
* ``greedy_place_loop(...)``: greedy-xla's and best-fit's ordered best-fit placement, and ``xla_order_loop(...)``:
  XLA's order it places in (``mallocgame/algorithms/_placement.pxi``);
* ``NativeHeap``, ``NativeCopyResource``, ``NativePrefetcher``: msa's fast-memory heap, copy budgets and a use's
  prefetch (``mallocgame/algorithms/_msa.pxi``, ``mallocgame.algorithms.memory_space_assignment``);
* ``first_fit_loop(...)``, ``CanonicalSearch``, ``ComponentTables``, ``FailedStates``: pack-search's first fit and
  canonical search (``solvers/pack_search/_pack.pxi``, ``mallocgame.solvers.pack_search.search``);
* ``first_overlap_merged(...)``: the validator's sweep over time, ``interval_columns_loop(...)`` and
  ``offset_columns_loop(...)``: a prefetch answer's intervals and a map or pack answer's offsets as int64 columns
  (``hardware/_overlap_sweep.pxi``, ``mallocgame.hardware.validator``);
* ``csv_rows(...)``: the rows of a solution CSV (``formats/_csv_rows.pxi``, ``mallocgame.formats.io.problem_csv_text``)
  and of a prefetch answer's intervals CSV (``mallocgame.formats.io.intervals_csv_text``).
* ``json_buffer_columns(...)``, ``json_op_columns(...)``: a workload JSON's buffers and ops read into numpy
  columns (``formats/_json_columns.pxi``, ``mallocgame.formats.io``).
* ``checkpoint_sets_loop(...)``: an overlap index's checkpoint sets (``problem/_overlap_index.pxi``,
  ``mallocgame.problem.intervals.OverlapIndex``).
* ``operand_benefits_loop(...)``: the map evaluator's per-buffer benefits with ops (``hardware/_operand_benefits.pxi``,
  ``mallocgame.hardware.evaluator.Evaluator.benefits``).
* ``intervals_of_columns_loop(...)``: a prefetch answer's intervals made from the columns it travels in
  (``runtime/_interval_objects.pxi``, ``mallocgame.runtime.incumbents.intervals_of_columns``).

msa's and pack-search's parts divide as C does (``@cython.cdivision(True)`` on each of their functions and
classes), as they were written and checked against their references; the other parts divide as Python does.

The parts are included below, in this order: a part may use what the parts before it define at C level
(the prefetch game calls the copy service's ``serve_one`` and the hole finder's ``holes_among`` directly).
The structures several parts share (``Rect``, ``Hole``, ``_align_up``) are in ``_native_common.pxi``.
"""

cimport cython

include "_native_common.pxi"
include "../hardware/_copy_service.pxi"
include "../search/_prefetch_holes.pxi"
include "../search/_order_game.pxi"
include "../search/_order_leaf.pxi"
include "../search/muzero/_forward.pxi"
include "../search/_address_game.pxi"
include "../search/_prefetch_game.pxi"
include "algorithms/_placement.pxi"
include "algorithms/_msa.pxi"
include "../solvers/pack_search/_pack.pxi"
include "../hardware/_overlap_sweep.pxi"
include "formats/_csv_rows.pxi"
include "formats/_json_columns.pxi"
include "problem/_overlap_index.pxi"
include "../hardware/_operand_benefits.pxi"
include "runtime/_interval_objects.pxi"
