"""The native engine: one compiled extension module, ``mallocgame._native`` (mallocgame/_native.pyx, which includes
its parts: the async-copy service, hardware/_copy_service.pxi; the prefetch game's hole finder,
search/_prefetch_holes.pxi; the order, address and prefetch games' native engines, search/_order_game.pxi,
search/_address_game.pxi and search/_prefetch_game.pxi; the ordered best-fit placement loop,
mallocgame/algorithms/_placement.pxi; msa's heap, copy budgets and prefetch picker, mallocgame/algorithms/_msa.pxi; pack-search's
first
fit and canonical search, solvers/pack_search/_pack.pxi; the overlap index's checkpoint sets,
mallocgame/problem/_overlap_index.pxi; the map evaluator's benefits, hardware/_operand_benefits.pxi);
everything else is in pyproject.toml.

setuptools reads the project's metadata, packages and package dirs from pyproject.toml; this file only adds the
Cython extension, built by ``pip install`` (and in place by ``pip install -e``).
"""

from Cython.Build import cythonize
from setuptools import Extension, setup

# mallocgame/_native.pyx sets the compiler directives, the language (C++) and the flags in its header comments.
setup(ext_modules=cythonize([Extension("mallocgame._native", ["mallocgame/_native.pyx"])]))
