"""Landlock, the kernel's unprivileged sandbox, through three system calls and ``ctypes``.

Runs in the process that confines itself before it runs anything untrusted; nothing inside can
lift the ruleset. ``ctypes`` rather than the ``landlock`` package, whose bindings lack scoping
(ABI 6), which keeps candidate code from signalling the session that records its failure.
Landlock only allows: to hide a folder while its neighbours stay readable,
:func:`readable_around` grants every sibling on the way down to it (so a file created later
beside one of those ancestors is not readable from inside)."""

from __future__ import annotations

import ctypes
import os
import stat
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# the system call numbers are the same on every architecture (they came after the unified table)
_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

# the filesystem rights named here (bits 4-12 remove and make files, folders and the like), and
# the ABI that brought each
EXECUTE = 1 << 0
WRITE_FILE = 1 << 1
READ_FILE = 1 << 2
READ_DIR = 1 << 3
MAKE_CHAR = 1 << 6
MAKE_BLOCK = 1 << 11
REFER = 1 << 13  # ABI 2
TRUNCATE = 1 << 14  # ABI 3
IOCTL_DEV = 1 << 15  # ABI 5

SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1  # ABI 6
NET_BIND_TCP = 1 << 0  # ABI 4

_PR_CAPBSET_DROP, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 24, 47, 4
_CAPABILITY_VERSION_3 = 0x20080522

_FS_BY_ABI = {1: REFER - 1, 2: TRUNCATE - 1, 3: IOCTL_DEV - 1, 4: IOCTL_DEV - 1}
READ = EXECUTE | READ_FILE | READ_DIR
# files and folders a process may make, change and remove (IOCTL_DEV only matters for devices)
WRITE = (1 << 16) - 1 & ~(MAKE_CHAR | MAKE_BLOCK)

# writable whatever the boundary: the null device and friends, and shared memory (multiprocessing)
DEVICES = (Path("/dev"),)
SHARED_MEMORY = (Path("/dev/shm"),)

DISABLE_ENV = "CAPEVOLVE_LANDLOCK"  # "off": behave as a kernel without Landlock (tests, and a way out)


class _RulesetAttr(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint64) for name in ("handled_access_fs", "handled_access_net", "scoped")]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1  # the kernel's struct is packed: 12 bytes
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


@dataclass(frozen=True)
class Boundary:
    """What a confined process may reach: ``writable`` (read, write, create, remove beneath),
    ``readable`` (read and execute beneath), ``hidden`` (out of reach under a readable ancestor:
    run dir, gold files, anchor), and with ``read_all`` the whole filesystem but ``hidden``."""

    writable: tuple[Path, ...] = ()
    readable: tuple[Path, ...] = ()
    hidden: tuple[Path, ...] = ()
    read_all: bool = True
    # folders whose entries may be listed (names, never contents), hidden ones beneath included
    listable: tuple[Path, ...] = ()
    # False: no TCP port may be bound (ABI ≥ 4), so candidate code serves nothing a sibling child could
    # reach; connecting stays open (an agent calls its model). An optimizer's boundary keeps it True
    bind_tcp: bool = True

    def as_json(self) -> dict[str, object]:
        return {
            "read_all": self.read_all,
            "bind_tcp": self.bind_tcp,
            **{key: [str(p) for p in getattr(self, key)] for key in _PATH_FIELDS},
        }

    @classmethod
    def from_json(cls, fields: dict[str, object]) -> Boundary:
        def paths(key: str) -> tuple[Path, ...]:
            value = fields.get(key) or []
            assert isinstance(value, list)
            return tuple(Path(str(p)) for p in value)

        return cls(
            read_all=bool(fields.get("read_all", True)),
            bind_tcp=bool(fields.get("bind_tcp", True)),
            **{key: paths(key) for key in _PATH_FIELDS},
        )


_PATH_FIELDS = ("writable", "readable", "hidden", "listable")


@dataclass(frozen=True)
class Confinement:
    """Whether a process is confined, said the same way in every verdict, event and page."""

    confined: bool
    abi: int = 0
    why: str = ""  # when not confined: the reason, for the one line at start
    scoped: bool = field(default=False)

    @property
    def label(self) -> str:
        if self.confined:
            return f"confined (Landlock ABI {self.abi}{'' if self.scoped else ', signals not scoped'})"
        return f"unconfined ({self.why})" if self.why else "unconfined"

    def as_json(self) -> dict[str, object]:
        return {"confined": self.confined, "abi": self.abi, "scoped": self.scoped, "why": self.why}

    @classmethod
    def from_json(cls, fields: dict[str, Any]) -> Confinement:
        """What :meth:`as_json` wrote, in another process (KeyError without ``confined``)."""
        confined = bool(fields["confined"])  # first: what is not a mapping raises TypeError here
        return cls(
            confined, int(fields.get("abi") or 0), str(fields.get("why") or ""), bool(fields.get("scoped"))
        )


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def abi() -> int:
    """The Landlock ABI this kernel offers, 0 when none (not Linux, too old a kernel, disabled at
    boot, a seccomp profile that blocks the call, or ``CAPEVOLVE_LANDLOCK=off``)."""
    if os.environ.get(DISABLE_ENV, "").lower() in ("off", "0", "no", "false"):
        return 0
    if not sys.platform.startswith("linux"):  # what platform.system() says, without importing it
        return 0
    try:
        version = _libc().syscall(_CREATE_RULESET, None, ctypes.c_size_t(0), _CREATE_RULESET_VERSION)
    except (OSError, AttributeError):
        return 0
    return max(int(version), 0)


def unavailable_reason() -> str:
    if os.environ.get(DISABLE_ENV, "").lower() in ("off", "0", "no", "false"):
        return f"Landlock turned off by {DISABLE_ENV}=off"
    if not sys.platform.startswith("linux"):
        import platform

        return f"no Landlock on {platform.system()}"
    return "this kernel offers no Landlock (older than 5.13, disabled at boot, or blocked by seccomp)"


def expected() -> Confinement:
    """What :func:`confine` would make of a process started now from this one, without
    confining anything: the label before (or without) hearing from a child."""
    version = abi()
    if version < 1:
        return Confinement(False, 0, unavailable_reason())
    return Confinement(True, version, "", scoped=version >= 6)


def real_paths(paths: Iterable[str | Path]) -> set[str]:
    """``os.path.realpath`` of each path, each folder resolved once: a project's gold files are
    thousands of paths in a few folders (20,000: 0.41 s at each child's start, one realpath per
    file; the harness lock resolves them too). A path already absolute and normal whose last part
    is no symlink is its folder's real path joined with that part, as ``realpath`` makes it."""
    folders: dict[str, str] = {}
    real: set[str] = set()
    for path in paths:
        text = os.fspath(path)
        folder, name = os.path.split(text)
        if text != os.path.abspath(text) or name in ("", ".", "..") or os.path.islink(text):
            real.add(os.path.realpath(text))
            continue
        resolved = folders.get(folder)
        if resolved is None:
            resolved = folders[folder] = os.path.realpath(folder)
        real.add(os.path.join(resolved, name))
    return real


def _ancestors(paths: Iterable[str]) -> set[str]:
    """Every folder above each of ``paths`` (real paths): each chain climbed up to the first folder
    already in (whose own are, then)."""
    ancestors: set[str] = set()
    for path in paths:
        parent = os.path.dirname(path)
        while parent not in ancestors:
            ancestors.add(parent)
            parent, child = os.path.dirname(parent), parent
            if parent == child:
                break
    return ancestors


def _at_or_beneath(path: str, folder: str) -> bool:
    return path == folder or _beneath(path, {folder})


def _beneath(path: str, folders: set[str]) -> bool:
    """Whether a folder of ``folders`` holds ``path`` (a real path): its parents looked up, not
    every folder compared as a prefix (20,000 gold files made each entry 20,000 comparisons)."""
    parent = os.path.dirname(path)
    while parent not in folders:
        parent, child = os.path.dirname(parent), parent
        if parent == child:
            return False
    return True


def readable_around(hidden: Iterable[Path], root: Path = Path("/")) -> list[str]:
    """The paths to grant so that everything under ``root`` is readable but ``hidden``: every
    entry on the way down but the one leading there, a symlink judged by where it points."""
    hidden_real = real_paths(hidden)
    if not hidden_real:
        return [str(root)]
    # sets of strings: this runs over every entry of folders like /tmp, at each sandbox start
    ancestors = _ancestors(hidden_real)

    granted: list[str] = []
    visited: set[str] = set()
    todo = [os.path.realpath(root)]
    # each folder walked is real, and (but a hidden root's) neither hidden nor beneath a hidden path:
    # every folder after the root is an ancestor that passed the check below. So an entry of it
    # that is no link is beneath a hidden path only if it is one: no climb (~2,000 entries of /tmp)
    climb = todo[0] in hidden_real or _beneath(todo[0], hidden_real)
    while todo:
        folder = todo.pop()
        if folder in visited:
            continue
        visited.add(folder)
        try:
            with os.scandir(folder) as entries:
                found = [(e.path, e.is_symlink()) for e in entries]
        except OSError:
            continue
        for entry, is_link in found:
            # ``folder`` is already real: only a link needs resolving, and climbing
            if is_link or climb:
                real = os.path.realpath(entry) if is_link else entry
                if real in hidden_real or _beneath(real, hidden_real):
                    continue
            elif entry in hidden_real:
                continue
            else:
                real = entry
            if real in ancestors:
                todo.append(real)
            else:
                granted.append(entry)
    return granted


def _refused(call: str) -> OSError:
    """The error of the system call that just failed, named."""
    err = ctypes.get_errno()
    return OSError(err, f"{call}: {os.strerror(err)}")


def _add(libc: ctypes.CDLL, ruleset: int, path: str | Path, access: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # gone, or unreadable to us: nothing to grant
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            # rights that only make sense on a folder are refused on a file (EINVAL)
            access &= EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV
        attr = _PathBeneathAttr(access, fd)
        if libc.syscall(_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(attr), 0) != 0:
            raise _refused(f"landlock_add_rule({path})")
    finally:
        os.close(fd)


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint32) for name in ("effective", "permitted", "inheritable")]


def _drop_capabilities(libc: ctypes.CDLL) -> None:
    """Give up every capability, for good (with ``no_new_privs``, no ``exec`` gives one back). Run as
    root, a process with CAP_SYS_ADMIN or CAP_PERFMON reads another's ``/proc/PID/environ`` and ``maps``
    across Landlock domains (seen on Linux 6.18; ``PR_SET_DUMPABLE`` does not stop it): a sibling child's
    scratch folder, named in its environment. A user's process holds none: nothing changes for it."""
    with open("/proc/sys/kernel/cap_last_cap") as handle:
        last = int(handle.read())
    for cap in range(last + 1):  # refused without CAP_SETPCAP: then there is nothing to drop
        libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)
    libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header, data = _CapHeader(_CAPABILITY_VERSION_3, 0), (_CapData * 2)()
    if libc.capset(ctypes.byref(header), data) != 0:
        raise _refused("capset")


def confine(boundary: Boundary) -> Confinement:
    """Confine this process (and all it starts) to ``boundary``, for good; what it did. A kernel
    without Landlock is ``unconfined`` with its reason; one that refuses a rule raises ``OSError``
    (a boundary that silently did not hold would be worse)."""
    # each hidden path resolved once, not once per grant and twice per pair (20,000 gold files:
    # 2.4 s of each child's start)
    hidden_real = real_paths(boundary.hidden)
    holding = _ancestors(hidden_real)
    for granted in (*boundary.writable, *boundary.readable):
        real = os.path.realpath(granted)
        if real in hidden_real or real in holding:
            hidden = next(h for h in boundary.hidden if _at_or_beneath(os.path.realpath(h), real))
            raise ValueError(f"the boundary grants {granted}, which holds the hidden {hidden}")
    version = abi()
    if version < 1:
        return Confinement(False, 0, unavailable_reason())
    libc = _libc()
    fs = _FS_BY_ABI.get(version, (1 << 16) - 1)
    scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if version >= 6 else 0
    # binding handled with no rule granting a port: none may be bound
    attr = _RulesetAttr(fs, NET_BIND_TCP if version >= 4 and not boundary.bind_tcp else 0, scoped)
    size = ctypes.sizeof(_RulesetAttr) if version >= 6 else 16  # older kernels reject the scoped field
    ruleset = libc.syscall(_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), 0)
    if ruleset < 0:
        raise _refused("landlock_create_ruleset")
    try:
        read_paths: Sequence[str | Path] = (
            readable_around(boundary.hidden) if boundary.read_all else boundary.readable
        )
        for path in [*read_paths, *(boundary.readable if boundary.read_all else ())]:
            _add(libc, ruleset, path, READ & fs)
        for path in boundary.listable:
            _add(libc, ruleset, path, READ_DIR & fs)
        for path in DEVICES:
            _add(libc, ruleset, path, (READ | WRITE_FILE | TRUNCATE | IOCTL_DEV) & fs)
        for path in [*SHARED_MEMORY, *boundary.writable]:
            _add(libc, ruleset, path, WRITE & fs)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise _refused("prctl(PR_SET_NO_NEW_PRIVS)")
        _drop_capabilities(libc)
        if libc.syscall(_RESTRICT_SELF, ruleset, 0) != 0:
            raise _refused("landlock_restrict_self")
    finally:
        os.close(ruleset)
    return Confinement(True, version, "", scoped=bool(scoped))
