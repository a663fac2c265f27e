"""Workers on another machine, over a real sshd: the recipe of docs/how-to/remote-workers.md.

The "other machine" is this one reached through OpenSSH: ``ssh`` runs ``sshd -i`` as its
ProxyCommand (inetd mode on a pipe: a real server and a real protocol, no port to race for, no
daemon to wait for). The remote login gets a fresh environment — no PYTHONDONTWRITEBYTECODE, as
on a real host — which is what broke every rollout once: the worker's copy of a snapshot gained
``__pycache__/*.pyc`` when candidate code was imported, and the snapshot check read it as an edit.
"""

from __future__ import annotations

import getpass
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"

needs_sshd = pytest.mark.skipif(
    not (Path(SSHD).is_file() and shutil.which("ssh")) and not os.environ.get("CI"),
    reason="needs OpenSSH (Debian's openssh-server and openssh-client; .ci/run installs them)",
)


def _ssh_config(folder: Path) -> Path:
    """An ssh_config whose host ``capevolve-worker`` is this machine through ``sshd -i``."""
    folder.mkdir()
    for key in ("host", "user"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(folder / key)], check=True)
    (folder / "authorized_keys").write_text((folder / "user.pub").read_text())
    (folder / "sshd_config").write_text(
        f"HostKey {folder / 'host'}\nAuthorizedKeysFile {folder / 'authorized_keys'}\n"
        "PasswordAuthentication no\nStrictModes no\nUsePAM no\nPermitRootLogin prohibit-password\n"
        "Subsystem sftp internal-sftp\n"  # scp's protocol, as a host's stock sshd_config has it
    )
    Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege-separation folder, when run as root
    config = folder / "ssh_config"
    config.write_text(
        "Host capevolve-worker\n"
        f"  User {getpass.getuser()}\n  IdentityFile {folder / 'user'}\n  IdentitiesOnly yes\n"
        "  BatchMode yes\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n"
        f"  ProxyCommand {SSHD} -i -f {folder / 'sshd_config'}\n"
    )
    return config


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@needs_sshd
def test_ssh_workers_give_the_records_of_a_plain_run_and_write_nothing_into_their_copy(
    pytester: pytest.Pytester, example, projects, capevolve
) -> None:
    local = example("noisy_agent", dest="local/noisy_agent")
    projects.edit_spec(local, "num_trials: 5", "num_trials: 1")
    assert capevolve(local, "improved").ret in (0, 1)

    project = example("noisy_agent", dest="origin/noisy_agent")
    projects.edit_spec(project, "num_trials: 5", "num_trials: 1")
    # its run made here, with the suite's fixed secret, so the session in a child below (which would draw
    # a secret of its own) runs each candidate from a folder of the same name as the local run's
    assert capevolve(project, "improved", extra=["--collect-only"]).ret == 0
    copy = pytester.path / "worker" / "noisy_agent"
    copy.parent.mkdir()
    config = _ssh_config(pytester.path / "ssh")
    # the page's copy, twice: made again, it replaces the last one (rsync, which the page named, is
    # not on every machine; `cp -r` or `scp -r` into a copy that exists lands inside it)
    for _ in range(2):
        ssh = ["-F", str(config)]
        assert subprocess.run(["ssh", *ssh, "capevolve-worker", "rm", "-rf", str(copy)]).returncode == 0
        assert subprocess.run(["scp", *ssh, "-rp", str(project), f"capevolve-worker:{copy}"]).returncode == 0
    before = _files(copy)
    assert before == _files(project)
    gateway = f"ssh=capevolve-worker//ssh_config={config}//python={sys.executable}//chdir={copy}"

    result = capevolve(project, "improved", extra=["--tx", gateway, "-d"], subprocess=True)

    out = result.stdout.str()
    assert result.ret in (0, 1), out + result.stderr.str()
    assert "INFRA" not in out and "infra" not in out.splitlines()[-1], out

    # the same records; only the confinement label may differ (the remote login has its own
    # environment, so its sandbox children confine themselves whatever this test's sessions do)
    def unlabelled(records: dict) -> dict:
        return {k: {f: v for f, v in r.items() if f != "confinement"} for k, r in records.items()}

    assert unlabelled(projects.rollout_records(project)) == unlabelled(projects.rollout_records(local))
    # the worker's copy is as the user made it: no bytecode, no run dir, nothing of ours
    # (xdist itself puts its pytest and _pytest beside it, as for any ssh gateway)
    after = {k: v for k, v in _files(copy).items() if not k.startswith(("pytest/", "_pytest/", "py.py"))}
    assert after == before
