"""Server-rendered SVG charts: estimates with confidence-interval whiskers, and the responses
released per day. Each SVG stands alone (its colours and sizes are presentation attributes, so
a downloaded file looks as on the page; the page's CSS overrides them, e.g. in forced colours).

Sizes are in viewBox units. The page draws a chart at most 30rem wide and at least 320 px on a
360 px phone, so with WIDTH = 360 a unit is 0.89 to 1.33 CSS px and FONT = 13 keeps every text
at least 11 CSS px tall. Option names sit on their own lines above their bars (the narrow-screen
layout at every width), wrapped at LINE_CHARS with the full name in a <title>."""

import textwrap

from markupsafe import Markup, escape

WIDTH, PAD, FONT, LINE, BAR, GAP = 360, 8, 13, 16, 14, 12
LINE_CHARS = 36  # about 260 units of 13-unit text, leaving room for the value on the first line
TEXT, MUTED, GRID, BAR_FILL = "#1b1f24", "#4a5360", "#d5dae1", "#2f6fb3"
TICKS = (0, 0.25, 0.5, 0.75, 1)


def _svg(height: float, label: str, body: list[str]) -> Markup:
    head = (f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" '
            f'viewBox="0 0 {WIDTH} {height:.0f}" font-family="system-ui, sans-serif" '
            f'font-size="{FONT}" aria-label="{escape(label)}">')
    # Every text interpolated by the callers went through escape(); numbers are formatted.
    return Markup(head + "".join(body) + "</svg>")  # noqa: S704  # nosec B704


def _label(x: float, y: float, lines: list[str], full: str) -> str:
    """A text of one or more lines from baseline y, the full text in its <title>."""
    spans = "".join(f'<tspan x="{x}" dy="{0 if i == 0 else LINE}">{escape(line)}</tspan>'
                    for i, line in enumerate(lines))
    return (f'<text class="label" x="{x}" y="{y:.1f}" fill="{TEXT}"><title>{escape(full)}'
            f"</title>{spans}</text>")


def estimate_chart(question: dict) -> Markup:
    """One bar per option: p_mle (the maximum-likelihood estimate, in [0, 1] and inside its
    interval), with a whisker from ci_low to ci_high, the value at the right of the option's
    name. Scale 0 to 100 %, gridlines every 25 %; for a question with a `scale` (a numeric
    question's mean) its min to max instead, in its unit."""
    plot = WIDTH - 2 * PAD
    scale = question.get("scale")
    low, high = (scale["min"], scale["max"]) if scale else (0.0, 1.0)
    unit = f' {scale["unit"]}' if scale and scale["unit"] else ""

    def x(value: float) -> float:
        """Where a value sits: a fraction of the plot between low and high."""
        return PAD + plot * (value - low) / (high - low)

    def at(tick: float) -> float:
        return PAD + plot * tick

    def shown(value: float) -> str:
        return f"{value:.4g}{unit}" if scale else f"{value:.1%}".replace("%", " %")

    rows, y = [], LINE + 8
    for option in question["options"]:
        lines = textwrap.wrap(option["option"], LINE_CHARS) or [""]
        rows.append((option, lines, y))
        y += LINE * len(lines) + 4 + BAR + GAP
    height = y - GAP / 2
    parts = [f'<text class="tick" x="{at(tick):.1f}" y="{LINE - 2}" fill="{MUTED}" '
             f'text-anchor="{"start" if tick == 0 else "end" if tick == 1 else "middle"}">'
             f"{f'{low + tick * (high - low):g}' if scale else f'{tick:.0%}'}</text>"
             for tick in TICKS]
    for option, lines, top in rows:
        parts.append(_label(PAD, top + FONT, lines, option["option"]))
        if option["p_mle"] is None:
            continue
        share = escape(shown(option["p_mle"]))
        bar_y = top + LINE * len(lines) + 4
        # Gridlines beside the bar only, never through the option's name.
        parts.extend(f'<line class="grid" x1="{at(tick):.1f}" x2="{at(tick):.1f}" y1="{bar_y - 3}" '
                     f'y2="{bar_y + BAR + 3}" stroke="{GRID}"/>' for tick in TICKS)
        parts.append(f'<text class="value" x="{WIDTH - PAD}" y="{top + FONT}" fill="{TEXT}" '
                     f'text-anchor="end">{share}</text>'
                     f'<rect class="bar" x="{PAD}" y="{bar_y}" height="{BAR}" '
                     f'width="{x(option["p_mle"]) - PAD:.1f}" fill="{BAR_FILL}"><title>'
                     f'{escape(option["option"])}: {share}</title></rect>')
        left, right, mid = x(option["ci_low"]), x(option["ci_high"]), bar_y + BAR / 2
        parts.append(f'<path class="whisker" stroke="{TEXT}" stroke-width="2" fill="none" '
                     f'd="M{left:.1f},{mid:.1f}H{right:.1f}M{left:.1f},{mid - 6:.1f}'
                     f'V{mid + 6:.1f}M{right:.1f},{mid - 6:.1f}V{mid + 6:.1f}"/>')
    what = "Estimated mean" if scale else "Estimated proportions"
    return _svg(height, f"{what}: {question['text']}", parts)


def distribution_chart(question: dict) -> Markup:
    """A number question's histogram (square_wave's `distribution`): one bar per bin, its
    estimated share of respondents with a whisker over its exact interval (estimate_chart's
    bars, the bins' ends in the answer's unit as their names)."""
    scale = question["scale"]
    unit = f' {scale["unit"]}' if scale["unit"] else ""
    bins = [{"option": f"{b['low']:.4g} to {b['high']:.4g}{unit}", "p_mle": b["share"],
             "ci_low": b["ci_low"], "ci_high": b["ci_high"]}
            for b in question["distribution"]["bins"]]
    return estimate_chart({"text": f"how the answers spread: {question['text']}",
                           "options": bins})


def timeline_chart(days: list[tuple[str, int]]) -> Markup:
    """Responses released per day: one bar per day with releases, in day order, the first and
    last days below and the largest day's count above."""
    top, plot_height = LINE + 6, 60
    bottom = top + plot_height
    most = max(size for _, size in days)
    step = (WIDTH - 2 * PAD) / len(days)
    parts = [f'<text class="tick" x="{PAD}" y="{LINE - 2}" fill="{MUTED}">most in a day: '
             f"{most}</text>",
             f'<line class="grid" x1="{PAD}" x2="{WIDTH - PAD}" y1="{bottom}" y2="{bottom}" '
             f'stroke="{GRID}"/>']
    for index, (day, size) in enumerate(days):
        height = max(1.0, plot_height * size / most)
        parts.append(f'<rect class="bar" x="{PAD + index * step + step * 0.1:.1f}" '
                     f'y="{bottom - height:.1f}" width="{step * 0.8:.1f}" height="{height:.1f}" '
                     f'fill="{BAR_FILL}"><title>{escape(day)}: {size}</title></rect>')
    parts.append(f'<text class="tick" x="{PAD}" y="{bottom + LINE}" fill="{MUTED}">'
                 f"{escape(days[0][0])}</text>")
    if len(days) > 1:
        parts.append(f'<text class="tick" x="{WIDTH - PAD}" y="{bottom + LINE}" fill="{MUTED}" '
                     f'text-anchor="end">{escape(days[-1][0])}</text>')
    total = sum(size for _, size in days)
    return _svg(bottom + LINE + 6, f"Responses released per day: {total} over {len(days)} "
                f"{'day' if len(days) == 1 else 'days'}, from {days[0][0]} to {days[-1][0]}",
                parts)
