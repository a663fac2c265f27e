"""pytest session roles as plugins: planning, screens, persistence and tally, judging, finalize, reporting."""
