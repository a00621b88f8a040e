"""Renderers of a Report: HTML, widget, terminal (rich), and the sidebar comm."""
