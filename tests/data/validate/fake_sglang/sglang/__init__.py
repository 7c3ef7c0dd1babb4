"""A stand-in for the sglang package in gate tests: only ``sglang.launch_server``."""

__version__ = "0.5.9"
