"""The compiled modules (the async-copy service, hardware/_copy_service.pyx; the prefetch game's hole finder,
search/_prefetch_holes.pyx; the order game's native engine, search/_order_game.pyx;
the ordered best-fit placement loop, mallocgame/_placement.pyx); everything else is in
pyproject.toml.

setuptools reads the project's metadata, packages and package dirs from pyproject.toml; this file only adds the
Cython extensions, built by ``pip install`` (and in place by ``pip install -e``).
"""

from Cython.Build import cythonize
from setuptools import Extension, setup

# Each .pyx sets its own compiler directives (and language) in its header comments.
setup(ext_modules=cythonize([Extension("mallocgame.hardware._copy_service", ["hardware/_copy_service.pyx"]),
                             Extension("mallocgame.search._prefetch_holes", ["search/_prefetch_holes.pyx"]),
                             Extension("mallocgame.search._order_game", ["search/_order_game.pyx"]),
                             Extension("mallocgame.search._prefetch_game", ["search/_prefetch_game.pyx"]),
                             Extension("mallocgame._placement", ["mallocgame/_placement.pyx"])]))
