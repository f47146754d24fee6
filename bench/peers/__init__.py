"""Helpers of bench/decode_h200.py: the benchmark model, the PyTorch peers, the
omptensor cases and the report. Each module is small and importable alone."""
