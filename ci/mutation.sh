#!/usr/bin/env bash
# Mutation testing of the exactness check and the wire codec with mutmut (docs/testing.md):
# each area's mutants run against that area's own unit tests, in a scratch copy of the
# repository, so that mutmut's mutants/ folder never lands in the work tree. A measurement,
# not part of ci/test.sh. Prints killed/total per file and per area, and the survivors.
#
#   bash ci/mutation.sh check|wire [max-children]      (default 2; run after ci/setup.sh)
#
# MUTATION_DIR (default /tmp/et-mutation) holds the scratch copies, made anew by each run;
# there `mutmut show NAME` shows a mutant and `mutmut run NAME...` retests some.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
area=${1:?usage: ci/mutation.sh check|wire [max-children]}
children=${2:-2}
mutmut_version=3.8.1

case "$area" in
check)
    mutate='harness/check/*'
    tests=(tests/unit/test_check.py tests/unit/test_check_models.py tests/unit/test_check_verdicts.py
        tests/unit/test_check_rendering.py tests/system/test_verdict_examined.py -m 'not slow')
    ;;
wire)
    mutate='harness/codec/wire/*'
    # test_stream_vectors.py's Python reader tests; its agent, QEMU and MCU tests are not
    # this area's unit tests (the agent's C reader is not mutated here).
    tests=(tests/unit/test_wire.py tests/unit/test_wire_limits.py tests/unit/test_wire_errors.py
        tests/unit/test_wire_hot_path.py tests/unit/test_vectors.py tests/system/test_stream_vectors.py
        tests/unit/test_stream_reader.py
        -k 'not hosted and not host_session and not arm64 and not mcu')
    ;;
*)
    echo "ci/mutation.sh: unknown area '$area'; give check or wire" >&2
    exit 2
    ;;
esac

if [ "$(.venv/bin/python -m pip show mutmut 2>/dev/null | sed -n 's/^Version: //p')" != "$mutmut_version" ]; then
    .venv/bin/python -m pip install -q "mutmut==$mutmut_version"
fi

scratch=${MUTATION_DIR:-/tmp/et-mutation}/$area
rm -rf "$scratch"
mkdir -p "$scratch"
# The repository as it is now (tracked and untracked files, not ignored ones): the harness
# reads files beside its package (agent/executorch-sdk.lock, devices/).
git ls-files -z --cached --others --exclude-standard | tar -C "$repo" --null -T - -cf - |
    tar -C "$scratch" -xf -
{
    echo "[mutmut]"
    echo "source_paths = harness"
    echo "only_mutate = $mutate"
    printf 'also_copy =\n'
    git ls-files | cut -d/ -f1 | sort -u | grep -vx -e harness -e tests | sed 's/^/    /'
    printf 'pytest_add_cli_args =\n    -p\n    no:cacheprovider\n'
    echo "pytest_add_cli_args_test_selection ="
    printf '    %s\n' "${tests[@]}"
} >"$scratch/setup.cfg"

cd "$scratch"
echo "== mutmut $mutmut_version on $mutate, max $children children, tests: ${tests[*]}"
start=$(date +%s)
"$repo/.venv/bin/mutmut" run --max-children "$children" >mutmut-run.log 2>&1 || {
    tail -c 3000 mutmut-run.log >&2
    exit 1
}
elapsed=$(($(date +%s) - start))
echo "== done in $elapsed s (log: $scratch/mutmut-run.log)"
"$repo/.venv/bin/mutmut" results --all true >mutmut-results.txt
"$repo/.venv/bin/python" - mutmut-results.txt <<'EOF'
import collections
import sys

counts: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
survivors = []
for line in open(sys.argv[1], encoding="utf-8"):
    name, _, status = line.strip().rpartition(": ")
    if not name:
        continue
    module = name.split(".x_")[0].split(".xǁ")[0]
    status = "killed" if status == "timeout" else status  # as mutmut's own score counts it
    counts[module][status] += 1
    if status != "killed":
        survivors.append(f"{name}: {status}")
area = collections.Counter()
for module, found in sorted(counts.items()):
    total = sum(found.values())
    area += found
    print(f"{module}: {found['killed']}/{total} killed ({100 * found['killed'] / total:.1f}%)")
total = sum(area.values())
print(f"area: {area['killed']}/{total} killed ({100 * area['killed'] / total:.1f}%)")
print("not killed:" if survivors else "no mutant survived")
print("\n".join(f"  {s}" for s in survivors))
EOF
