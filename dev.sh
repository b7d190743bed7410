#!/usr/bin/env bash
# kafkacoord's two entry points:
#   ./dev.sh daemon [ARGS]   set up .venv, then run the daemon (embedded broker unless
#                            KAFKACOORD_BOOTSTRAP is set)
#   ./dev.sh test [PYTEST ARGS]  set up .venv, then lint, type-check, check the import
#                                layers (lint-imports) and run every test
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

cmd=${1:-}
[[ $# -gt 0 ]] && shift
case $cmd in
  daemon)
    setup ""
    exec .venv/bin/kafkacoord daemon "$@"
    ;;
  kafka)
    setup ""
    exec .venv/bin/python -m kafkacoord.storage.kafka_broker --data-dir var/kafka "$@"
    ;;
  test)
    setup "test,dev,spark"
    .venv/bin/ruff check .
    .venv/bin/ruff format --check .
    .venv/bin/mypy
    .venv/bin/lint-imports
    set +e
    .venv/bin/pytest "$@"
    rc=$?
    set -e
    if [[ $rc -eq 5 ]]; then
      echo "pytest collected no tests (exit 5): nothing matched the selection" >&2
      exit 1
    fi
    exit $rc
    ;;
  *)
    echo "usage: ./dev.sh daemon [ARGS] | ./dev.sh test [PYTEST ARGS] | ./dev.sh kafka [--secure] [ARGS]" >&2
    exit 2
    ;;
esac
