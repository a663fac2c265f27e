"""What a run has spent and has left: the spend report, optimizer spend, val budget, merge reminder."""
