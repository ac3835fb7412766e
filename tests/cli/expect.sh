# The CLI tests' checks, sourced by cli_test.sh and bench_test.sh: counters, fail, and expect.
failures=0
passes=0

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# expect CODE PATTERN -- command...: runs it, checks the exit code and that stdout+stderr match.
expect() {
  local code=$1 pattern=$2
  shift 3
  local out rc
  out=$("$@" 2>&1)
  rc=$?
  if [[ $rc -ne $code ]] || ! grep -Eq -- "$pattern" <<<"$out"; then
    fail "$* -> exit $rc (want $code), output must match /$pattern/:"
    sed 's/^/    /' <<<"$out" | head -20
  else
    passes=$((passes + 1))
  fi
}
