"""A sandbox child's scratch: the one folder it may write besides the spec's ``sandbox_writable``, made
in one folder per user that every child's boundary hides (each granted its own inside), and the
environment that points the child's tools at it."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

SCRATCH_ENV = ("TMPDIR", "TEMP", "TMP")  # where the child's tempfile and its tools make files
# where tools keep per-user data and state (platformdirs: inspect_ai's traces and sample buffers):
# in the scratch too, since the boundary lets the child write nothing under $HOME. Caches stay
# where they are, readable: a model cache moved to an empty folder would be fetched again
SCRATCH_XDG = ("XDG_DATA_HOME", "XDG_STATE_HOME")


def scratch_root() -> Path:
    """The one folder every sandbox child's scratch is made in (this user's, whichever process starts
    the child: a session, an xdist worker, a microcase's call). Every child's boundary hides it and
    grants the child its own folder inside, so no child reads another's, even knowing its path (arms of
    one session must not share what they drew). Refused if another user holds the name."""
    root = Path(tempfile.gettempdir()) / f"capevolve-scratch-{os.getuid()}"
    with contextlib.suppress(FileExistsError):
        root.mkdir(mode=0o700)
    found = os.lstat(root)
    if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.getuid():
        raise OSError(f"{root} is not a folder of this user's: remove it, or set TMPDIR to another folder")
    return root


def new_scratch(prefix: str) -> str:
    """A fresh scratch folder in :func:`scratch_root`, for one child."""
    return tempfile.mkdtemp(prefix=prefix, dir=scratch_root())


def scratch_env(scratch: str) -> dict[str, str]:
    """The child's environment: this process's, its temporary, data and state folders in ``scratch`` (the
    one it may write besides ``sandbox_writable``), less ``PYTEST_CURRENT_TEST`` (names a null's tag)."""
    env = {**os.environ, **dict.fromkeys(SCRATCH_ENV, scratch)}
    env.update({name: os.path.join(scratch, name.lower()) for name in SCRATCH_XDG})
    return {name: value for name, value in env.items() if name != "PYTEST_CURRENT_TEST"}
