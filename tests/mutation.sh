#!/usr/bin/env bash
# Mutation testing of the privacy math, the respondent client and the aggregator's store (issue 18).
#
#   bash tests/mutation.sh                    # every module below (about 25 minutes on 2 cores)
#   bash tests/mutation.sh randomizer state   # only these modules (a name from the table)
#   KEEP=1 bash tests/mutation.sh state       # keep the work folder, to run `mutmut show <name>` there
#
# Run by hand, never in CI. mutmut (installed into .venv if missing) mutates one module at a time
# and runs the tests that exercise it. It imports modules by their path, which the package-dir
# mapping in pyproject.toml (shared/ -> ldpsurvey.shared, ...) defeats, so each module is run in a
# temporary copy laid out as ldpsurvey/shared, ldpsurvey/client, ... beside tests/; nothing is
# written inside the checkout. Prints a table per module: mutants, killed, survived, timed out and
# the score, (killed + timed out + documented equivalent) / mutants, where the equivalent mutants
# are the ones named in tests/EQUIVALENT_MUTANTS.md.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
VENV="$REPO/.venv"
CHILDREN=${MUTATION_CHILDREN:-2}

# module name -> "source files (space-separated)|tests that exercise them"
CLIENT_TESTS="tests/client/test_client.py tests/client/test_client_state.py tests/client/test_ledger.py tests/client/test_ledger_attacks.py \
tests/shared/test_concepts.py tests/cli/test_cli_respond.py tests/system/test_mutation_survivors.py"
declare -A MODULES=(
  [mechanism]="shared/stats/design.py|tests/shared/test_mechanism.py tests/shared/test_randomizer.py tests/shared/test_estimate.py"
  [estimate]="shared/stats/estimate.py|tests/shared/test_estimate.py tests/shared/test_intervals.py"
  [intervals]="shared/stats/intervals.py|tests/shared/test_intervals.py tests/shared/test_estimate.py tests/shared/test_difference.py"
  [randomizer]="shared/mechanisms/randomizer.py|tests/shared/test_randomizer.py"
  [verify]="client/verify.py|$CLIENT_TESTS"
  [respondent]="client/respondent.py|$CLIENT_TESTS"
  [state]="client/state.py|$CLIENT_TESTS tests/client/test_client_migration.py"
  [store]="aggregator/store/surveys.py aggregator/store/drafts.py aggregator/store/pending.py \
aggregator/store/idempotency.py aggregator/store/tokens.py aggregator/store/releases.py aggregator/store/responses.py \
aggregator/store/counts.py aggregator/store/accounts.py aggregator/store/shares.py|tests/aggregator/test_aggregator_storage.py tests/aggregator/test_aggregator_surveys.py \
tests/aggregator/test_aggregator_intake.py tests/aggregator/test_aggregator_tokens_export.py tests/aggregator/test_aggregator_crosstab.py \
tests/aggregator/test_accounts.py tests/aggregator/test_release_batches.py tests/aggregator/test_unlinkable_storage.py \
tests/aggregator/test_storage_key.py"
)
ORDER=(mechanism estimate intervals randomizer verify respondent state store)

selected=("$@")
[ ${#selected[@]} -gt 0 ] || selected=("${ORDER[@]}")
for name in "${selected[@]}"; do
  [ -n "${MODULES[$name]:-}" ] || { echo "unknown module '$name'; one of: ${ORDER[*]}" >&2; exit 2; }
done

[ -x "$VENV/bin/mutmut" ] || "$VENV/bin/pip" install --quiet mutmut

WORK=$(mktemp -d "${TMPDIR:-/tmp}/ldp-mutation.XXXXXX")
[ -n "${KEEP:-}" ] || trap 'rm -rf "$WORK"' EXIT
RESULTS="$WORK/results.tsv"
: > "$RESULTS"

for name in "${selected[@]}"; do
  source_files=${MODULES[$name]%%|*}
  tests=${MODULES[$name]#*|}
  dir="$WORK/$name"
  mkdir -p "$dir/ldpsurvey"
  for package in shared client aggregator cli; do
    cp -r "$REPO/$package" "$dir/ldpsurvey/$package"
  done
  cp -r "$REPO/tests" "$dir/tests"
  find "$dir" -name __pycache__ -prune -exec rm -rf {} +
  # A regular package, not a namespace: a namespace would merge this unmutated copy (and the
  # checkout's editable install) with mutants/ldpsurvey, and the tests could import either.
  touch "$dir/ldpsurvey/__init__.py"
  {
    echo "[tool.mutmut]"
    echo "source_paths = [\"ldpsurvey\"]"
    printf 'only_mutate = [%s]\n' "$(printf '"ldpsurvey/%s", ' $source_files)"
    printf 'pytest_add_cli_args_test_selection = [%s]\n' "$(printf '"%s", ' $tests)"
    echo 'pytest_add_cli_args = ["-p", "no:cacheprovider"]'
    echo
    echo "[tool.pytest.ini_options]"
    echo 'testpaths = ["tests"]'
  } > "$dir/pyproject.toml"
  echo "== $name: mutating $source_files against $tests"
  # PYTHONPATH: processes the tests start import the mutants too, not the checkout. The folder
  # must exist before Python starts, or the import system caches it as missing.
  mkdir "$dir/mutants"
  (cd "$dir" && PYTHONPATH="$dir/mutants" "$VENV/bin/mutmut" run --max-children "$CHILDREN" \
     > "$dir/mutmut.log" 2>&1) || { echo "mutmut failed on $name, see below"; tail -30 "$dir/mutmut.log"; exit 1; }
  for source_file in $source_files; do
    echo -e "$name\t$source_file\t$dir/mutants/ldpsurvey/$source_file.meta" >> "$RESULTS"
  done
done

"$VENV/bin/python" - "$RESULTS" "$REPO/tests/EQUIVALENT_MUTANTS.md" <<'EOF'
"""Count the outcomes in each module's .meta file; mutants named in EQUIVALENT_MUTANTS.md count as killed."""
import json
import re
import sys
from pathlib import Path

KILLED, SURVIVED, TIMEOUT = {1, 3}, {0}, {36, -24, 24, 152, 255}
equivalent_file = Path(sys.argv[2])
equivalent = set(re.findall(r"`(ldpsurvey\.[\w.]+__mutmut_\d+)`", equivalent_file.read_text())
                 if equivalent_file.exists() else ())
print(f"\n{'module':24} {'mutants':>7} {'killed':>6} {'survived':>8} {'timeout':>7} {'equiv.':>6} {'score':>6}")
for line in Path(sys.argv[1]).read_text().splitlines():
    name, source, meta = line.split("\t")
    codes = json.loads(Path(meta).read_text())["exit_code_by_key"]
    killed = sum(code in KILLED for code in codes.values())
    timeout = sum(code in TIMEOUT for code in codes.values())
    survivors = sorted(key for key, code in codes.items() if code not in KILLED | TIMEOUT)
    excused = [key for key in survivors if key in equivalent]
    score = 100 * (killed + timeout + len(excused)) / len(codes)
    print(f"{source:24} {len(codes):7} {killed:6} {len(survivors):8} {timeout:7} {len(excused):6} {score:5.1f}%")
    for key in survivors:
        if key not in equivalent:
            print(f"    survived: {key}")
EOF
[ -z "${KEEP:-}" ] || echo "work folder kept: $WORK (cd there/<module> and run $VENV/bin/mutmut show <name>)"
