# Sourced by the ci/ steps: the Python with this project installed. SUPERFLUID_CI_PYTHON names one;
# else scripts/setup-env makes (or refreshes) .venv/ and its python is used.
ci_python() {
  if [ -n "${SUPERFLUID_CI_PYTHON:-}" ]; then
    echo "$SUPERFLUID_CI_PYTHON"
    return
  fi
  bash "$top/scripts/setup-env" >&2
  echo "$top/.venv/bin/python"
}
