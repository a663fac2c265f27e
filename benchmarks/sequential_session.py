"""What a sequential gate session saves with the default null controls (issue 40).

``benchmarks/sequential.py`` measures one candidate against the best; a session also pays the null
controls (2 by default), and the best stops only with them. Here: ``capevolve init``'s project (a real
gain: ``convert-units``), cut to a val of N tasks × T trials, gated by
``pytest --capevolve-run P --capevolve-candidate P/candidates/convert-units --capevolve-gate
--capevolve-sequential`` in a child process, each repeat under its own fixed order secret (so a repeat is
the same run on any checkout). Prints each session's ``sequential`` lines and the saving.

    python benchmarks/sequential_session.py [--shape 21x2 --shape 100x3] [--repeats R] [-n 2]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = """
import hashlib, sys
import pytest
from pytest_capevolve._store.sessions import order_secret
secret = hashlib.sha256(sys.argv[1].encode()).digest()
order_secret.new_secret = lambda: secret
order_secret.new_nonce = lambda: b""
sys.exit(pytest.main(sys.argv[2:]))
"""
SAVED = re.compile(r"the stop saved (\d+) rollouts \(of (\d+) planned")


INIT = "import sys; from pytest_capevolve._cli.main import main; sys.exit(main(['init', sys.argv[1]]))"


def project(path: Path, tasks: int, trials: int) -> Path:
    """A fresh ``capevolve init`` project per session: a project remembers decided bytes across runs."""
    subprocess.run([sys.executable, "-c", INIT, str(path)], check=True, capture_output=True)
    adapter = path / "adapter.py"
    adapter.write_text(adapter.read_text().replace("N_TASKS = 60", f"N_TASKS = {2 * tasks}"))  # val: half
    spec = path / "capevolve.yaml"
    spec.write_text(re.sub(r"num_trials: \d+", f"num_trials: {trials}", spec.read_text()))
    return path


def session(path: Path, repeat: int, extra: list[str]) -> tuple[int, int, list[str]]:
    args = [f"--capevolve-run={path}", f"--capevolve-candidate={path / 'candidates' / 'convert-units'}"]
    args += ["--capevolve-gate", "--capevolve-sequential", "-p", "no:cacheprovider"]
    out = subprocess.run(
        [sys.executable, "-c", CHILD, f"bench-{repeat}", *args, *extra],
        cwd=path,
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    found = SAVED.search(out)
    if found is None:
        raise SystemExit(out[-3000:])
    lines = [line for line in out.splitlines() if line.startswith("sequential ")]
    return int(found[1]), int(found[2]), lines


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shape", action="append", help="VALxTRIALS (default: 21x2 and 100x3)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("-n", dest="workers", default=None)
    args = parser.parse_args()
    extra = ["-n", args.workers] if args.workers else []
    import pytest_capevolve

    print(f"package: {Path(pytest_capevolve.__file__).parent}")
    with tempfile.TemporaryDirectory() as tmp:
        for shape in args.shape or ["21x2", "100x3"]:
            tasks, trials = (int(x) for x in shape.split("x"))
            saved, planned = [], 0
            for repeat in range(args.repeats):
                path = project(Path(tmp) / f"p{shape}-{repeat}", tasks, trials)
                n, planned, lines = session(path, repeat, extra)
                saved.append(n)
                print(f"{shape} repeat {repeat}: saved {n} of {planned}")
                print("".join(f"    {line}\n" for line in lines), end="")
            share = sum(saved) / (len(saved) * planned)
            print(f"{shape}: mean saved {sum(saved) / len(saved):.1f} of {planned} ({share:.0%})")


if __name__ == "__main__":
    main()
