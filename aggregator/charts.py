"""Server-rendered SVG bar charts of estimates with confidence-interval error bars."""

from markupsafe import Markup, escape

WIDTH, LABEL, ROW, TOP = 640, 170, 34, 26


def estimate_chart(question: dict) -> Markup:
    """One horizontal bar per option: p_hat_clipped, with a whisker from ci_low to ci_high.
    Scale 0 to 100 %, gridlines every 25 %."""
    plot = WIDTH - LABEL - 20
    height = TOP + ROW * len(question["options"]) + 8

    def x(p: float) -> float:
        return LABEL + plot * p

    parts = [f'<svg class="chart" role="img" viewBox="0 0 {WIDTH} {height}" '
             f'aria-label="Estimated proportions for {escape(question["id"])}">']
    for tick in (0, 0.25, 0.5, 0.75, 1):
        parts.append(f'<line class="grid" x1="{x(tick):.1f}" x2="{x(tick):.1f}" y1="{TOP - 6}" '
                     f'y2="{height - 4}"/><text class="tick" x="{x(tick):.1f}" y="{TOP - 10}" '
                     f'text-anchor="middle">{tick:.0%}</text>')
    for row, option in enumerate(question["options"]):
        y = TOP + ROW * row
        parts.append(f'<text class="label" x="{LABEL - 8}" y="{y + ROW / 2 + 4:.1f}" '
                     f'text-anchor="end">{escape(option["option"])}</text>')
        if option["p_hat_clipped"] is None:
            continue
        parts.append(f'<rect class="bar" x="{LABEL}" y="{y + 6}" height="{ROW - 12}" '
                     f'width="{plot * option["p_hat_clipped"]:.1f}"><title>'
                     f'{escape(option["option"])}: {option["p_hat_clipped"]:.1%}</title></rect>')
        if option["ci_low"] is not None:
            low, high, mid = x(option["ci_low"]), x(option["ci_high"]), y + ROW / 2
            parts.append(f'<path class="whisker" d="M{low:.1f},{mid:.1f}H{high:.1f}'
                         f'M{low:.1f},{mid - 7:.1f}V{mid + 7:.1f}'
                         f'M{high:.1f},{mid - 7:.1f}V{mid + 7:.1f}"/>')
    parts.append("</svg>")
    # Every text interpolated above went through escape(); numbers are formatted floats.
    return Markup("".join(parts))  # noqa: S704  # nosec B704
