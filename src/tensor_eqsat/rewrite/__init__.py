"""Patterns, rewrites (single and multi-pattern), conditions and cycle filtering."""
