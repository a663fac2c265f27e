"""Booking a decision: the commit, what it refuses, and what it records (journal, ledger, refuted)."""
