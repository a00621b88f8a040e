"""namespace -> metadata records -> live checks.

Everything here reads metadata only (shape, dtype, device, strides, autograd links) through
PyTorch's C-level descriptors, never values, never user-defined attributes, and keeps no
strong reference to a user object once a scan returns.
"""

from .scan import LiveScan, scan_namespace

__all__ = ["LiveScan", "scan_namespace"]
