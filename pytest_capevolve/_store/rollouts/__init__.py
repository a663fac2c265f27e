"""Rollouts: the record and its codec, the files written once and read back checked, the index."""
