"""Readers of a whole run: verify's audit, anchors, a decision's arrays, first outcomes, harness lock."""
