"""Evaluating annotations: segmentation and event metrics, and reports against ground truth."""
