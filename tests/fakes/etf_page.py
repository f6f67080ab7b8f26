"""The fake Farside BTC ETF flow page (``fakes.context_servers`` serves it), following the real page's
structure: a ``table.etf`` with a row of issuers, a row of tickers ending in "Total", a fee row, one
row per day with ``<span class="tabletext">`` cells, outflows in parentheses, "-" where a fund has
no figure, and the summary rows after the days. Its figures are TEST FIXTURES, not market data.
"""

from __future__ import annotations

from typing import Final

#: the fake Farside page's latest reported day and its figures (US$ millions)
ETF_LATEST_DAY: Final = "2025-02-28"
ETF_LATEST_TOTAL: Final = 94.3
ETF_SUM_5D: Final = -371.6 + -937.9 + -754.6 + -275.0 + 94.3

_FUNDS: Final = (
    "IBIT",
    "FBTC",
    "BITB",
    "ARKB",
    "BTCO",
    "EZBC",
    "BRRR",
    "HODL",
    "BTCW",
    "GBTC",
    "BTC",
)
_ISSUERS: Final = (
    "Blackrock", "Fidelity", "Bitwise", "Ark", "Invesco", "Franklin", "Valkyrie", "VanEck",
    "WTree", "Grayscale", "Grayscale",
)  # fmt: skip
# (day, per fund in _FUNDS order, total): "-" no figure, "(x)" an outflow
_ETF_ROWS: Final = (
    (
        "21 Feb 2025",
        ("(10.0)", "(5.0)", "-", "(3.1)", "0.0", "0.0", "0.0", "(1.0)", "0.0", "(20.0)", "(1.0)"),
        "(40.1)",
    ),
    (
        "24 Feb 2025",
        ("(158.6)", "(247.0)", "-", "-", "0.0", "0.0", "0.0", "0.0", "0.0", "(46.0)", "80.0"),
        "(371.6)",
    ),
    (
        "25 Feb 2025",
        (
            "(164.4)",
            "(344.7)",
            "(88.4)",
            "(60.6)",
            "(2.1)",
            "0.0",
            "0.0",
            "(31.2)",
            "0.0",
            "(142.7)",
            "(103.8)",
        ),
        "(937.9)",
    ),
    (
        "26 Feb 2025",
        (
            "(418.1)",
            "(145.7)",
            "(1.0)",
            "(43.9)",
            "0.0",
            "0.0",
            "0.0",
            "(28.4)",
            "0.0",
            "(60.3)",
            "(57.2)",
        ),
        "(754.6)",
    ),
    (
        "27 Feb 2025",
        (
            "(82.5)",
            "(108.8)",
            "0.0",
            "(62.1)",
            "0.0",
            "0.0",
            "0.0",
            "(3.1)",
            "0.0",
            "(18.5)",
            "0.0",
        ),
        "(275.0)",
    ),
    (
        "28 Feb 2025",
        ("(1.0)", "5.0", "0.0", "94.3", "0.0", "0.0", "0.0", "0.0", "0.0", "(4.0)", "0.0"),
        "94.3",
    ),
    ("3 Mar 2025", ("-",) * 11, "-"),  # listed before its figures arrive
)


def farside_page() -> str:
    def cells(tag: str, texts: tuple[str, ...]) -> str:
        return "".join(f'<{tag}><span class="tabletext">{t}</span></{tag}>' for t in texts)

    head = [
        "<tr>" + cells("th", ("", *_ISSUERS, "")) + "</tr>",
        "<tr>" + cells("th", ("", *_FUNDS, "Total")) + "</tr>",
        "<tr>" + cells("th", ("Fee", *("0.25%",) * 11, "")) + "</tr>",
    ]
    body = ["<tr>" + cells("td", (day, *funds, total)) + "</tr>" for day, funds, total in _ETF_ROWS]
    for label in ("Total", "Average", "Maximum", "Minimum"):
        body.append("<tr>" + cells("td", (label, *("1.0",) * 11, "11.0")) + "</tr>")
    return (
        "<!DOCTYPE html><html><head><title>Bitcoin ETF Flow - All Data - Farside Investors</title>"
        '</head><body><div class="entry-content"><p>All data in US$m</p><table class="etf">'
        f"<thead>{''.join(head)}</thead><tbody>{''.join(body)}</tbody></table>"
        "<p>Source: Farside Investors</p></div></body></html>"
    )
