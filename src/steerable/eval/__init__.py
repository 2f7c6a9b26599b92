"""Evaluating annotations against gold spans: readers (gold.py), matching and metrics, reports with
bootstrap intervals and paired comparisons (report.py, runs.py), tables and plots."""
