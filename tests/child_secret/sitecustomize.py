"""Test-only, on PYTHONPATH for the sessions a docs page or the newcomer's path starts as child
processes, command by command (``docs_commands.pinned_environment``): their runs take the secret tests/conftest.py pins
for the gains it gates (``TYPICAL_SEED_SECRET``) and empty nonces, as in-process sessions take theirs.
The run's secret names the folders candidates run from, and the bundled noisy_agent keys its draws on
them: without this, every such test drew a fresh run's figures, and a page's gain, which holds in
20 of 20 fresh runs, could still fall short of its α once in a while on CI."""

import hashlib

try:
    from pytest_capevolve._store.sessions import order_secret
except (ImportError, OSError):  # a confined process that cannot read the package: it makes no run
    pass
else:
    order_secret.new_secret = lambda: hashlib.sha256(b"capevolve-test-secret-17").digest()
    order_secret.new_nonce = lambda: b""
