"""Plot what bench/scale.py --json wrote: batch intake rate and bytes written per response
against the responses stored, one line per run, into one PNG file.

    pip install matplotlib
    python bench/plot.py --out scale.png pg-before.json pg-after.json sqlite-after.json

Each file is labelled by its name (without .json). The rate of each tenth is plotted at the
count stored at its end.
"""

import argparse
import json
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="scale.py --json files")
    parser.add_argument("--out", type=Path, default=Path("scale.png"))
    args = parser.parse_args()

    import matplotlib

    matplotlib.use("Agg")  # a file, no display
    import matplotlib.pyplot as plt

    figure, (rate, written) = plt.subplots(2, 1, figsize=(8, 8), sharex=True)
    for run in args.runs:
        data = json.loads(run.read_text())
        stored = [tenth["stored"] for tenth in data["tenths"]]
        label = f"{run.stem} ({data['database']})"
        rate.plot(stored, [tenth["rate"] for tenth in data["tenths"]], marker="o", label=label)
        written.plot(stored, [tenth["bytes_per_response"] for tenth in data["tenths"]],
                     marker="o", label=label)
    rate.set_ylabel("batch intake, responses/s")
    rate.set_ylim(bottom=0)
    rate.legend()
    rate.grid(True, alpha=0.3)
    written.set_ylabel("bytes written per response\n(PostgreSQL: WAL; SQLite: workers' writes)")
    written.set_xlabel("responses stored")
    written.set_ylim(bottom=0)
    written.grid(True, alpha=0.3)
    figure.suptitle("bench/scale.py: intake against the table's size")
    figure.tight_layout()
    figure.savefig(args.out, dpi=100)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
