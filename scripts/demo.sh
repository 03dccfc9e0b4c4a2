#!/usr/bin/env bash
# make demo: a real sync against the local Forms API simulator, no account needed.
set -euo pipefail
cd "$(dirname "$0")/.."

export FORMS_API_KEY=demo_key_not_secret
port=${DEMO_PORT:-8088}
export DEMO_BASE_URL="http://127.0.0.1:${port}/v1/api"
log=$(mktemp -t formsim.XXXXXX)

# A fixed history (so rerunning the demo never changes what is already synced)
# of three forms; form 0 holds every question type the API documents.
./bin/formsim --addr "127.0.0.1:${port}" --api-key "$FORMS_API_KEY" --seed 1 --forms 3 \
  --submissions 5000 --end 2026-11-01T00:00:00Z >"$log" 2>&1 &
sim=$!
trap 'kill $sim 2>/dev/null || true; rm -f "$log"' EXIT
for _ in $(seq 50); do grep -q '^http' "$log" && break; sleep 0.1; done
grep -q '^http' "$log" || { echo "formsim did not start:"; cat "$log"; exit 1; }

# The scheduling API simulator (Cal.com API v2 with OAuth 2.0).
sport=${DEMO_SCHED_PORT:-8089}
export DEMO_SCHED_URL="http://127.0.0.1:${sport}"
slog=$(mktemp -t schedsim.XXXXXX)
./bin/schedsim --addr "127.0.0.1:${sport}" --seed 1 --bookings 120 >"$slog" 2>&1 &
ssim=$!
trap 'kill $sim $ssim 2>/dev/null || true; rm -f "$log" "$slog"' EXIT
for _ in $(seq 50); do grep -q 'client_secrets' "$slog" && break; sleep 0.1; done
grep -q 'client_secrets' "$slog" || { echo "schedsim did not start:"; cat "$slog"; exit 1; }
DEMO_SCHED_SECRET=$(grep -o '"client_secrets":\["[^"]*"' "$slog" | head -1 | cut -d'"' -f4)
export DEMO_SCHED_SECRET

echo "== sign in to the scheduling API: syncd auth login (the demo approves at the printed URL as a browser would)"
login=$(mktemp -t login.XXXXXX)
./bin/syncd auth login --config configs/demo.yaml --log-level warn >"$login" &
lpid=$!
for _ in $(seq 50); do grep -q '^http' "$login" && break; sleep 0.1; done
curl -sf -L -o /dev/null "$(head -1 "$login")"
wait $lpid
tail -n +2 "$login"
rm -f "$login"
echo

echo "== first pass: syncd once (configs/demo.yaml: simulators at $DEMO_BASE_URL and $DEMO_SCHED_URL, output in ./out)"
./bin/syncd once --config configs/demo.yaml --log-level warn

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
./bin/syncd once --config configs/demo.yaml --log-level warn

echo
echo "== output"
files=$(find out -name '*.parquet' | wc -l | tr -d ' ')
tables=$(find out -mindepth 1 -maxdepth 1 -type d | wc -l | tr -d ' ')
echo "$tables tables, $files Parquet files under ./out (Hive-partitioned by submission_date; bookings by version_date)"
./bin/syncd state show --config configs/demo.yaml | grep '^form'
cat <<'Q'

Query it with DuckDB (https://duckdb.org), for example:
  duckdb -c "SELECT count(*) AS rows, count(DISTINCT submission_id) AS distinct_ids, min(submission_time), max(submission_time)
             FROM read_parquet('out/form_*/*/*.parquet', hive_partitioning = true, union_by_name = true)"
and the bookings as they are now (the latest version of each):
  duckdb -c "SELECT uid, status, start_time FROM read_parquet('out/bookings/*/*.parquet', hive_partitioning = true, union_by_name = true)
             QUALIFY row_number() OVER (PARTITION BY uid ORDER BY _version_time DESC, _synced_at DESC) = 1 AND NOT _deleted"
Q
