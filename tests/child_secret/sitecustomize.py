"""Test-only, on ``PYTHONPATH`` for every process the suite starts (tests/conftest.py puts it there): a run
a child session makes takes the secret its test pinned in :data:`VARIABLE` (hex; the suite's fixtures
set it with the one their in-process sessions take) and empty nonces, as an in-process run does.
Unset, the secret is drawn as a user's is.

The run's secret names the folders candidates run from, and the bundled noisy_agent keys its draws on
them: without this, each session a test started in a child (a subprocess, ``capevolve hill-climb``'s
loop, a docs page, the red team's ``capevolve agent``) drew a fresh run's figures, and a claim that
holds for most runs could fall short once in a while on CI.

Lazy: the module is patched when a process first imports it, so one that imports nothing of ours (a
confined shell's tools, a sandbox child) reads nothing of the package here."""

import os
import sys

VARIABLE = "CAPEVOLVE_TEST_ORDER_SECRET"
MODULE = "pytest_capevolve._store.sessions.order_secret"


class _PinnedSecret:
    """A finder for :data:`MODULE` alone: the real module, with its draws read from the environment."""

    def find_spec(self, name, path=None, target=None):  # noqa: ANN001, ANN201
        if name != MODULE:
            return None
        sys.meta_path.remove(self)
        import importlib.util

        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module):  # noqa: ANN001, ANN202
            run(module)
            secret, nonce = module.new_secret, module.new_nonce

            def new_secret() -> bytes:
                pinned = os.environ.get(VARIABLE)
                return bytes.fromhex(pinned) if pinned else secret()

            module.new_secret = new_secret
            module.new_nonce = lambda: b"" if os.environ.get(VARIABLE) else nonce()

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _PinnedSecret())
