"""Workers on a copy of the project: another folder (``--tx popen//chdir=COPY``) or another
machine (``--tx ssh=HOST//chdir=COPY``), in place of xdist's deprecated ``--rsyncdir``.

Such a worker loads the spec and adapter from its own folder; the plan still comes from the
controller, and every candidate's bytes are checked against the registered hash before a
rollout, so a stale copy is refused, never mislabelled."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from .._project.spec import Spec

ORIGIN_KEY = "capevolve_origin"
# ends the refusal of a candidate whose bytes on a worker's copy differ from the controller's;
# the summary looks for it to advise re-copying before re-running
STALE_COPY_FIX = "copy the project again"


class RemoteWorkers:
    """Registered on the controller of an xdist session: tells each worker where it came from."""

    def __init__(self, config: pytest.Config, spec: Spec) -> None:
        self.config = config
        self.spec = spec

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_setupnodes(self, config: pytest.Config, specs: list[Any]) -> None:
        if any(spec.chdir or not spec.popen for spec in specs):
            join_option_values(config)

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        origin = {"cwd": os.getcwd(), "project": self.spec.project_dir.name, "spec": self.spec.path.name}
        node.workerinput[ORIGIN_KEY] = json.dumps(origin)


def gateway_count(config: pytest.Config) -> int:
    """How many processes run rollouts: the xdist gateways (``-n N`` is N popen ones), else 1."""
    if config.getoption("dist", "no") == "no":
        return 1
    return max(1, sum(_gateways(raw) for raw in config.getoption("tx", None) or []))


def _gateways(raw: str) -> int:
    """How many gateways one ``--tx`` starts (``N*spec``: N)."""
    count, _, _ = raw.rpartition("*")
    return int(count) if count.isdigit() else 1


def check_gateways(config: pytest.Config, spec: Spec) -> None:
    """Before anything is planned, refuse a local gateway whose ``chdir`` holds no copy of the
    project (its workers would crash and be replaced forever); crashed remote workers are
    replaced at most 4 × gateways times (xdist's default for ``-n``)."""
    gateways = 0
    for raw in config.getoption("tx", None) or []:
        gateways += _gateways(raw)
        options = dict(part.partition("=")[::2] for part in raw.rpartition("*")[2].split("//"))
        if "popen" in options and options.get("chdir"):
            folder = Path(options["chdir"])
            if not any((f / spec.path.name).is_file() for f in (folder, folder / spec.project_dir.name)):
                raise pytest.UsageError(
                    f"--tx {raw}: {folder} holds no copy of the project (no {spec.path.name} there "
                    f"or in {spec.project_dir.name}/); copy the project, .capevolve included, and "
                    "point chdir at the copy"
                )
    if gateways and getattr(config.option, "maxworkerrestart", "unset") is None:
        config.option.maxworkerrestart = str(4 * gateways)


def join_option_values(config: pytest.Config) -> None:
    """``--capevolve-run /abs/PROJECT`` → ``--capevolve-run=/abs/PROJECT`` in the arguments
    xdist sends to workers in other folders, which would map a bare path onto an rsync root."""
    args = iter([str(arg) for arg in config.invocation_params.args])
    joined: list[str] = []
    for arg in args:
        takes_value = (
            arg.startswith("--capevolve-")
            and "=" not in arg
            and not isinstance(getattr(config.option, arg[2:].replace("-", "_"), False), bool)
        )
        value = next(args, None) if takes_value else None
        joined.append(arg if value is None else f"{arg}={value}")
    config.invocation_params = replace(config.invocation_params, args=tuple(joined))


def worker_target(workerinput: dict[str, Any], target: str) -> str:
    """Where this worker finds the project: the controller's path in the controller's folder,
    else its own folder (or the project's name under it)."""
    if ORIGIN_KEY not in workerinput:
        return target
    origin = json.loads(workerinput[ORIGIN_KEY])
    here = Path.cwd()
    if here.resolve() == Path(origin["cwd"]).resolve():
        return target
    for folder in (here, here / origin["project"]):
        if (folder / origin["spec"]).is_file():
            return str(folder / origin["spec"])
    raise pytest.UsageError(
        f"worker {workerinput.get('workerid', '?')} runs in {here}, which holds no copy of the "
        f"project (no {origin['spec']} there or in {origin['project']}/): point --tx …//chdir= "
        "at a copy of the project, .capevolve included"
    )
