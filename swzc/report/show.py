"""What `swzc show` prints once it has drawn: the kernel, the orders drawn, why those, and what was written.

One module per command's outputs (see swzc.report.rewrite); the picture itself and its HTML page are
swzc.report.picture's."""

from __future__ import annotations

from collections.abc import Sequence

from swzc.report.picture import KernelPicture


def render_text(path: str, hw: str, drawn: KernelPicture, output: str, html_out: str | None, notes: Sequence[str]) -> str:
    """The summary: file, hardware model, kernel and the orders drawn, then the notes of the build and analysis."""
    orders = ", ".join(p.title for p in drawn.picture.panels)
    head = (f"{path} (hw {hw}): kernel {drawn.kernel}: {orders}\n  {drawn.note}\n  wrote {output}"
            + (f" and {html_out}" if html_out else ""))
    return "\n".join([head, *(f"  note: {note}" for note in notes)])
