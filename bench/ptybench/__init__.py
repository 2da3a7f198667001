"""The ptyvisor benchmark suite (bench/bench.py runs it; docs/performance.md)."""
