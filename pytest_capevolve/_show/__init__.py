"""What people read: the session's tables, the honest measure table and report.md."""
