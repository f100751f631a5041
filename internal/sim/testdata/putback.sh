#!/bin/sh
# putback.sh [1|2|3|4]...: puts back, one at a time, a defect the simulation
# must find, in a copy of the module, and runs the simulation there: it
# passes only if every run fails. Defects 1 and 2 are in the runner (TestSim,
# over the in-memory store), 3 and 4 in the DynamoDB store (TestSimDynamoAll,
# 3 over dynalite, 4 over moto, which has transactions, through
# internal/cmd/testenv).
#   1  a step's time limit is the first lease's, not the renewed one's
#   2  a reservation writes the lease computed when the call started
#   3  the one-write Acquire restarts in place a record past its retention,
#      keeping its counts and its steps
#   4  a staged commit writes its record without the result it keeps apart
#      (its result item, or its object in the blob store)
set -eu
root=$(cd "$(dirname "$0")/../../.." && pwd)
tmp=$(mktemp -d /tmp/idem-putback.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/testenv" "$root/internal/cmd/testenv"
status=0
for d in ${*:-1 2 3 4}; do
	dir=$tmp/defect$d
	mkdir -p "$dir"
	tar -C "$root" --exclude=./.git --exclude=./.cache --exclude=./node_modules -cf - . | tar -C "$dir" -xf -
	ln -s "$root/.cache" "$dir/.cache" # moto's venv
	ln -s "$root/node_modules" "$dir/node_modules" # dynalite
	case $d in
	1) file=steps.go
	   perl -0pi -e 's/\tif x\.rn == nil \{\n\t\treturn x\.c\.w, nil\n\t\}\n\treturn x\.rn\.window\(\)/\treturn x.c.w, nil/' "$dir/$file"
	   run="go test -count=1 ./internal/sim -run ^TestSim\$" ;;
	2) file=acquire.go
	   perl -0pi -e 's/\tc\.w = c\.r\.window\(c\.ctx, now\)\n//' "$dir/$file"
	   run="go test -count=1 ./internal/sim -run ^TestSim\$" ;;
	3) file=ddbstore/acquire.go
	   perl -0pi -e 's/ AND attribute_not_exists\(#carried\) AND attribute_not_exists\(#steps\)\)/)/' "$dir/$file"
	   run="$tmp/testenv -server dynalite -- go test -count=1 ./internal/sim -run ^TestSimDynamoAll\$" ;;
	4) file=ddbstore/tx.go
	   perl -0pi -e 's/\tif err := s\.writeApart\(ctx, op, c\); err != nil \{\n\t\treturn core\.Record\{\}, refusedCommit\(rec, err\) \/\/ no record written\n\t\}\n\t_, err = s\.client\.TransactWriteItems/\t_, err = s.client.TransactWriteItems/' "$dir/$file"
	   run="$tmp/testenv -server moto -- go test -count=1 ./internal/sim -run ^TestSimDynamoAll\$" ;;
	*) echo "putback: no defect $d" >&2; exit 2 ;;
	esac
	if cmp -s "$root/$file" "$dir/$file"; then
		echo "defect $d: the mutation no longer applies to $file" >&2; status=1; continue
	fi
	echo "defect $d: $(cd "$dir" && git diff --no-index --stat "$root/$file" "$file" 2>/dev/null | head -1)"
	if (cd "$dir" && $run) >"$tmp/out$d" 2>&1; then
		echo "defect $d put back: the simulation passed (FAIL)"; status=1
	elif ! grep -q ' violated (seed ' "$tmp/out$d"; then
		echo "defect $d put back: the run failed without a violation (FAIL):"; tail -20 "$tmp/out$d"; status=1
	else
		echo "defect $d put back: found"
		grep -E -A1 'violated|deliveries,|replay with' "$tmp/out$d" | head -12
	fi
done
exit $status
