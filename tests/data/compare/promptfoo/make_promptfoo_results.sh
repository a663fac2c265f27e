#!/usr/bin/env bash
# Make the committed promptfoo output, offline, with promptfoo from its npm package and a local
# provider (provider.js): two prompts (chatty, terse) × 10 arithmetic tests, repeated twice.
#   npm i promptfoo        # in any folder; not a test dependency: results.json is committed
#   PROMPTFOO=/path/to/node_modules/.bin/promptfoo bash tests/data/compare/promptfoo/make_promptfoo_results.sh
set -euo pipefail
cd "$(dirname "$0")"
export PROMPTFOO_DISABLE_TELEMETRY=1 PROMPTFOO_DISABLE_UPDATE=1 PROMPTFOO_CONFIG_DIR="$(mktemp -d)"
"${PROMPTFOO:-promptfoo}" eval -c promptfooconfig.yaml --repeat 2 --no-cache --no-progress-bar -o results.json || test $? -eq 100
rm -rf "$PROMPTFOO_CONFIG_DIR"
