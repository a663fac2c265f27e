"""What the interpreter runs before any of our code: ``.pth`` files and ``sitecustomize``.

Candidate code runs as the session's OS user, so it can write a ``.pth`` into site-packages
that every later Python process runs before pytest. So the harness lock holds these hooks and
the installed ``pytest11`` entry points (:func:`digests`), and within a session each sandbox
child is refused, as an infra error, if they moved since evaluation began. Pure reads."""

from __future__ import annotations

import importlib.machinery
import re
import site
import sys
from pathlib import Path

MARKER_KEY = "<start-up hooks>"  # in every lock: the hooks' digest as a whole
PREFIX = "<start-up hook> "
PLUGINS_MARKER_KEY = "<pytest11 entry points>"  # in every lock: the entry points' digest as a whole
PLUGIN_PREFIX = "<pytest11> "
_IMPORT_LINE = re.compile(r"^\s*import\s+([A-Za-z_][\w.]*)")
_CUSTOMIZE = ("sitecustomize", "usercustomize")
_remembered: dict[str, str] | None = None


def _sha256(data: bytes) -> str:
    import hashlib  # here: a sandbox child imports this module and hashes nothing (OpenSSL's load)

    return hashlib.sha256(data).hexdigest()


def site_folders() -> list[Path]:
    """The site-packages folders and the user site, as this interpreter names them."""
    folders = list(site.getsitepackages()) if hasattr(site, "getsitepackages") else []
    user = site.getusersitepackages()
    return [Path(p) for p in dict.fromkeys([*folders, user]) if Path(p).is_dir()]


def file_sha(path: Path) -> str:
    """``path``'s sha256, or what kept it from being read (a digest that never matches one)."""
    try:
        return _sha256(path.read_bytes())
    except OSError as exc:
        return f"unreadable ({type(exc).__name__})"


def _module_file(name: str, folders: list[str]) -> Path | None:
    spec = importlib.machinery.PathFinder.find_spec(name.partition(".")[0], folders)
    origin = getattr(spec, "origin", None) if spec is not None else None
    return Path(origin) if origin and Path(origin).is_file() else None


def digests() -> dict[str, str]:
    """Every start-up hook's sha256, keyed ``<start-up hook> PATH``, plus :data:`MARKER_KEY`."""
    found: dict[str, str] = {}
    search = [p for p in sys.path if p and Path(p).is_dir()]
    for folder in site_folders():
        for pth in sorted(folder.glob("*.pth")):
            found[f"{PREFIX}{pth}"] = file_sha(pth)
            try:
                lines = pth.read_text(encoding="utf-8", errors="replace").splitlines()
            except OSError:
                continue
            for line in lines:
                match = _IMPORT_LINE.match(line)
                module = _module_file(match.group(1), [str(folder), *search]) if match else None
                if module is not None:
                    found[f"{PREFIX}{module}"] = file_sha(module)
    for name in _CUSTOMIZE:
        module = _module_file(name, search)
        if module is not None:
            found[f"{PREFIX}{module}"] = file_sha(module)
    found[MARKER_KEY] = _sha256(repr(sorted(found.items())).encode())
    plugins = pytest_plugins()
    found.update(plugins)
    found[PLUGINS_MARKER_KEY] = _sha256(repr(sorted(plugins.items())).encode())
    return found


def pytest_plugins() -> dict[str, str]:
    """Each installed ``pytest11`` entry point — its distribution's name, version and
    ``entry_points.txt`` — keyed ``<pytest11> NAME = VALUE``."""
    import importlib.metadata  # here: a sandbox child imports this module, and never calls this

    seen: dict[str, set[str]] = {}  # a distribution found twice on sys.path (an egg-info beside
    # an editable checkout) counts once, in any order
    for dist in importlib.metadata.distributions():
        try:
            listing = dist.read_text("entry_points.txt") or ""
            # dist.entry_points parses this same text: one that never says pytest11 has no such
            # group, and is not parsed (most of an environment's distributions)
            parsed = dist.entry_points if "pytest11" in listing else ()
            points = [ep for ep in parsed if ep.group == "pytest11"]
        except Exception:  # a garbled distribution: pytest could load no plugin from it either
            points = []
        if not points:
            continue
        metadata = dist.metadata  # parsed once (dist.version parses it again)
        # what names the plugin, not the module's bytes, which depend on each process's
        # sys.path; editing an installed module is out of a file-level guard's reach
        named = f"{metadata['Name']} {metadata['Version']}\n{listing}"
        for point in points:
            seen.setdefault(f"{PLUGIN_PREFIX}{point.name} = {point.value}", set()).add(named)
    return {key: _sha256("\0".join(sorted(texts)).encode()) for key, texts in seen.items()}


def remember(*, fresh: bool = False) -> None:
    """Take this process's hooks as they are now, before any candidate code ran here: once, or
    again when a session begins (``fresh``; pytester runs several sessions in one process)."""
    global _remembered
    if _remembered is None or fresh:
        _remembered = digests()


def moved_since_start() -> list[str]:
    """The hooks added, removed or changed since :func:`remember` (empty if never taken)."""
    if _remembered is None:
        return []
    now = digests()
    keys = (_remembered.keys() | now.keys()) - {MARKER_KEY}
    return sorted(k[len(PREFIX) :] for k in keys if _remembered.get(k) != now.get(k))


def child_flags() -> list[str]:
    """``-s`` (no user site, so none of its ``.pth`` files run) for a sandbox child, unless this
    process imports from the user site: then the child needs it as much as we do."""
    user = site.getusersitepackages()
    return [] if any(p.startswith(user) for p in sys.path if p) else ["-s"]


def refusal(what: list[str]) -> str:
    shown = ", ".join(what[:3]) + (f" and {len(what) - 3} more" if len(what) > 3 else "")
    return (
        f"the interpreter's start-up hooks changed during this session ({shown}): a .pth file or "
        "sitecustomize runs in every new process, so no sandbox child is started with it"
    )
