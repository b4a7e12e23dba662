"""Readers and writers: atomic file output, the thesis CSV formats, Chrome traces,
Coflow-Benchmark traces, Chakra execution traces."""
