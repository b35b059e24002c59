#!/bin/sh
# Throughput and peak memory of the process supervisor streaming child output:
# 1 GiB through the stdout observer into a file, and 1 GiB against a 1 MiB cap.
# Both tests assert the process's peak RSS themselves; this adds timings.
#
#   benches/supervisor-output.sh            # debug build
#   PROFILE=release benches/supervisor-output.sh
set -eu
cd "$(dirname "$0")/.."

profile=${PROFILE:-dev}
binary=$(cargo test -p specbridge-engine --test supervisor_output_cap --profile "$profile" --no-run 2>&1 |
    sed -n 's/.*Executable .*(\(.*\)).*/\1/p' | tail -n 1)
[ -x "$binary" ] || { echo "could not find the supervisor_output_cap test binary" >&2; exit 1; }

streamed=a_gibibyte_streamed_below_its_cap_stays_in_flat_memory
capped=a_gibibyte_of_output_with_a_mebibyte_cap_keeps_the_cap_in_flat_memory

if command -v hyperfine >/dev/null 2>&1; then
    hyperfine --warmup 1 \
        "$binary --exact $streamed --quiet" \
        "$binary --exact $capped --quiet"
else
    for test in "$streamed" "$capped"; do
        echo "== $test"
        if [ -x /usr/bin/time ]; then
            /usr/bin/time -f '%e s wall, %M KiB peak RSS (whole test binary)' "$binary" --exact "$test" --quiet
        else
            time "$binary" --exact "$test" --quiet
        fi
    done
fi
