"""The native engine: the compiled extension modules, ``mallocgame._native`` (mallocgame/_native.pyx, which includes
its parts: the async-copy service, hardware/_copy_service.pxi; the prefetch game's hole finder,
search/_prefetch_holes.pxi; the order game's and the prefetch game's native engines, search/_order_game.pxi and
search/_prefetch_game.pxi; the ordered best-fit placement loop, mallocgame/_placement.pxi), ``mallocgame._msa``
(msa's heap, copy budgets and prefetch picker) and ``mallocgame._pack`` (pack-search's first fit and canonical
search); everything else is in pyproject.toml.

setuptools reads the project's metadata, packages and package dirs from pyproject.toml; this file only adds the
Cython extensions, built by ``pip install`` (and in place by ``pip install -e``).
"""

from Cython.Build import cythonize
from setuptools import Extension, setup

# Each .pyx sets its compiler directives, its language (C++) and its flags in its header comments. msa's and
# pack-search's loops are modules of their own until they join mallocgame._native (they are compiled with C division).
setup(ext_modules=cythonize([Extension("mallocgame._native", ["mallocgame/_native.pyx"]),
                             Extension("mallocgame._msa", ["mallocgame/_msa.pyx"]),
                             Extension("mallocgame._pack", ["mallocgame/_pack.pyx"])]))
