#!/usr/bin/env bash
# make demo: a real sync against the local Forms API simulator, no account needed.
#   scripts/demo.sh           build, start the simulators, sign in, sync twice, show rows,
#                             then sync the same simulators into Iceberg tables (./lake)
#   scripts/demo.sh --serve   (make sims) only start the simulators as the demo had
#                             them (same ports, key and seeds), until Ctrl-C
set -euo pipefail
cd "$(dirname "$0")/.."

serve=
case "${1:-}" in
--serve) serve=1 ;;
"") ;;
*) echo "usage: scripts/demo.sh [--serve]" >&2; exit 2 ;;
esac

GO=${GO:-go}
bin=bin/demo

# The demo's own binaries, in bin/demo: built as make test builds
# (-pgo=off: the profile only changes what the compiler inlines, 2-3% of
# CPU, and a demo does not need it); make build still builds the optimized
# bin/syncd that ships. go build prints nothing while it compiles, so the
# packages compiled are counted here.
build() {
  local pkgs=(./cmd/syncd ./cmd/formsim ./cmd/schedsim) list start total
  start=$(date +%s)
  echo "== build: syncd and the simulators into ./$bin (a first build compiles about 1,300 packages:"
  echo "   about 6 minutes on 2 idle cores, up to 15 on busy ones; later builds take seconds)"
  list=$(mktemp -t demo-pkgs.XXXXXX)
  # go list fetches the modules a fresh machine lacks.
  "$GO" list -deps "${pkgs[@]}" >"$list"
  total=$(wc -l <"$list" | tr -d ' ')
  # go build -v names each package as it compiles it (none when cached); a
  # line that names no package (an error) is printed as it is.
  "$GO" build -v -pgo=off -o "$bin/" "${pkgs[@]}" 2>&1 | awk -v total="$total" -v tty="$([ -t 1 ] && echo 1)" -v list="$list" '
    BEGIN { while ((getline p < list) > 0) pkg[p] = 1 }
    !($0 in pkg) { if (shown) printf "\n"; shown = 0; print; fflush(); next }
    {
      n++
      if (tty) { printf "\r   compiled %d of at most %d packages", n, total; shown = 1; fflush() }
      else if (n % 50 == 0) { printf "   compiled %d of at most %d packages\n", n, total; fflush() }
    }
    END { if (shown) printf "\n" }'
  rm -f "$list"
  echo "   built $bin/syncd, $bin/formsim and $bin/schedsim in $(( $(date +%s) - start ))s"
  echo
}
# make sims builds only what is missing.
if [ -z "$serve" ] || ! [ -x "$bin/syncd" ] || ! [ -x "$bin/formsim" ] || ! [ -x "$bin/schedsim" ]; then build; fi

export FORMS_API_KEY=demo_key_not_secret
port=${DEMO_PORT:-8088}
export DEMO_BASE_URL="http://127.0.0.1:${port}/v1/api"
log=$(mktemp -t formsim.XXXXXX)

# A fixed history (so rerunning the demo never changes what is already synced)
# of three forms; form 0 holds every question type the API documents.
"$bin/formsim" --addr "127.0.0.1:${port}" --api-key "$FORMS_API_KEY" --seed 1 --forms 3 \
  --submissions 5000 --end 2026-11-01T00:00:00Z >"$log" 2>&1 &
sim=$!
trap 'kill $sim 2>/dev/null || true; rm -f "$log"' EXIT
for _ in $(seq 50); do grep -q '^http' "$log" && break; sleep 0.1; done
grep -q '^http' "$log" || { echo "formsim did not start:"; cat "$log"; exit 1; }

# The scheduling API simulator (Cal.com API v2 with OAuth 2.0).
sport=${DEMO_SCHED_PORT:-8089}
export DEMO_SCHED_URL="http://127.0.0.1:${sport}"
slog=$(mktemp -t schedsim.XXXXXX)
"$bin/schedsim" --addr "127.0.0.1:${sport}" --seed 1 --bookings 120 >"$slog" 2>&1 &
ssim=$!
trap 'kill $sim $ssim 2>/dev/null || true; rm -f "$log" "$slog"' EXIT
for _ in $(seq 50); do grep -q 'client_secrets' "$slog" && break; sleep 0.1; done
grep -q 'client_secrets' "$slog" || { echo "schedsim did not start:"; cat "$slog"; exit 1; }
DEMO_SCHED_SECRET=$(grep -o '"client_secrets":\["[^"]*"' "$slog" | head -1 | cut -d'"' -f4)
export DEMO_SCHED_SECRET

# What a later shell needs to run syncd against the simulators (simulated
# keys and secrets, nothing real): `. state/demo.env`.
mkdir -p state
cat >state/demo.env <<ENV
# Written by scripts/demo.sh (make demo, make sims): the settings of configs/demo.yaml
# for the local simulators. Simulator keys and secrets only, nothing real.
export FORMS_API_KEY=$FORMS_API_KEY
export DEMO_BASE_URL=$DEMO_BASE_URL
export DEMO_SCHED_URL=$DEMO_SCHED_URL
export DEMO_SCHED_SECRET=$DEMO_SCHED_SECRET
ENV

# The sign-in as a person does it, the demo approving at the URL syncd
# prints as a browser would. A restarted schedsim knows none of the tokens
# it issued before, so make sims signs in again. The sign-in is kept in the
# state of the config given (default configs/demo.yaml).
signin() {
  local login lpid cfg=${1:-configs/demo.yaml}
  login=$(mktemp -t login.XXXXXX)
  "$bin/syncd" auth login --config "$cfg" --log-level warn >"$login" &
  lpid=$!
  for _ in $(seq 50); do grep -q '^http' "$login" && break; sleep 0.1; done
  curl -sf -L -o /dev/null "$(head -1 "$login")"
  wait $lpid
  tail -n +2 "$login"
  rm -f "$login"
}

if [ -n "$serve" ]; then
  echo "== sign in to the scheduling API again: syncd auth login (configs/demo.yaml, then configs/demo-iceberg.yaml)"
  signin
  signin configs/demo-iceberg.yaml
  echo
  echo "== the demo's simulators, as make demo starts them, until Ctrl-C:"
  echo "   Forms API       $DEMO_BASE_URL  (key $FORMS_API_KEY, seed 1: the demo's 3 forms)"
  echo "   scheduling API  $DEMO_SCHED_URL  (seed 1: the demo's 120 bookings)"
  echo "   in another terminal:  . state/demo.env && $bin/syncd once --config configs/demo.yaml"
  echo "   (or --config configs/demo-iceberg.yaml: the Iceberg tables under ./lake)"
  echo "   (the submissions the demo added are not in them: they serve the seeded history)"
  wait $sim $ssim
  exit 0
fi

echo "== sign in to the scheduling API: syncd auth login (the demo approves at the printed URL as a browser would)"
signin
echo

echo "== first pass: syncd once (configs/demo.yaml: simulators at $DEMO_BASE_URL and $DEMO_SCHED_URL, output in ./out)"
"$bin/syncd" once --config configs/demo.yaml --log-level warn

echo
# The API lists forms in its own order, syncd prints them sorted by id: name
# the form by its id, so the reader finds it in the second pass's lines.
form=$(curl -sf -H "Authorization: Bearer $FORMS_API_KEY" "$DEMO_BASE_URL/forms" | grep -o '"formId":"[^"]*"' | head -1 | cut -d'"' -f4)
echo "== 25 new submissions arrive in form $form"
for _ in 1 2 3; do
  curl -sf -X POST -H "Authorization: Bearer $FORMS_API_KEY" -H 'Content-Type: application/json' \
    -d '{"submissions":[{},{},{},{},{},{},{},{}]}' "$DEMO_BASE_URL/forms/$form/submissions" >/dev/null
done
curl -sf -X POST -H "Authorization: Bearer $FORMS_API_KEY" -H 'Content-Type: application/json' \
  -d '{"submissions":[{}]}' "$DEMO_BASE_URL/forms/$form/submissions" >/dev/null

echo
echo "== second pass: incremental, fetches only what is new"
"$bin/syncd" once --config configs/demo.yaml --log-level warn

echo
echo "== output"
files=$(find out -name '*.parquet' | wc -l | tr -d ' ')
tables=$(find out -mindepth 1 -maxdepth 1 -type d | wc -l | tr -d ' ')
echo "$tables tables, $files Parquet files under ./out (each table partitioned as its density asks; bin/demo/syncd state show --config configs/demo.yaml says how)"
"$bin/syncd" state show --config configs/demo.yaml | grep '^form'
echo
echo "== some of the rows it wrote: syncd rows (reads ./out; -o json prints every column whole)"
"$bin/syncd" rows --config configs/demo.yaml "$form" -n 5 --columns submission_id,submission_time,_synced_at
echo
"$bin/syncd" rows --config configs/demo.yaml bookings -n 5 --columns uid,status,start_time,_version_time,_deleted

echo
echo "== Iceberg: the same simulators into Apache Iceberg tables (configs/demo-iceberg.yaml: its own state,"
echo "   the embedded sqlite catalog state/iceberg-catalog.db, the warehouse ./lake; no server)"
signin configs/demo-iceberg.yaml
"$bin/syncd" once --config configs/demo-iceberg.yaml --log-level warn
echo
echo "== the Iceberg tables: syncd tables (reads the catalog; -o json for every field)"
"$bin/syncd" tables --config configs/demo-iceberg.yaml --log-level warn
echo "(ROWS are the rows in a table's data files. <table>_latest keeps one live row per record: a batch"
echo " adds an equality delete of every record it writes, so that only the newest row counts, until"
echo " syncd compact folds the deletes in; an engine's SELECT count(*) gives the live rows)"
icetable=$(cd lake/syncd.db && ls -d ./*"$form" | head -1) && icetable=${icetable#./}
icemeta=$(ls "lake/syncd.db/$icetable"/metadata/*.metadata.json | sort | tail -1)
cat <<Q

The simulators stopped with the demo. Start them again as the demo had them with
  make sims
and, in another terminal, sync again or look around:
  . state/demo.env && $bin/syncd once --config configs/demo.yaml
  $bin/syncd state show --config configs/demo.yaml
  $bin/syncd rows $form -o json --config configs/demo.yaml
The Iceberg tables: the catalog is state/iceberg-catalog.db (SQLite, the JDBC catalog's
iceberg_tables), the files under ./lake; sync them again with
  . state/demo.env && $bin/syncd once --config configs/demo-iceberg.yaml
With DuckDB (https://duckdb.org), if you have it:
  duckdb -c "SELECT count(*) AS rows, count(DISTINCT submission_id) AS distinct_ids, min(submission_time), max(submission_time)
             FROM read_parquet('out/form_*/**/*.parquet', hive_partitioning = true, union_by_name = true)"
  duckdb -c "INSTALL iceberg; LOAD iceberg; SELECT count(*) FROM iceberg_scan('$icemeta')"
Q
