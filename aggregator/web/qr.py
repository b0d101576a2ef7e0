"""QR codes of respondent links, for printed flyers and slides (segno, ISO/IEC 18004)."""

import io

import segno

# The formats served, and their media types.
FORMATS = {"svg": "image/svg+xml", "png": "image/png"}
# Error correction level M (about 15 % of the code may be damaged) and the 4-module quiet
# zone the standard asks for; PNG modules of 10 px, large enough to print or project.
ERROR_CORRECTION = "m"
PNG_SCALE = 10


def qr_code(link: str, kind: str) -> bytes:
    """The QR code of `link` as an SVG document or a PNG image (`kind`, a key of FORMATS)."""
    code = segno.make(link, error=ERROR_CORRECTION, micro=False)
    out = io.BytesIO()
    if kind == "svg":
        code.save(out, kind="svg", scale=4, border=4, title="Survey link",
                  xmldecl=False, svgclass="qr")
    else:
        code.save(out, kind="png", scale=PNG_SCALE, border=4)
    return out.getvalue()
