"""`swzc show`: draw a kernel's block order, identity beside the swizzle the L2 model chooses (or --swizzle).

Click only: the picture and its page are swzc.report.picture's, the summary printed swzc.report.show's."""

from __future__ import annotations

import sys

import click

from swzc.core import clean

from swzc.core import outputs

from swzc.report import picture
from swzc.report import show as show_report
from swzc.commands.cli import (build_options, guarded, hw_option, max_bytes_option, results_cache, set_option, verbosity,
                              verbosity_options)
from swzc.core.outputs import Output
from swzc.pipeline.driver import analyze_file, load_hw, parse_bindings, parse_launch_facts, parse_swizzle
from swzc.pipeline.reading import build_context, input_limit

EPILOG = """\b
Examples:
  swzc show gemm.cu -o order.png                  identity beside the L2 model's choice, on h200
  swzc show gemm.cu --hw mi300x -o order.svg --html order.html
  swzc show gemm.cu --kernel gemm --swizzle hilbert:8 --runner-up -o order.png

\b
Exit codes:
  0  drawn
  2  bad input: unreadable file, unknown --kernel or --hw, bad --swizzle or --set, a kernel whose order cannot change
     or that the model cannot rank without --swizzle, an output that is not .png/.svg or that swzc must not write,
     matplotlib missing (it comes with `pip install 'swzc[show]'`); nothing written
  3  an internal error; nothing written
  130  interrupted (SIGINT or SIGTERM); nothing written"""


@click.command(name="show", epilog=EPILOG)
@click.argument("file", type=click.Path(dir_okay=True))
@click.option("-o", "--output", required=True, metavar="OUT", help="Write the picture here: OUT.png or OUT.svg.")
@click.option("--html", "html_out", metavar="OUT.html", help="Also write an HTML page: the picture beside the model's predictions.")
@click.option("--kernel", metavar="NAME", help="The kernel to draw (default: the first kernel the L2 model ranks).")
@click.option("--swizzle", metavar="SPEC", help="The order to draw beside identity (default: the L2 model's choice, "
              "or its best candidate where it keeps identity).")
@click.option("--runner-up", is_flag=True, help="Draw the model's next best candidate too, in a third column.")
@hw_option
@set_option
@build_options
@max_bytes_option
@verbosity_options
@guarded
def command(file: str, output: str, html_out: str | None, kernel: str | None, swizzle: str | None, runner_up: bool,
            hw_name: str, bindings: tuple[str, ...], max_bytes: int, include_dirs: tuple[str, ...], defines: tuple[str, ...],
            build_path: str | None, grids: tuple[str, ...], blocks: tuple[str, ...]) -> None:
    """Draw FILE's block order: each tile coloured by when it runs (its wave) and where (SM group or XCD).

    Identity and the chosen swizzle stand side by side, each titled with the L2 hit rate the model predicts.
    Nothing is rewritten and no GPU is needed.
    """
    fmt = picture.image_format(output)
    written = [Output("-o", output)] + ([Output("--html", html_out)] if html_out else [])
    outputs.check(file, written)
    hw = load_hw(hw_name)
    spec = parse_swizzle(swizzle)
    bound = parse_bindings(list(bindings))
    context, context_notes = build_context(file, include_dirs, defines, build_path, memo=results_cache())
    with input_limit(max_bytes):
        ctx, analysis = analyze_file(file, bound, context, parse_launch_facts(grids, blocks))
    drawn = picture.kernel_picture(ctx, analysis, hw, bound, kernel, spec, runner_up)  # type: ignore[arg-type]
    image = picture.render(drawn.picture, fmt)
    writes = [(written[0], image)]
    if html_out:
        predictions = drawn.ranking.predictions if drawn.ranking is not None else ()
        page = picture.html_page(image, fmt, drawn.picture.title, predictions, [p.name for p in drawn.picture.panels],
                                 floor=drawn.floor)
        writes.append((written[1], page.encode("utf-8")))
    outputs.write_together(file, writes)
    quiet, _ = verbosity()
    if not quiet:
        clean.echo(show_report.render_text(analysis.path, hw.name, drawn, output, html_out, (*context_notes, *analysis.notes)))
    sys.exit(0)
