"""Experiment drivers called by the Snakemake rules (``python -m commsched.experiments.<x>``).

Each driver reads op graphs or traces, runs algorithms and simulators, validates every
schedule, and writes tidy result tables and metrics tables (:mod:`commsched.results`).
Algorithms never import this layer.
"""
