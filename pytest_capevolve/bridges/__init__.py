"""Bridges: adapters that bring a harness people already evaluate with under capevolve's
gate, each an optional extra whose third-party package only its own module imports.

- :mod:`.inspect_task` — an inspect_ai ``Task`` (``pip install 'pytest-capevolve[inspect]'``).

A bridge is an ordinary adapter (``tasks``/``run_target``/``score``); it sits on the top floor
beside the plugin, importing only the adapter contract below it.
"""
