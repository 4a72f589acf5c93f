#!/usr/bin/env bash
# mf_ml100k.sh: MovieLens 100K, GroupLens' ua split, rank 100, default
# settings, 2 workers: the test RMSE after the default passes is <= 0.93
# (mf.h names the sweep behind the defaults). Skips (77) without the shared data.
. "$(dirname "$0")/common.sh"

ML=${STRATA_SHARED_DATA:-}/movielens-100k
if [ ! -f "$ML/ua.base" ] || [ ! -f "$ML/ua.test" ]; then
  echo "SKIP: ../shared/data/movielens-100k not found"
  exit 77
fi
mpi 3 "$STRATA" mf --data "$ML/ua.base" --test "$ML/ua.test" --rank 100 -q \
  --metrics-out m.json >run.log 2>&1
rc=$?; [ "$rc" = 0 ] || show_log run.log
expect_rc 0 "$rc" "ml-100k"
echo "test_rmse per pass: $(json m.json '[round(p["test_rmse"], 4) for p in m["per_pass"]]')"
r=$(json m.json 'm["test_rmse"]')
echo "test_rmse $r (limit 0.93), ratings $(json m.json 'm["ratings"]'), test ratings $(json m.json 'm["test_ratings"]')"
[ "$(json m.json '[m["ratings"], m["test_ratings"]]')" = "[90570, 9430]" ] || fail "rating counts"
python3 -c 'import sys; r = float(sys.argv[1]); sys.exit(0 if r <= 0.93 else 1)' "$r" ||
  fail "test_rmse $r > 0.93"
echo PASS
