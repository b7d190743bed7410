#!/usr/bin/env bash
# kafkacoord's two entry points:
#   ./dev.sh daemon [ARGS]   set up .venv, then run the daemon (embedded broker unless
#                            KAFKACOORD_BOOTSTRAP is set)
#   ./dev.sh test [PYTEST ARGS]  set up .venv, then lint, type-check, check the import
#                                layers (lint-imports) and run every test
#   ./dev.sh build           set up .venv and compile the hot path (each command above does
#                            it when a compiled module's source changed; KAFKACOORD_PURE=1
#                            skips it and runs the sources)
#   ./dev.sh kafka [ARGS]    set up .venv, then run one Apache Kafka broker in the foreground
#                            (data in var/kafka, bootstrap written to var/kafka/bootstrap)
#                            for tests and benches to share: KAFKACOORD_KAFKA_BOOTSTRAP=...
#                            --secure: SASL_SSL, SCRAM users and ACLs; var/kafka/ca.pem and
#                            client-{kafkacoord,user,admin}.properties beside the bootstrap
set -euo pipefail
cd "$(dirname "$0")"

PYTHON=${PYTHON:-python3}

setup() {
  local extras=$1
  if [[ ! -x .venv/bin/python ]]; then
    "$PYTHON" -m venv .venv
  fi
  # Reinstall only when pyproject.toml or the extras change.
  local stamp=".venv/.installed-$(cat pyproject.toml <(echo "$extras") | sha1sum | cut -c1-12)"
  if [[ ! -f $stamp ]]; then
    .venv/bin/python -m pip install --quiet --upgrade pip
    .venv/bin/python -m pip install --quiet -e ".${extras:+[$extras]}"
    rm -f .venv/.installed-*
    touch "$stamp"
  fi
}

# Compile the hot path with mypyc (setup.py) unless the build is current: kafkacoord's
# import guard (kafkacoord/compiled.py) knows from the digests of the compiled sources.
compile_hot_path() {
  [[ ${KAFKACOORD_PURE:-0} != 0 ]] && return 0
  if .venv/bin/python -W ignore -c \
    'import sys, kafkacoord; sys.exit(kafkacoord.BUILD.value != "compiled")' 2>/dev/null; then
    return 0
  fi
  echo "compiling the hot path with mypyc (about a minute)" >&2
  local log=${TMPDIR:-/tmp}/kafkacoord-compile.log
  if ! KAFKACOORD_COMPILE=1 .venv/bin/python setup.py build_ext --inplace >"$log" 2>&1; then
    # The sources still run (kafkacoord/compiled.py sees no current build); CI's
    # KAFKACOORD_REQUIRE_COMPILED turns this into a failed test.
    tail -n 30 "$log" >&2
    echo "compiling the hot path failed (log: $log); running from the sources" >&2
  fi
}

cmd=${1:-}
[[ $# -gt 0 ]] && shift
case $cmd in
  daemon)
    setup "build"
    compile_hot_path
    exec .venv/bin/kafkacoord daemon "$@"
    ;;
  kafka)
    setup "build"
    compile_hot_path
    exec .venv/bin/python -m kafkacoord.storage.kafka_broker --data-dir var/kafka "$@"
    ;;
  build)
    setup "build"
    compile_hot_path
    ;;
  test)
    setup "test,dev,spark,build"
    compile_hot_path
    .venv/bin/ruff check .
    .venv/bin/ruff format --check .
    .venv/bin/mypy
    .venv/bin/lint-imports
    set +e
    # Most tests wait on brokers, sessions and timeouts more than on the CPU, so two
    # workers take about half the wall time; KAFKACOORD_TEST_WORKERS=0 runs them in turn.
    .venv/bin/pytest -n "${KAFKACOORD_TEST_WORKERS:-2}" --dist loadgroup "$@"
    rc=$?
    set -e
    if [[ $rc -eq 5 ]]; then
      echo "pytest collected no tests (exit 5): nothing matched the selection" >&2
      exit 1
    fi
    exit $rc
    ;;
  *)
    echo "usage: ./dev.sh daemon [ARGS] | ./dev.sh test [PYTEST ARGS] | ./dev.sh build | ./dev.sh kafka [--secure] [ARGS]" >&2
    exit 2
    ;;
esac
