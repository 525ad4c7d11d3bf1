"""Congestion controls this kernel lacks, as BPF struct_ops, and their checks."""
