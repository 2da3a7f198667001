#!/bin/bash
# clients/typescript/lint.sh [PACKAGE_DIR] -- the static checks of a TypeScript package's src/:
# tsc --noEmit (its tsconfig.json: strict, and the flags beyond it) and ESLint with
# typescript-eslint's recommended rules (lint/eslint.config.mjs). PACKAGE_DIR defaults to this
# client; integrations/opencode/test.sh runs it on the plugin. The package's node_modules must
# be installed (its test.sh runs npm ci first). ESLint comes from lint/, a package of its own
# with its lock file: typescript-eslint needs TypeScript's compiler API, which TypeScript 7
# (the packages' tsc) no longer exports, so lint/ pins TypeScript 6 for it.
# Exits non-zero on any finding. Prints each check's name and how long it took.
set -euo pipefail
lint="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lint"
package="$(cd "${1:-$(dirname "${BASH_SOURCE[0]}")}" && pwd)"
check() {
  local name=$1 start=$SECONDS
  shift
  echo "== lint: $name"
  "$@"
  echo "== lint: $name passed in $((SECONDS - start))s"
}
npm ci --prefix "$lint" --no-audit --no-fund --silent
cd "$package"
check "tsc --noEmit ($(node_modules/.bin/tsc --version))" node_modules/.bin/tsc --noEmit -p tsconfig.json
check "eslint $("$lint/node_modules/.bin/eslint" --version)" \
  "$lint/node_modules/.bin/eslint" --config "$lint/eslint.config.mjs" --max-warnings 0 src
