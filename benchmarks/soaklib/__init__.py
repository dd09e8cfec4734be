"""The parts of `benchmarks/soak.py`: one module, one job (parts, configs, load, faults,
monitor, logs, report, plot)."""
