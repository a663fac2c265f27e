"""End-to-end tests: each runs whole pytest sessions (pytester, in process or in a child) or a
child process. A package so a file here may share its name with the pure half in tests/unit/."""
