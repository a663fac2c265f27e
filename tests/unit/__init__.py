"""Pure tests: no pytest session, no child process (the mutation run's set). A package so a file
here may share its name with the end-to-end half in tests/e2e/."""
