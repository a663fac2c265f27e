"""The boundary the kernel keeps: confining candidate code and the optimizer (Landlock).

The floor below everything: it knows paths and system calls, nothing of runs, specs or pytest.
"""
