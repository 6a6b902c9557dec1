# Sourced by the ci/ steps: the Python with this project installed. SUPERFLUID_CI_PYTHON names one;
# else scripts/setup-env makes (or refreshes) .venv/ and its python is used. setup-env (pip) runs
# without the signing key's variables: only the step itself reads them.
ci_python() {
  if [ -n "${SUPERFLUID_CI_PYTHON:-}" ]; then
    echo "$SUPERFLUID_CI_PYTHON"
    return
  fi
  env -u SUPERFLUID_SIGNING_KEY -u SUPERFLUID_SIGNING_KEY_FILE bash "$top/scripts/setup-env" >&2
  echo "$top/.venv/bin/python"
}
