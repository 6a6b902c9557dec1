#!/bin/sh
# Build the reference baseRT engine's variants and its tiny model into the native cache:
#   $SUPERFLUID_NATIVE_CACHE/basert/<variant>/libbaseRT.so   (.dylib on macOS)
#   $SUPERFLUID_NATIVE_CACHE/basert/models/tiny.base
# Default cache: <checkout>/.cache/native. Idempotent: the stamp is the sha256 of this script, the
# engine source, our header and make_model.py; when it is unchanged and every output exists, nothing
# is rebuilt. Each output is written beside its final name and renamed into place, so a concurrent
# build or a reader never sees half a file.
# Environment: CC (default cc), PYTHON (default python3), SUPERFLUID_NATIVE_CACHE.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
checkout=$(cd "$here/../../.." && pwd)
cache=${SUPERFLUID_NATIVE_CACHE:-$checkout/.cache/native}
out="$cache/basert"
header_dir="$checkout/runtime/basert/include"
cc=${CC:-cc}
python=${PYTHON:-python3}

case "$(uname -s)" in
  Darwin) lib=libbaseRT.dylib; shared="-dynamiclib -install_name @rpath/libbaseRT.dylib" ;;
  *) lib=libbaseRT.so; shared="-shared" ;;
esac

# name | version string | ABI number stated (- none) | get_config_into (yes/no) | extra config
# fields after our 1792 bytes | symbol left out (- none). See engine.c for the switches.
variants='0.2.6|0.2.6|-|no|0|-
0.3.0|0.3.0|-|no|0|-
0.3.1|0.3.1|1|no|0|-
0.4.0|0.4.0|1|yes|5|-
0.5.0|0.5.0|2|yes|5|-
missing-symbol|0.3.1|1|no|0|baseRT_decode_step
wrong-size|0.3.0|-|no|5|-'

sha256() {
  if command -v sha256sum >/dev/null 2>&1; then sha256sum "$@"; else shasum -a 256 "$@"; fi
}

stamp=$( (sha256 "$here/build.sh" "$here/engine.c" "$here/make_model.py" "$header_dir/baseRT.h" \
          | awk '{print $1}'; echo "$variants"; echo "$lib") | sha256 | awk '{print $1}')

complete() {
  [ -f "$out/.stamp" ] && [ "$(cat "$out/.stamp")" = "$stamp" ] || return 1
  [ -f "$out/models/tiny.base" ] || return 1
  echo "$variants" | while IFS='|' read -r name _rest; do
    [ -f "$out/$name/$lib" ] || exit 1
  done
}

if complete; then
  echo "basert reference engine: up to date in $out"
  exit 0
fi

mkdir -p "$out/models"
echo "$variants" | while IFS='|' read -r name version abi into extra omit; do
  mkdir -p "$out/$name"
  tmp="$out/$name/.$lib.$$"
  set -- -DREF_VERSION="\"$version\"" -DREF_VARIANT="\"$name\""
  [ "$abi" = - ] || set -- "$@" -DREF_ABI="$abi"
  [ "$into" = no ] || set -- "$@" -DREF_CONFIG_INTO
  [ "$extra" = 0 ] || set -- "$@" -DREF_CONFIG_EXTRA="$extra"
  case "$omit" in
    -) ;;
    baseRT_decode_step) set -- "$@" -DREF_OMIT_DECODE_STEP ;;
    *) echo "build.sh: no switch leaves out $omit" >&2; exit 1 ;;
  esac
  # shellcheck disable=SC2086  # $shared is a word list by design
  "$cc" -std=c11 -O2 -Wall -Wextra -Werror -fPIC -fvisibility=hidden $shared -I"$header_dir" "$@" \
    -o "$tmp" "$here/engine.c"
  mv -f "$tmp" "$out/$name/$lib"
done

tmp="$out/models/.tiny.base.$$"
"$python" "$here/make_model.py" "$tmp"
mv -f "$tmp" "$out/models/tiny.base"

printf '%s\n' "$stamp" > "$out/.stamp.$$"
mv -f "$out/.stamp.$$" "$out/.stamp"
echo "basert reference engine: built $(echo "$variants" | wc -l | tr -d ' ') variants in $out"
