"""Importers: real ML programs -> ``mallocgame.workload/1`` problems (docs/architecture.md, "The model").

One function per importer, each returning a map-mode :class:`~mallocgame.problem.model.Problem`
(ops in schedule order, tight live ranges, ``capacity=None``):

* :func:`import_hlo` -- scheduled XLA HLO text (``mallocgame.importers.hlo``);
* :func:`import_torch` -- a PyTorch ``nn.Module`` through ``torch.export``
  (``mallocgame.importers.torch_export``; torch is imported only when this runs);
* :func:`import_matmul` -- AlphaTensor-style recursive matmul programs
  (``mallocgame.importers.matmul``).

:func:`import_workload` dispatches on a kind name, :func:`summarize` gives what every
``mallocgame import`` command prints (ops, buffers, total FLOPs, max live bytes), and
:data:`import_group` (``mallocgame.cli.importers``) is the click group of those commands.

Example:
    >>> from mallocgame.importers import import_workload, summarize
    >>> s = summarize(import_workload("matmul", depth=1))
    >>> (s.ops > 0, s.flops > 0)
    (True, True)
"""

from __future__ import annotations

import importlib
from typing import Any, Callable

from mallocgame.importers._common import ImportSummary, WorkloadBuilder, summarize
from mallocgame.problem.model import InputError, Problem


# Each importer's module is imported when it is first used: reading a problem file imports
# ``mallocgame.importers.hlo`` (and so this package) on every command's start-up, which then needs
# neither the matmul generator nor the torch importer.
def _importer(name: str):
    return importlib.import_module(f"mallocgame.importers.{name}")


def import_hlo(path, **options) -> Problem:
    """Workload of a scheduled HLO text file; see :mod:`mallocgame.importers.hlo`."""
    return _importer("hlo").import_hlo(path, **options)


def import_torch(spec, input_shapes=(), **options) -> Problem:
    """Workload of a PyTorch module via ``torch.export``; see :mod:`mallocgame.importers.torch_export`."""
    return _importer("torch_export").import_torch(spec, input_shapes, **options)


def import_matmul(factorization=None, **options) -> Problem:
    """Workload of a recursive fast-matmul program; see :mod:`mallocgame.importers.matmul`."""
    return _importer("matmul").import_matmul(factorization, **options)


IMPORTERS: dict[str, Callable[..., Problem]] = {
    "hlo": import_hlo,
    "torch": import_torch,
    "matmul": import_matmul,
}


def import_workload(kind: str, *args: Any, **options: Any) -> Problem:
    """Dispatch to the importer named ``kind`` (``hlo``, ``torch`` or ``matmul``)."""
    try:
        fn = IMPORTERS[kind]
    except KeyError:
        raise InputError(f"unknown importer {kind!r} (one of {', '.join(IMPORTERS)})") from None
    return fn(*args, **options)


__all__ = ["IMPORTERS", "ImportSummary", "WorkloadBuilder", "import_hlo", "import_matmul",
           "import_torch", "import_workload", "summarize"]
