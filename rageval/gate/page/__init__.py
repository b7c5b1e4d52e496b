"""The one-file HTML report of a gate or a run (``rageval report --html``, ``rageval gate --html``,
and the action's ``html`` output): ``render_html``."""

from rageval.gate.page.render import decode_data, encode_data, render_html

__all__ = ["decode_data", "encode_data", "render_html"]
