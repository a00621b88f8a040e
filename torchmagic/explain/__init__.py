"""TM001 explanations of tensor errors, and meta-device dry runs (no IPython needed)."""
