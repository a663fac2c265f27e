"""Never load bytecode this process did not compile itself.

Python loads ``__pycache__/<name>.cpython-3XX.pyc`` instead of a module's source whenever the
cached file claims the source's mtime and size, and those are easy to copy. So a ``.pyc``
built from a modified adapter (planted by hand, or by candidate code during its own gate) ran
in place of the locked ``adapter.py``, and one planted beside a sibling snapshot's
``tools/reply.py`` broke the seed and its nulls. The harness lock and the snapshot hash read
the sources, so neither saw it.

:func:`use_private_cache` points ``sys.pycache_prefix`` at a folder this process makes for
itself (``mkdtemp``, removed at exit): from then on Python neither reads nor writes a cache
next to any source, only in that folder, which no earlier session or other process could have
filled. It is called before the adapter is imported — in every process that imports one (the
pytest session before its conftests, each xdist worker, each sandbox child, the ``capevolve``
commands) — so every process compiles the harness and the candidates from their locked bytes.
Each sandbox child makes its own folder: candidate code that writes into its cache reaches
only the process already running that candidate.

Modules imported before the call (pytest itself, and what is installed in site-packages) keep
Python's ordinary cache; writing those is editing the environment, which the threat model
names as out of reach of a file-level guard (start-up hooks are locked, see
:mod:`.startup_hooks`).
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile

_ours: str | None = None  # the folder this process made; set once


def use_private_cache() -> str:
    """Make ``sys.pycache_prefix`` a fresh folder of this process's own (idempotent)."""
    global _ours
    if _ours is None or sys.pycache_prefix != _ours or not os.path.isdir(_ours):
        folder = tempfile.mkdtemp(prefix="capevolve-pyc-")
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        _ours = folder
    sys.pycache_prefix = _ours
    return _ours
